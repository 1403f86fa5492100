"""`bundle audit [--image REF] [-c FILE] [--json]`: the image checked from inside a container of it,
against the lock and the config; exits 1 on any FAIL."""

from __future__ import annotations

import argparse

from bundle.commands._common import add_config_argument

HELP = "check an image from inside: installed set = lock, imports, SGLang's own checks, sm_120 code, SBOM"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from bundle.images.audit.registry import NAMES

    parser.add_argument("--image", metavar="REF",
                        help="the image to audit (default: image.ref of the config, else the lock's image; "
                             "with --standin the stand-in build's)")
    parser.add_argument("--standin", action="store_true",
                        help="audit the stand-in build of this lock (`bundle build --standin`)")
    add_config_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the audit as JSON on stdout")
    parser.add_argument("--deep", action="store_true", help="also check every installed file's sha256 "
                                                             "against its RECORD (slower)")
    parser.add_argument("--sbom", metavar="FILE", help="also write the CycloneDX SBOM to FILE")
    parser.add_argument("--only", metavar="CHECK", action="append", choices=NAMES,
                        help=f"run only these checks (repeatable): {', '.join(NAMES)}")
    parser.add_argument("--skip", metavar="CHECK", action="append", choices=NAMES,
                        help="leave these checks out (repeatable)")
    parser.add_argument("-v", "--verbose", action="store_true", help="show INFO findings in the table too")


def image_ref(args: argparse.Namespace, dep, lock) -> str:
    if args.image:
        return args.image
    if args.standin:
        from bundle.images.build import make_plan

        return make_plan(lock, standin=True).layers[-1].extra_tags[0]
    return dep.image_ref or lock.image_ref


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rich.console import Console

    from bundle.commands._common import load
    from bundle.images.audit import audit
    from bundle.images.audit.report import render_json, render_table, save
    from bundle.lock import load_lock

    dep = load(args)
    lock = load_lock()
    image = image_ref(args, dep, lock)
    err = Console(stderr=True, highlight=False)
    result = audit(image, dep, lock, config_name=dep.source.name, only=args.only, skip=args.skip,
                   deep=args.deep, sbom_out=Path(args.sbom) if args.sbom else None,
                   on_progress=None if args.json else lambda msg: err.print(msg, markup=False))
    saved = save(result)
    if args.json:
        print(render_json(result))
    else:
        render_table(result, Console(highlight=False), verbose=args.verbose)
        err.print(f"report: {saved}", markup=False)
    return result.exit_code
