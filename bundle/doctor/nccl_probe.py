"""A short, timed NCCL all-reduce across a set of GPUs, one process per GPU, as SGLang's TP ranks
run it: run as a script.

Standalone on purpose (standard library and torch only): `bundle.doctor.nccl_check` runs this file
with the host's Python or mounts it into the worker image, where the `bundle` package need not be
installed; it can as well be copied to any GPU machine and run there.

    python3 nccl_probe.py --gpus 0,1,2,3 [--p2p off] [--mib 64] [--iters 20] [--timeout 60]

The parent starts one worker process per GPU (torch.distributed, backend nccl, rendezvous over TCP
on 127.0.0.1), with NCCL_P2P_DISABLE=1 when `--p2p off`, and NCCL_DEBUG=INFO so NCCL names the
transport of every channel ("via P2P/CUMEM", "via SHM/direct/direct", "via NET/Socket"). Each
worker checks peer access between the GPUs, warms up, times `--iters` all-reduces of `--mib` MiB
and checks the sum. A worker that has not finished `--timeout` seconds after the start is a hang:
the parent kills every worker and says so. All output is one stream, ending with one line:
    NCCL_PROBE_RESULT {json}
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time

RESULT_PREFIX = "NCCL_PROBE_RESULT "
RANK_PREFIX = "NCCL_PROBE_RANK "
ERROR_CHARS = 2000  # a rank's error, cut to keep its line under PIPE_BUF


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_worker(args) -> int:
    """One rank: all-reduce timing and a correctness check; prints one RANK line."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    rank, world = args.rank, args.world
    out = {"rank": rank, "ok": False}
    try:
        torch.cuda.set_device(rank)  # CUDA_VISIBLE_DEVICES holds the probed GPUs, in order
        out["device"] = torch.cuda.get_device_name(rank)
        if rank == 0:
            out["peer_access"] = {f"{a}->{b}": bool(torch.cuda.can_device_access_peer(a, b))
                                  for a in range(world) for b in range(world) if a != b}
        dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank,
                                world_size=world, timeout=timedelta(seconds=args.timeout),
                                device_id=torch.device("cuda", rank))
        numel = args.mib * 1024 * 1024 // 4
        tensor = torch.ones(numel, dtype=torch.float32, device=f"cuda:{rank}")
        for _ in range(3):  # warm-up: communicator set-up, channels, first touch
            dist.all_reduce(tensor)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(tensor)
        torch.cuda.synchronize()
        seconds = (time.perf_counter() - start) / args.iters
        # Correctness: rank r contributes r + 1 everywhere; every element must sum to 1 + ... + world.
        tensor.fill_(float(rank + 1))
        dist.all_reduce(tensor)
        torch.cuda.synchronize()
        expected = world * (world + 1) / 2
        low, high = float(tensor.min().item()), float(tensor.max().item())
        size = numel * 4
        out.update(ok=low == high == expected, seconds_per_iter=seconds, bytes=size,
                   algbw_gbps=size / seconds / 1e9, busbw_gbps=size / seconds / 1e9 * 2 * (world - 1) / world,
                   nccl_version=".".join(map(str, torch.cuda.nccl.version())))
        if not out["ok"]:
            out["error"] = f"wrong all-reduce result: min {low}, max {high}, expected {expected}"
        dist.destroy_process_group()
    except Exception as exc:  # noqa: BLE001 - reported as data, the parent decides
        out["error"] = f"{type(exc).__name__}: {exc}"
    if len(out.get("error") or "") > ERROR_CHARS:
        out["error"] = out["error"][:ERROR_CHARS] + " ..."
    # One write(2) of the whole line: the ranks share the parent's pipe (their stderr too), and
    # print() may reach it in more than one write (unbuffered, it writes the text and its newline
    # apart), so another rank's output could land inside the line (seen in CI: two ranks' JSON on
    # one line). A pipe keeps a write of at most PIPE_BUF (4096) bytes whole, hence the error's cap.
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), (RANK_PREFIX + json.dumps(out) + "\n").encode())
    return 0 if out["ok"] else 1


def run_parent(args) -> dict:
    gpus = [g.strip() for g in args.gpus.split(",") if g.strip()]
    result: dict = {"gpus": [int(g) for g in gpus], "p2p": args.p2p, "mib": args.mib, "iters": args.iters,
                    "timeout_s": args.timeout, "ok": False, "hung": False}
    if not gpus:
        result["error"] = "no GPU given (--gpus)"
        return result
    # One GPU is allowed: a one-rank all-reduce moves nothing, but runs the same NCCL set-up, kernels
    # and checks (a self-test of the probe where only one GPU is lent).
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(gpus), "NCCL_DEBUG": "INFO",
           "NCCL_DEBUG_SUBSYS": os.environ.get("NCCL_DEBUG_SUBSYS", "INIT,P2P,SHM,NET")}
    if args.p2p == "off":
        env["NCCL_P2P_DISABLE"] = "1"
    else:
        env.pop("NCCL_P2P_DISABLE", None)
    port = _free_port()
    started = time.monotonic()
    workers = [subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--role", "worker", "--rank", str(r),
         "--world", str(len(gpus)), "--port", str(port), "--mib", str(args.mib), "--iters", str(args.iters),
         "--timeout", str(args.timeout)], env=env, start_new_session=True)
        for r in range(len(gpus))]
    deadline = started + args.timeout
    while time.monotonic() < deadline and any(w.poll() is None for w in workers):
        time.sleep(0.05)
    if any(w.poll() is None for w in workers):
        result["hung"] = True
        result["error"] = f"the all-reduce did not finish within {args.timeout:g} s (a hang): workers killed"
        for w in workers:
            if w.poll() is None:
                try:
                    os.killpg(w.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for w in workers:
            w.wait()
    result["seconds"] = round(time.monotonic() - started, 3)
    result["exit_codes"] = [w.returncode for w in workers]
    result["ok"] = not result["hung"] and all(code == 0 for code in result["exit_codes"])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=["parent", "worker"], default="parent")
    parser.add_argument("--gpus", default="0,1", help="GPU indices, comma-separated (parent)")
    parser.add_argument("--p2p", choices=["on", "off"], default="on",
                        help="off: NCCL_P2P_DISABLE=1 for the workers")
    parser.add_argument("--mib", type=int, default=64, help="all-reduce size in MiB")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=60.0, help="hang bound in seconds, start to end")
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--world", type=int, default=1)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    if args.role == "worker":
        return run_worker(args)
    os.dup2(sys.stdout.fileno(), sys.stderr.fileno())  # one ordered stream for the caller
    try:
        result = run_parent(args)
    except Exception as exc:  # noqa: BLE001 - reported as data
        result = {"ok": False, "hung": False, "error": f"{type(exc).__name__}: {exc}"}
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
