"""SignRequest -> `<[image] repo>@DIGEST` signed with cosign (keyless), its SBOM attested when given."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bundle.errors import InputError
from bundle.images import signature
from bundle.images.reference import DIGEST
from bundle.lock import load_lock
from bundle.reporter import Reporter


@dataclass(frozen=True)
class SignRequest:
    digest: str  # sha256:<64 hex>, as `bundle push` printed it
    lock: str | None = None  # the lock's path (None: docker/lock.toml)
    sbom: Path | None = None  # the CycloneDX SBOM to attest


@dataclass(frozen=True)
class Signed:
    ref: str  # <repo>@<digest>


def sign(request: SignRequest, reporter: Reporter) -> Signed:
    """Checks the digest and the SBOM file before cosign runs; cosign's steps on the reporter."""
    if not DIGEST.match(request.digest):
        raise InputError(f"{request.digest!r} is not a digest (sha256:<64 hex>)",
                         hint="pass the digest `bundle push` printed (digest=sha256:...)")
    if request.sbom is not None and not request.sbom.is_file():
        raise InputError(f"{request.sbom}: no such file", hint="bundle push --sbom-out FILE writes it")
    ref = f"{load_lock(request.lock).image_repo}@{request.digest}"
    signature.sign(ref, request.sbom, report=lambda msg: reporter.print(msg, markup=False, soft_wrap=True))
    return Signed(ref)
