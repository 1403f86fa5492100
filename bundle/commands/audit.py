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


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from bundle.images.audit.report import render_json, render_table
    from bundle.service.audit import AuditRequest, run_audit

    request = AuditRequest(config=args.config, image=args.image, standin=args.standin,
                           only=tuple(args.only) if args.only else None,
                           skip=tuple(args.skip) if args.skip else None, deep=args.deep, sbom=args.sbom)
    err = Console(stderr=True, highlight=False)
    audited = run_audit(request, None if args.json else err)
    if args.json:
        print(render_json(audited.audit))
    else:
        render_table(audited.audit, Console(highlight=False), verbose=args.verbose)
        err.print(f"report: {audited.report}", markup=False)
    return audited.audit.exit_code
