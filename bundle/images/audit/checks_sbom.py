"""The SBOM: CycloneDX (cyclonedx-bom, from the mounted audit tools) of the image's venv; its digest
is compared with the image's label when the image carries one."""

from __future__ import annotations

from bundle.images.audit.context import AuditContext
from bundle.findings import Finding, Level

SBOM_LABEL = "io.sglang-bundle.sbom-sha256"
SBOM_PATH = "/opt/bundle/sbom.cdx.json"


def sbom(ctx: AuditContext) -> tuple[str, list[Finding]]:
    facts = ctx.facts.get("sbom") or {}
    if not facts.get("ok"):
        return "no SBOM", [Finding(Level.FAIL, f"cyclonedx-py failed: {facts.get('error') or facts.get('probe_error')}",
                                   fix="run with --debug; the tools are in .cache/audit-tools")]
    findings = []
    label = ctx.labels.get(SBOM_LABEL)
    in_image = facts.get("in_image_sha256")
    if not label:
        findings.append(Finding(Level.INFO, f"the image has no {SBOM_LABEL} label (built before SBOMs were "
                                             f"written into images)", fix="rebuild with `bundle build`"))
    elif in_image != label:
        findings.append(Finding(Level.FAIL, f"{SBOM_PATH} in the image has sha256 {in_image}, the label says {label}",
                                fix="rebuild the runtime layer: bundle build --layer runtime"))
    elif facts["sha256"] != label:
        # The SBOM is reproducible (no serial number, no timestamp): a different one means the venv
        # is no longer the one that was built (the lock check names what changed).
        findings.append(Finding(Level.WARN, f"the venv's SBOM now has sha256 {facts['sha256'][:16]}..., the "
                                             f"image's {label[:16]}...: the venv changed after the build",
                                fix="rebuild from the lock: bundle build"))
    return f"CycloneDX {facts.get('spec_version')}, {facts['components']} components", findings
