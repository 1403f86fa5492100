"""`bundle <verb>`: one argparse front end; each verb lives in its own module under bundle/commands.

A verb module provides `HELP` (one line), `add_arguments(parser)` and `run(args) -> int`.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from rich.console import Console

from bundle import __version__, commands
from bundle.errors import EXIT_INTERRUPTED, BundleError

err_console = Console(stderr=True, highlight=False)


def _verb_modules():
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            yield info.name, importlib.import_module(f"bundle.commands.{info.name}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bundle",
        description="Validate, build, launch, smoke-test and benchmark SGLang topologies for sm_120.",
    )
    parser.add_argument("--version", action="version", version=f"bundle {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and every docker command")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    for name, module in _verb_modules():
        verb = sub.add_parser(name.replace("_", "-"), help=module.HELP, description=module.HELP)
        verb.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                          help="show tracebacks and every docker command")
        module.add_arguments(verb)
        verb.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.debug:
        import os

        os.environ["BUNDLE_DEBUG"] = "1"
    try:
        return int(args._run(args) or 0)
    except BundleError as exc:
        if args.debug:
            err_console.print_exception()
        # The message is plain text (it may hold brackets); only the prefix is styled.
        err_console.print("[bold red]error:[/] ", end="")
        err_console.print(str(exc), markup=False, soft_wrap=True)
        return exc.exit_code
    except KeyboardInterrupt:
        err_console.print("interrupted")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
