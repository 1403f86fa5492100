"""`bundle audit` as a service: AuditRequest in (which image, which checks), Audited out (the audit and
where its report was saved, where `bundle validate` reads the predicted choices from). The verb prints
the table or the JSON and exits with Audited.audit.exit_code."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bundle.config.model import Deployment
from bundle.images.audit import Audit, audit
from bundle.images.audit.report import save
from bundle.lock import Lock, load_lock
from bundle.service.prepare import load
from bundle.reporter import Reporter, plain


@dataclass(frozen=True)
class AuditRequest:
    config: str | None = None  # bundle.yaml's path; None: $BUNDLE_CONFIG, ./bundle.yaml or the defaults
    image: str | None = None  # None: the stand-in build's (standin), else image.ref, else the lock's image
    standin: bool = False  # the stand-in build of this lock (`bundle build --standin`)
    only: tuple[str, ...] | None = None  # check names (images/audit/registry.py)
    skip: tuple[str, ...] | None = None
    deep: bool = False  # every installed file's sha256 against its RECORD
    sbom: str | None = None  # also write the CycloneDX SBOM here


@dataclass(frozen=True)
class Audited:
    audit: Audit
    report: Path  # the JSON report under runs/audit/lock-<hash>/


def image_to_audit(request: AuditRequest, dep: Deployment, lock: Lock) -> str:
    if request.image:
        return request.image
    if request.standin:
        # Imported here: the build plan reads the Dockerfiles, which only a stand-in audit needs.
        from bundle.images.build import make_plan

        return make_plan(lock, standin=True).layers[-1].extra_tags[0]
    return dep.image_ref or lock.image_ref


def run_audit(request: AuditRequest, reporter: Reporter | None) -> Audited:
    """The image checked from inside a container of it; each check's progress on `reporter` (None: quiet,
    for a JSON-only stdout). A FAIL is in the result (audit.exit_code), not raised."""
    dep = load(request.config)
    lock = load_lock()
    result = audit(image_to_audit(request, dep, lock), dep, lock, config_name=dep.source.name,
                   only=list(request.only) if request.only else None,
                   skip=list(request.skip) if request.skip else None, deep=request.deep,
                   sbom_out=Path(request.sbom) if request.sbom else None,
                   on_progress=plain(reporter) if reporter is not None else None)
    return Audited(result, save(result))
