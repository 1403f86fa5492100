"""What an image holds, read from inside it, against the lock: the installed distributions of its
venv (the audit's `packages` probe, in a throw-away container with no network) judged by the
audit's own package checks. Used by `bundle pull` (a pulled image) and `bundle verify` (a running
container): one judgement, two ways of reading the facts."""

from __future__ import annotations

import json
from pathlib import Path

from bundle.errors import Failed
from bundle.images.audit import checks_packages
from bundle.images.audit.context import AuditContext, locked_packages, overlay_distribution
from bundle.findings import Finding
from bundle.lock import Lock

PROBE = Path(__file__).resolve().parent / "audit" / "probe.py"
PROBE_MARK = "BUNDLE-PROBE "
PROBE_TIMEOUT = 300.0
# The package checks of the audit that need nothing but the probe's `packages` facts.
CHECKS = (checks_packages.installed_equals_lock, checks_packages.installed_once,
          checks_packages.files_as_installed, checks_packages.no_stray_path_hooks)


def probe_command() -> list[str]:
    """The probe's `packages` section as one command (its source inline: nothing is mounted)."""
    return ["python", "-c", PROBE.read_text(), json.dumps({"sections": ["packages"], "deep": False}), "-"]


def facts_from_output(output: str) -> dict | None:
    line = next((ln for ln in output.splitlines() if ln.startswith(PROBE_MARK)), None)
    return json.loads(line[len(PROBE_MARK):]) if line else None


def read_image(image: str) -> dict:
    """The probe's facts of `image`, from a container of it with no network; a BundleError when the
    image cannot tell (no python on PATH)."""
    from bundle.stack import engine

    run = engine.run_audit_container(image, probe_command(), volumes=[], env={"PYTHONDONTWRITEBYTECODE": "1"},
                                     timeout=PROBE_TIMEOUT)
    facts = facts_from_output(run.output)
    if facts is None:
        raise Failed(f"the installed set of {image} could not be read (exit {run.returncode}): "
                     f"{run.output.strip()[-300:]}",
                     hint="the image needs python on PATH (/opt/venv/bin), as `bundle build` makes it")
    return facts


def findings(facts: dict, lock: Lock, root: Path, *, image: str = "") -> list[Finding]:
    """Every finding of the audit's package checks on these facts (a FAIL names the distribution)."""
    ctx = AuditContext(image=image, lock=lock, packages=locked_packages(lock), overlay=overlay_distribution(root, lock),
                       commands=[], config_name="", model_source="", facts=facts)
    out: list[Finding] = []
    for check in CHECKS:
        _, found = check(ctx)
        out += found
    return out
