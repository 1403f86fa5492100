"""`bundle sign DIGEST`: sign `<[image] repo>@DIGEST` with cosign (keyless) and attest its SBOM. The work is the
sign service's (bundle/service/sign.py); this file parses and prints."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "sign the published image by digest with cosign (keyless) and attach its SBOM as an attestation"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("digest", help="sha256:<64 hex>, as `bundle push` printed it")
    parser.add_argument("--lock", metavar="FILE", help="lock file (default: docker/lock.toml)")
    parser.add_argument("--sbom", metavar="FILE", help="the CycloneDX SBOM to attest (`bundle push --sbom-out`)")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from bundle.service.sign import SignRequest, sign

    console = Console(highlight=False)
    signed = sign(SignRequest(args.digest, lock=args.lock, sbom=Path(args.sbom) if args.sbom else None), console)
    console.print(f"signed {signed.ref}", markup=False)
    return 0
