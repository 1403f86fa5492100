"""`bundle doctor [tp4|pd] [--json]`: host preflight; exits 1 only when a check FAILs."""

from __future__ import annotations

import argparse

from bundle.commands._common import add_config_argument

HELP = "check this host can run a topology: GPUs, driver, Docker, limits, disk, model, ports, NIXL"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from bundle import topology as registry
    from bundle.doctor.registry import NAMES

    parser.add_argument("topology", nargs="?", choices=registry.NAMES, default="pd",
                        help="the topology to check for (default: pd, which uses all 8 GPUs)")
    add_config_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    parser.add_argument("--model-path", metavar="DIR", help="model folder (default: model.path of the config)")
    parser.add_argument("--port", metavar="PORT", type=int, action="append", default=[],
                        help="another host port that must be free (repeatable)")
    parser.add_argument("--image", metavar="REF",
                        help="worker image for the NIXL check (default: image.ref, else the lock's image)")
    parser.add_argument("--only", metavar="CHECK", action="append", choices=NAMES,
                        help=f"run only these checks (repeatable): {', '.join(NAMES)}")
    parser.add_argument("--skip", metavar="CHECK", action="append", choices=NAMES,
                        help="leave these checks out (repeatable)")
    parser.add_argument("--require", metavar="CHECK", action="append", choices=NAMES,
                        help="a check that must run here: its SKIP (e.g. no GPU) is a FAIL (repeatable; "
                             "`make launch` requires driver and gpus)")
    parser.add_argument("--no-host-nixl", action="store_true",
                        help="never fall back to this host's Python for the NIXL check")


def build_context(args: argparse.Namespace):
    """The checks' view of the deployment: config (or embedded defaults) overridden by the flags."""
    from bundle import topology as registry
    from bundle.commands._common import load
    from bundle.doctor.context import HostContext
    from bundle.errors import BundleError

    dep = load(args)
    roles = dep.roles(registry.get(args.topology))
    image = args.image or dep.image_ref
    lock_hash, pin = None, None
    try:
        from bundle.lock import load_lock
        from pathlib import Path

        from bundle.images.model import pin_for_folder

        lock = load_lock()
        # The pin of the checkpoint the folder holds (DeepSeek-V4-Flash or -0731, from its config.json).
        pin = pin_for_folder(lock, Path(args.model_path or dep.model_path).expanduser())
        if not image:
            image, lock_hash = lock.image_ref, lock.hash
    except BundleError:
        pass  # a broken lock is `bundle validate`'s to report; NIXL then runs on the host
    network = dep.network
    ports = [(network.host_address, network.front_port, f"{args.topology} front door")]
    ports += [(network.host_address, p, "--port") for p in args.port]
    if len(roles) > 1:
        nixl_gpus = (roles[0].gpus[0], roles[1].gpus[0])  # prefill's first GPU -> decode's first GPU
    else:
        gpus = roles[0].gpus
        nixl_gpus = (gpus[0], gpus[1] if len(gpus) > 1 else gpus[0])
    return HostContext(
        model_path=args.model_path or dep.model_path,
        ports=ports,
        image=image,
        expected_lock_hash=lock_hash,
        gpu_groups={role.name: tuple(role.gpus) for role in roles},
        pcie_safe_collectives=dep.levers.pcie_safe_collectives,
        nixl_gpus=nixl_gpus,
        host_python_nixl=not args.no_host_nixl,
        model_pin=pin,
    )


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from bundle.doctor.registry import run_checks
    from bundle.doctor.report import render_json, render_table

    ctx = build_context(args)
    if args.json:
        report = run_checks(ctx, only=args.only, skip=args.skip, required=args.require)
        print(render_json(report))
        return report.exit_code
    console = Console(highlight=False)
    with console.status("checking ...") as status:
        def progress(check, result):
            status.update(f"checked {check.title}: {result.status.value}")
        report = run_checks(ctx, only=args.only, skip=args.skip, on_result=progress,
                            required=args.require)
    render_table(report, console)
    return report.exit_code
