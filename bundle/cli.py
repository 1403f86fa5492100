"""`bundle <verb>`: one argparse front end; each verb lives in its own module under bundle/commands.

A verb module provides `HELP` (one line), `add_arguments(parser)` and `run(args) -> int`.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from pathlib import Path

from bundle import __version__, commands, modes
from bundle.config import loader
from bundle.rehearsal import registry as rehearsal_modes
from bundle.targets import sections
from bundle.errors import EXIT_INTERRUPTED, BundleError, Interrupted


def verb_names() -> list[str]:
    """Every verb module's name, found without importing any of them (a listing of the folder:
    pkgutil's import alone costs more than the rest of choosing a verb)."""
    folder = Path(commands.__file__).parent
    return sorted(p.stem for p in folder.glob("*.py") if not p.name.startswith("_"))


def _verb_modules(only: str | None):
    for name in verb_names():
        if only is None or name == only:
            yield name, importlib.import_module(f"bundle.commands.{name}")


def _chosen_verb(argv: list[str]) -> str | None:
    names = set(verb_names())
    for token in argv:
        if not token.startswith("-"):
            name = token.replace("-", "_")
            return name if name in names else None
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole CLI, or (`only`) just one verb: importing every verb module would make a quick
    `bundle validate` pay for Docker, HTTP and plotting libraries it never uses."""
    parser = argparse.ArgumentParser(
        prog="bundle",
        description="Validate, build, launch, smoke-test and benchmark SGLang topologies for sm_120.",
    )
    parser.add_argument("--version", action="version", version=f"bundle {__version__}",
                        help="print the driver's version (bundle %s) and exit" % __version__)
    parser.add_argument("--debug", action="store_true", help="show tracebacks and every docker command")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    for name, module in _verb_modules(only):
        verb = sub.add_parser(name.replace("_", "-"), help=module.HELP, description=module.HELP)
        verb.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                          help="show tracebacks and every docker command")
        module.add_arguments(verb)
        verb.set_defaults(_run=module.run)
    return parser


_interrupted: list[int] = []


def _raise_interrupted(signum, _frame) -> None:
    # The first signal starts the clean-up; the same signal again must not cut that clean-up short.
    # (Ignored here rather than with SIG_IGN, which the clean-up's own docker commands would inherit.)
    if _interrupted:
        return
    _interrupted.append(signum)
    raise Interrupted(signum)


def _handle_termination() -> dict:
    """SIGTERM and SIGHUP raise Interrupted (a KeyboardInterrupt) in the main thread; returns the
    handlers that were there, for main() to put back."""
    previous = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            previous[sig] = signal.signal(sig, _raise_interrupted)
        except ValueError:  # not the main thread (a test calling main() from a thread)
            pass
    return previous


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # The entry point knows the registries: it hands the wings' config sections to the loader below them,
    # and the ways to run with no GPU to the core (bundle/modes.py), which never names their package.
    loader.install_sections(sections.SECTIONS)
    modes.install(rehearsal_modes)
    args = build_parser(only=_chosen_verb(argv)).parse_args(argv)
    if args.debug:
        import os

        os.environ["BUNDLE_DEBUG"] = "1"
    previous = _handle_termination()
    try:
        return int(args._run(args) or 0)
    except BundleError as exc:
        from rich.console import Console

        err_console = Console(stderr=True, highlight=False)
        if args.debug:
            err_console.print_exception()
        # The message is plain text (it may hold brackets); only the prefix is styled.
        err_console.print("[bold red]error:[/] ", end="")
        err_console.print(str(exc), markup=False, soft_wrap=True)
        return exc.exit_code
    except Interrupted as exc:
        print(f"interrupted by {signal.Signals(exc.signum).name}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
