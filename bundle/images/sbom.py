"""The CycloneDX SBOM an image carries (/opt/bundle/sbom.cdx.json, its sha256 the image's
io.sglang-bundle.sbom-sha256 label) compared with the lock: every library component is a
distribution the lock pins, at the pinned version, and every pin is a component."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from bundle.images.audit.checks_packages import VENV_SEED
from bundle.images.audit.checks_sbom import SBOM_LABEL, SBOM_PATH
from bundle.images.audit.context import locked_packages, overlay_distribution
from bundle.lock import Lock
from bundle.images.requirements import normalise

__all__ = ["SBOM_LABEL", "SBOM_PATH", "components", "problems"]


def components(document: dict) -> dict[str, tuple[str, str]]:
    """normalised name -> (name, version) of every library component of a CycloneDX document."""
    out = {}
    for comp in document.get("components") or []:
        if comp.get("type", "library") == "library" and comp.get("name"):
            out[normalise(comp["name"])] = (comp["name"], str(comp.get("version", "")))
    return out


def problems(data: bytes | None, label: str | None, lock: Lock, root: Path) -> tuple[str, list[str]]:
    """(a one-line summary, why this SBOM is not the lock's: empty when it is)."""
    if data is None:
        return "no SBOM", [f"sbom: the image has no {SBOM_PATH} (the release promises one)"]
    found = []
    digest = hashlib.sha256(data).hexdigest()
    if not label:
        found.append(f"sbom: the image has no {SBOM_LABEL} label to check {SBOM_PATH} against")
    elif digest != label:
        found.append(f"sbom: {SBOM_PATH} has sha256 {digest}, the image's {SBOM_LABEL} label says {label}")
    try:
        document = json.loads(data)
    except ValueError as exc:
        return "unreadable SBOM", found + [f"sbom: {SBOM_PATH} is not JSON: {exc}"]
    if document.get("bomFormat") != "CycloneDX":
        found.append(f"sbom: {SBOM_PATH} is not a CycloneDX document (bomFormat {document.get('bomFormat')!r})")
    listed = components(document)
    pinned = locked_packages(lock)
    overlay = overlay_distribution(root, lock)
    allowed = {normalise(overlay)} if overlay else set()
    for key, (name, version) in sorted(listed.items()):
        pin = pinned.get(key)
        if pin is None and key not in allowed and key not in VENV_SEED:
            found.append(f"sbom: {name} {version} is in the SBOM but not in the lock")
        elif pin is not None and pin.version != version:
            found.append(f"sbom: {name} {version} is in the SBOM, the lock pins {pin.version}")
    for key, pin in sorted(pinned.items()):
        if key not in listed:
            found.append(f"sbom: {pin.name}=={pin.version} (docker/requirements/{pin.layer}.txt) is not in the SBOM")
    summary = f"CycloneDX {document.get('specVersion', '?')}, {len(listed)} components, sha256 {digest[:12]}"
    return summary, found
