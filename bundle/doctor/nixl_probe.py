"""A NIXL transfer between two agents in two processes, as prefill and decode do it: run as a script.

Standalone on purpose (standard library, nixl_cu13, and torch only for VRAM): `bundle.nixl_check`
runs this file with the host's Python or mounts it into the worker image, where the `bundle`
package need not be installed.

    python3 nixl_probe.py --mem DRAM|VRAM [--size BYTES] [--target-gpu N] [--initiator-gpu N]

The target process registers a zeroed buffer and hands its NIXL metadata and address to the
initiator over a pipe; the initiator registers a patterned buffer and WRITEs it into the target
with the UCX backend, then notifies; the target checks the bytes it received. With UCX_PROTO_INFO=y
(set by the caller) UCX prints the protocol it selected for each operation on stdout; this script
sends its own stderr there too, so one stream holds both, and ends with one line:
    NIXL_PROBE_RESULT {json}
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import time

RESULT_PREFIX = "NIXL_PROBE_RESULT "
_TIMEOUT_S = 60.0


def _pattern(size: int) -> bytes:
    return bytes((i * 131 + 7) % 251 for i in range(size))


def _make_buffer(mem: str, size: int, gpu: int, fill: bytes | None):
    """Return (keepalive, address, device_id, read_back) for a buffer of `size` bytes."""
    if mem == "VRAM":
        import torch  # only the GPU path needs it; the image has it

        torch.cuda.set_device(gpu)
        if fill is None:
            tensor = torch.zeros(size, dtype=torch.uint8, device=f"cuda:{gpu}")
        else:
            tensor = torch.frombuffer(bytearray(fill), dtype=torch.uint8).to(f"cuda:{gpu}")
        torch.cuda.synchronize()
        return tensor, tensor.data_ptr(), gpu, lambda: bytes(tensor.cpu().numpy().tobytes())
    import ctypes

    buf = (ctypes.c_ubyte * size)()
    if fill is not None:
        ctypes.memmove(buf, fill, size)
    return buf, ctypes.addressof(buf), 0, lambda: bytes(buf)


def _agent(name: str):
    from nixl_cu13 import nixl_agent, nixl_agent_config

    return nixl_agent(name, nixl_agent_config(backends=["UCX"]))


def _send(stream, obj) -> None:
    stream.write(json.dumps(obj) + "\n")
    stream.flush()


def _receive(stream) -> dict:
    line = stream.readline()
    if not line:
        raise RuntimeError("the other NIXL process closed the pipe (it failed; its output is above)")
    return json.loads(line)


def run_target(args) -> int:
    """Child: own a zeroed buffer, wait for the initiator's notification, report what arrived."""
    # UCX prints on fd 1: keep the pipe to the initiator on a private fd, send fd 1 to the log stream.
    pipe = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    keep, addr, dev, read_back = _make_buffer(args.mem, args.size, args.target_gpu, None)
    agent = _agent("bundle-probe-target")
    agent.register_memory([(addr, args.size, dev, "")], args.mem)
    _send(pipe, {"metadata": agent.get_agent_metadata().hex(), "addr": addr, "dev": dev})
    deadline = time.monotonic() + _TIMEOUT_S
    notified = False
    while time.monotonic() < deadline and not notified:
        notifs = agent.get_new_notifs()
        notified = any(b"bundle-probe-done" in m for msgs in notifs.values() for m in msgs)
        time.sleep(0.005)
    data = read_back()
    _send(pipe, {"notified": notified, "sha256": hashlib.sha256(data).hexdigest(),
                       "nonzero": sum(1 for b in data if b)})
    del keep
    return 0


def run_initiator(args) -> dict:
    result: dict = {"mem": args.mem, "size": args.size, "ok": False, "state": None,
                    "backend": None, "bytes_equal": False, "pid": os.getpid(),
                    "memlock_soft": resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]}
    child = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--role", "target", "--mem", args.mem,
         "--size", str(args.size), "--target-gpu", str(args.target_gpu)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        hello = _receive(child.stdout)
        fill = _pattern(args.size)
        keep, addr, dev, _ = _make_buffer(args.mem, args.size, args.initiator_gpu, fill)
        agent = _agent("bundle-probe-initiator")
        agent.register_memory([(addr, args.size, dev, "")], args.mem)
        remote = agent.add_remote_agent(bytes.fromhex(hello["metadata"]))
        handle = agent.initialize_xfer(
            "WRITE",
            agent.get_xfer_descs([(addr, args.size, dev)], args.mem),
            agent.get_xfer_descs([(hello["addr"], args.size, hello["dev"])], args.mem),
            remote, b"bundle-probe-done")
        started = time.monotonic()
        state = agent.transfer(handle)
        while state == "PROC" and time.monotonic() - started < _TIMEOUT_S:
            time.sleep(0.001)
            state = agent.check_xfer_state(handle)
        result["seconds"] = round(time.monotonic() - started, 6)
        result["state"] = state
        result["backend"] = agent.query_xfer_backend(handle)
        report = _receive(child.stdout)
        result["target_notified"] = report["notified"]
        result["bytes_equal"] = report["sha256"] == hashlib.sha256(fill).hexdigest()
        result["ok"] = state == "DONE" and result["bytes_equal"]
        del keep
    finally:
        try:
            child.wait(timeout=_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            child.kill()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=["initiator", "target"], default="initiator")
    parser.add_argument("--mem", choices=["DRAM", "VRAM"], default="DRAM")
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--target-gpu", type=int, default=0)
    parser.add_argument("--initiator-gpu", type=int, default=0)
    args = parser.parse_args(argv)
    # UCX and NIXL log on stderr, UCX_PROTO_INFO on stdout: one ordered stream for the caller.
    sys.stdout.flush()
    if args.role == "target":
        return run_target(args)
    os.dup2(sys.stdout.fileno(), sys.stderr.fileno())
    try:
        result = run_initiator(args)
    except Exception as exc:  # noqa: BLE001 - reported as data: the caller decides what a failure means
        result = {"mem": args.mem, "size": args.size, "ok": False,
                  "error": f"{type(exc).__name__}: {exc}"}
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return 0 if result.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
