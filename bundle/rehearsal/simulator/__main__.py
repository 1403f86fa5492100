"""`python -m bundle.rehearsal.simulator [--] [python3 -m sglang.launch_server] ARGS...` (the rehearsal
image's `sglang-worker-simulator`). Serves the HTTP API on --host/--port and, in prefill mode, the
bootstrap channel on --disaggregation-bootstrap-port too."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys

import uvicorn

from bundle.rehearsal.simulator.args import parse_launch_args
from bundle.rehearsal.simulator import speed
from bundle.rehearsal.simulator.knobs import Knobs
from bundle.rehearsal.simulator.resolve import DSparkRefused, resolve_like_sglang
from bundle.rehearsal.simulator.server import SGLANG_VERSION, Simulator, create_app

log = logging.getLogger("simulator")


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        raise SystemExit(f"worker simulator: cannot listen on {host}:{port}: {exc}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def main(argv: list[str] | None = None) -> int:
    launch = parse_launch_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=str(launch.get("log_level", "info")).upper(),
                        format="[%(asctime)s] %(message)s", datefmt="%Y-%m-%d %H:%M:%S", force=True)
    knobs = Knobs.from_env()
    sim = Simulator(launch, knobs)
    # SIM_SPEED_RULES / SIM_REFUSE_ARGS: speed or refusal chosen by this server's own parsed
    # arguments (bundle tune's candidates on the rehearsal): SIMULATED, never a measurement.
    try:
        _, resolved = resolve_like_sglang(dict(launch.fields), sim.model.config)
    except DSparkRefused as exc:  # SGLang's ServerArgs stops the server here too
        log.error("worker simulator: %s (as SGLang's _handle_dspark)", exc)
        return 1
    resolved_fields = {k: v[1] for k, v in resolved.items()}
    refusal = speed.refused(launch.fields, resolved_fields)
    if refusal:
        # As SGLang's ServerArgs refuses a setting: an uncaught exception, its traceback in the log, exit 1.
        raise ValueError(f"worker simulator: refusing to start with {refusal} (SIM_REFUSE_ARGS, simulated failure)")
    hang = speed.refused(launch.fields, resolved_fields, os.environ.get("SIM_HANG_ARGS", ""))
    if hang:
        log.error("worker simulator: hanging from the start with %s (SIM_HANG_ARGS, simulated hang)", hang)
        knobs.hang = True
    for line in speed.apply_speed_rules(knobs, launch.fields, resolved_fields):
        log.warning("worker simulator: simulated speed rule %s (SIM_SPEED_RULES)", line)
    host, port = launch.get("host", "127.0.0.1"), int(launch.get("port", 30000))
    sockets = [_listen(host, port)]
    if sim.role == "prefill":
        sockets.append(_listen(host, int(launch.get("disaggregation_bootstrap_port", 8998))))
    log.info("worker simulator (SGLang %s API, %s parser): role=%s, model=%s, served as %r, "
             "listening on %s; knobs %s", SGLANG_VERSION, launch.parser, sim.role, launch.model_path,
             launch.served_model_name, ", ".join("{}:{}".format(*s.getsockname()[:2]) for s in sockets),
             {k: v for k, v in knobs.as_dict().items()})
    if launch.ignored:
        log.warning("worker simulator: fallback parser ignored %s", launch.ignored)
    config = uvicorn.Config(create_app(sim), log_level="warning", access_log=False,
                            timeout_keep_alive=60, lifespan="off")
    server = uvicorn.Server(config)

    async def run() -> None:
        loop = asyncio.get_running_loop()

        def stop(*_):
            sim.shutting_down = True  # /health turns 503 while in-flight requests finish
            server.should_exit = True
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop)
        loading = asyncio.create_task(sim.announce_loading())
        try:
            await server.serve(sockets=sockets)
        finally:
            loading.cancel()

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
