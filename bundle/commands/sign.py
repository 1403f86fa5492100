"""`bundle sign DIGEST`: sign `<[image] repo>@DIGEST` with cosign (keyless) and attest its SBOM."""

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

    from bundle.errors import InputError
    from bundle.images import signature
    from bundle.lock import load_lock
    from bundle.images.reference import DIGEST

    if not DIGEST.match(args.digest):
        raise InputError(f"{args.digest!r} is not a digest (sha256:<64 hex>)",
                         hint="pass the digest `bundle push` printed (digest=sha256:...)")
    sbom = Path(args.sbom) if args.sbom else None
    if sbom is not None and not sbom.is_file():
        raise InputError(f"{sbom}: no such file", hint="bundle push --sbom-out FILE writes it")
    lock = load_lock(args.lock)
    console = Console(highlight=False)
    ref = f"{lock.image_repo}@{args.digest}"
    signature.sign(ref, sbom, report=lambda msg: console.print(msg, markup=False, soft_wrap=True))
    console.print(f"signed {ref}", markup=False)
    return 0
