"""`bundle upgrade NAME==VERSION` (or `--to VERSION` for sglang): what the new version changes on sm_120,
old lock against new, in a scratch copy of the lock; `--apply` writes it; `--check` lists what is newer."""

from __future__ import annotations

import argparse
from pathlib import Path

from bundle.commands._common import add_config_argument
from bundle.errors import UsageError

HELP = "show what a new SGLang (or smg, NIXL) changes on sm_120 before taking it; --check: what is newer"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", nargs="?", metavar="NAME==VERSION",
                        help="the pin to change, e.g. sglang==0.5.24, smg==1.14.0, nixl-cu13==1.6.0")
    parser.add_argument("--to", metavar="VERSION", help="same as sglang==VERSION")
    parser.add_argument("--lock", type=Path, default=None, help="the lock to start from (default docker/lock.toml)")
    parser.add_argument("--override", action="append", default=[], metavar="NAME==VERSION",
                        help="replace a dependency's requirement while resolving (uv --override), e.g. for a "
                             "release that pins a version with no wheel; shown in the report")
    parser.add_argument("--no-build", action="store_true",
                        help="skip the stand-in build and audit of both sides (packages, parser contract and "
                             "guards only; no predictions, no sm_120 code)")
    parser.add_argument("--audit-old", type=Path, metavar="FILE",
                        help="use this saved audit of the old lock's image (`bundle audit --json`, e.g. from the GPU "
                             "host) instead of building and auditing its stand-in")
    parser.add_argument("--audit-new", type=Path, metavar="FILE", help="the same for the new lock")
    parser.add_argument("--fresh", action="store_true", help="audit again even where an audit of the lock is saved")
    parser.add_argument("--apply", action="store_true",
                        help="write the new lock, hashed requirements and parser snapshots over the working ones")
    parser.add_argument("--check", action="store_true",
                        help="list what is newer than the lock and which of it the pinned SGLang allows")
    parser.add_argument("--index", type=Path, metavar="FILE",
                        help="with --check: read releases from this saved index snapshot (JSON) instead of PyPI")
    parser.add_argument("--save-index", type=Path, metavar="FILE",
                        help="with --check: also write what was read from PyPI as an index snapshot")
    parser.add_argument("--json", action="store_true", help="print the JSON report instead of the text")
    add_config_argument(parser)


def _pin(text: str, flag: str) -> tuple[str, str]:
    name, sep, version = text.partition("==")
    if not sep or not name or not version:
        raise UsageError(f"{flag} {text!r}: expected NAME==VERSION, e.g. sglang==0.5.24")
    return name.strip(), version.strip()


def run(args: argparse.Namespace) -> int:
    import json

    from rich.console import Console

    from bundle.upgrade import render, service

    err = Console(stderr=True, highlight=False)
    if args.check:
        from bundle.upgrade import check

        result = check.check(args.lock, index_file=args.index, save_index=args.save_index,
                             progress=lambda m: err.print(m, markup=False))
        print(json.dumps(result, indent=1) if args.json else render.check_text(result))
        return 0
    if args.to and args.target:
        raise UsageError("give either NAME==VERSION or --to VERSION, not both")
    if not args.to and not args.target:
        raise UsageError("name the version to upgrade to: `bundle upgrade sglang==X` (or --to X), or --check")
    package, version = ("sglang", args.to) if args.to else _pin(args.target, "target")
    overrides = dict(_pin(o, "--override") for o in args.override)
    req = service.Request(package=package, version=version, lock_path=args.lock, overrides=overrides,
                          build=not args.no_build, fresh=args.fresh, apply=args.apply, config=args.config,
                          audits={k: v for k, v in (("old", args.audit_old), ("new", args.audit_new)) if v})
    report = service.run(req, progress=lambda m: err.print(m, markup=False, soft_wrap=True))
    print(json.dumps(report, indent=1, default=str) if args.json else render.text(report))
    err.print(f"report: {report['paths']['text']} (JSON beside it)", markup=False)
    return 0 if report["verdict"]["status"] != "breaks" else 1
