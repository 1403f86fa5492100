"""Timed all-reduces across a set of GPUs, one process per GPU, as SGLang's TP ranks run them: a
large one for bandwidth and a sweep of decode's small messages for latency. Run as a script.

Standalone on purpose (standard library and torch only): `bundle.doctor.allreduce_runs` runs this
file with the host's Python or mounts it into the worker image, where the `bundle` package need not
be installed; it can as well be copied to any GPU machine and run there.

    python3 allreduce_probe.py --gpus 0,1,2,3 [--p2p off] [--mib 64] [--iters 20] [--timeout 60]
                               [--sizes 8192,...,1048576] [--custom-ar]
    python3 allreduce_probe.py --backend gloo --world 4     # CPU processes: the same code path

The parent starts one worker process per GPU (torch.distributed, backend nccl, rendezvous over TCP
on 127.0.0.1), with NCCL_P2P_DISABLE=1 when `--p2p off`, and NCCL_DEBUG=INFO so NCCL names the
transport of every channel ("via P2P/CUMEM", "via SHM/direct/direct", "via NET/Socket"). Each
worker checks peer access between the GPUs, warms up, times `--iters` all-reduces of `--mib` MiB
and checks the sum, then times `--lat-iters` back-to-back all-reduces of each of `--sizes` bytes
(BF16, as SGLang's hidden states: 8 KB is one token of DeepSeek-V4's 4096-wide hidden state, decode's
batch-1 message), as nccl-tests times them: the mean of a run of back-to-back calls, synchronised at
its end. With `--custom-ar` it times SGLang's own custom all-reduce as well, where SGLang would use it
(two GPUs, or all joined by NVLink); elsewhere it says why it is off. `--backend gloo` runs the same
workers as CPU processes (no GPU, FP32: gloo reduces no BF16), for hosts without one.

A worker that has not finished `--timeout` seconds after the start is a hang: the parent kills every
worker and says so. All output is one stream, ending with one line:
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
ERROR_CHARS = 1200  # a rank's error, cut to keep its line (with its latencies) under PIPE_BUF
# Decode's all-reduce messages: 8 KB (one token's BF16 hidden state, 4096 wide) up to 1 MB (128 tokens).
DECODE_SIZES = tuple(8192 * 2 ** i for i in range(8))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _time_back_to_back(reduce, tensor, iters: int, sync) -> float:
    """Seconds per call: `iters` calls in a row, synchronised once at the end (nccl-tests' way)."""
    for _ in range(3):
        reduce(tensor)
    sync()
    start = time.perf_counter()
    for _ in range(iters):
        reduce(tensor)
    sync()
    return (time.perf_counter() - start) / iters


def _latency_sweep(reduce, sizes, dtype, device, iters: int, sync, barrier) -> dict[str, float]:
    """{message bytes: seconds per all-reduce} for each size (the keys are strings: JSON's)."""
    import torch

    element = torch.empty((), dtype=dtype).element_size()
    out = {}
    for size in sizes:
        tensor = torch.ones(max(1, size // element), dtype=dtype, device=device)
        barrier()  # every rank starts each size together: a late rank would count as latency
        out[str(size)] = _time_back_to_back(reduce, tensor, iters, sync)
    return out


def _custom_allreduce(world: int, rank: int, sizes, iters: int) -> dict:
    """SGLang's own custom all-reduce (the worker image's SGLang), timed where SGLang would use it."""
    try:
        import torch
        import torch.distributed as dist
        from sglang.srt.distributed.device_communicators.custom_all_reduce import CustomAllreduce
    except Exception as exc:  # noqa: BLE001 - reported as data
        return {"on": False, "reason": f"SGLang's custom all-reduce does not import here: {type(exc).__name__}: {exc}"}
    cpu_group = dist.new_group(backend="gloo")  # SGLang hands it its CPU group to exchange IPC handles
    try:
        ca = CustomAllreduce(group=cpu_group, device=torch.device("cuda", rank))
        probe = torch.ones(DECODE_SIZES[0] // 2, dtype=torch.bfloat16, device=f"cuda:{rank}")
        if ca.disabled or not ca.should_custom_ar(probe):
            why = ("disabled at set-up (no peer access, an unsupported world size, or the library is missing)"
                   if ca.disabled else f"{world} GPUs not all joined by NVLink: SGLang leaves it to NCCL")
            return {"on": False, "reason": why}
        sweep = _latency_sweep(ca.custom_all_reduce, [s for s in sizes if s <= ca.max_size], torch.bfloat16,
                               f"cuda:{rank}", iters, torch.cuda.synchronize, lambda: dist.barrier(cpu_group))
        ca.close()
        return {"on": True, "latency_s": sweep}
    except Exception as exc:  # noqa: BLE001 - reported as data
        return {"on": False, "reason": f"{type(exc).__name__}: {exc}"}


def run_worker(args) -> int:
    """One rank: all-reduce bandwidth, a correctness check and the small-message latencies; prints
    one RANK line."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    rank, world = args.rank, args.world
    gpu = args.backend == "nccl"
    out = {"rank": rank, "ok": False, "backend": args.backend}
    try:
        if gpu:
            torch.cuda.set_device(rank)  # CUDA_VISIBLE_DEVICES holds the probed GPUs, in order
            out["device"] = torch.cuda.get_device_name(rank)
            if rank == 0:
                out["peer_access"] = {f"{a}->{b}": bool(torch.cuda.can_device_access_peer(a, b))
                                      for a in range(world) for b in range(world) if a != b}
            device, sync, dtype = f"cuda:{rank}", torch.cuda.synchronize, torch.bfloat16
            extra = {"device_id": torch.device("cuda", rank)}
        else:
            out["device"] = "cpu"
            device, sync, dtype, extra = "cpu", (lambda: None), torch.float32, {}
        dist.init_process_group(args.backend, init_method=f"tcp://127.0.0.1:{args.port}", rank=rank,
                                world_size=world, timeout=timedelta(seconds=args.timeout), **extra)
        numel = args.mib * 1024 * 1024 // 4
        tensor = torch.ones(numel, dtype=torch.float32, device=device)
        seconds = _time_back_to_back(dist.all_reduce, tensor, args.iters, sync) if numel else None
        # Correctness: rank r contributes r + 1 everywhere; every element must sum to 1 + ... + world.
        check = torch.full((max(numel, 1024),), float(rank + 1), dtype=torch.float32, device=device)
        dist.all_reduce(check)
        sync()
        expected = world * (world + 1) / 2
        low, high = float(check.min().item()), float(check.max().item())
        out["ok"] = low == high == expected
        if seconds:
            size = numel * 4
            out.update(seconds_per_iter=seconds, bytes=size, algbw_gbps=size / seconds / 1e9,
                       busbw_gbps=size / seconds / 1e9 * 2 * (world - 1) / world)
        if gpu:
            out["nccl_version"] = ".".join(map(str, torch.cuda.nccl.version()))
        if not out["ok"]:
            out["error"] = f"wrong all-reduce result: min {low}, max {high}, expected {expected}"
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
        if out["ok"] and sizes:
            out["latency_s"] = _latency_sweep(dist.all_reduce, sizes, dtype, device, args.lat_iters, sync,
                                              dist.barrier)
            if gpu and args.custom_ar:
                out["custom_ar"] = _custom_allreduce(world, rank, sizes, args.lat_iters)
        dist.destroy_process_group()
    except Exception as exc:  # noqa: BLE001 - reported as data, the parent decides
        out["error"] = f"{type(exc).__name__}: {exc}"
    if len(out.get("error") or "") > ERROR_CHARS:
        out["error"] = out["error"][:ERROR_CHARS] + " ..."
    if "custom_ar" in out and len(out["custom_ar"].get("reason") or "") > 300:
        out["custom_ar"]["reason"] = out["custom_ar"]["reason"][:300] + " ..."
    # One write(2) of the whole line: the ranks share the parent's pipe (their stderr too), and
    # print() may reach it in more than one write (unbuffered, it writes the text and its newline
    # apart), so another rank's output could land inside the line (seen in CI: two ranks' JSON on
    # one line). A pipe keeps a write of at most PIPE_BUF (4096) bytes whole, hence the caps.
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), (RANK_PREFIX + json.dumps(out) + "\n").encode())
    return 0 if out["ok"] else 1


def run_parent(args) -> dict:
    gpus = [g.strip() for g in args.gpus.split(",") if g.strip()]
    result: dict = {"gpus": [int(g) for g in gpus], "p2p": args.p2p, "mib": args.mib, "iters": args.iters,
                    "backend": args.backend, "timeout_s": args.timeout, "ok": False, "hung": False}
    if args.backend == "gloo":
        gpus = [str(r) for r in range(args.world)]
        result["gpus"] = []
    if not gpus:
        result["error"] = "no GPU given (--gpus)"
        return result
    # One GPU is allowed: a one-rank all-reduce moves nothing, but runs the same NCCL set-up, kernels
    # and checks (a self-test of the probe where only one GPU is lent).
    env = {**os.environ, "NCCL_DEBUG": "INFO",
           "NCCL_DEBUG_SUBSYS": os.environ.get("NCCL_DEBUG_SUBSYS", "INIT,P2P,SHM,NET")}
    if args.backend == "nccl":
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    if args.p2p == "off":
        env["NCCL_P2P_DISABLE"] = "1"
    else:
        env.pop("NCCL_P2P_DISABLE", None)
    port = _free_port()
    started = time.monotonic()
    workers = [subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--role", "worker", "--rank", str(r),
         "--world", str(len(gpus)), "--port", str(port), "--mib", str(args.mib), "--iters", str(args.iters),
         "--timeout", str(args.timeout), "--backend", args.backend, "--sizes", args.sizes,
         "--lat-iters", str(args.lat_iters), *(["--custom-ar"] if args.custom_ar else [])],
        env=env, start_new_session=True)
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
    parser.add_argument("--backend", choices=["nccl", "gloo"], default="nccl",
                        help="gloo: CPU processes (--world of them), no GPU")
    parser.add_argument("--sizes", default=",".join(map(str, DECODE_SIZES)),
                        help="small-message latency sweep, bytes, comma-separated ('' skips it)")
    parser.add_argument("--lat-iters", type=int, default=50, help="back-to-back all-reduces per size")
    parser.add_argument("--custom-ar", action="store_true", help="time SGLang's custom all-reduce as well")
    parser.add_argument("--timeout", type=float, default=60.0, help="hang bound in seconds, start to end")
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--world", type=int, default=2, help="ranks (gloo: the processes to start)")
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
