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


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from bundle.doctor.report import render_json, render_table
    from bundle.service.doctor import DoctorRequest, check_host

    request = DoctorRequest(topology=args.topology, config=args.config, model_path=args.model_path,
                            ports=tuple(args.port), image=args.image, only=_names(args.only),
                            skip=_names(args.skip), require=_names(args.require), host_nixl=not args.no_host_nixl)
    if args.json:
        report = check_host(request, None)
        print(render_json(report))
        return report.exit_code
    console = Console(highlight=False)
    report = check_host(request, console)
    render_table(report, console)
    return report.exit_code


def _names(names: list[str] | None) -> tuple[str, ...] | None:
    return tuple(names) if names else None
