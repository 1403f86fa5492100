"""`bundle verify`: a running topology's containers against the lock: the image each runs (its
lock-hash label) and, read from inside each running container, its installed set (the audit's
package checks on the live container, so a `pip install` into a running server is found too)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from bundle import modes
from bundle.findings import Finding, Level, worst
from bundle.images import contents
from bundle.images.audit.core import finding_dict
from bundle.lock import LOCK_HASH_LABEL, Lock

IMAGE_KIND_LABEL = "io.sglang-bundle.image"  # modes.registry().IMAGE_LABEL on the no-GPU modes' image


@dataclass
class ContainerReport:
    """One container's findings (the shared ones, bundle/findings.py) and the worst of them."""

    container: str
    image: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def level(self) -> Level:
        return worst(self.findings)

    def as_dict(self) -> dict:
        return {"container": self.container, "image": self.image, "level": self.level.value,
                "findings": [finding_dict(f) for f in self.findings]}


def verify_container(name: str, lock: Lock, root: Path) -> ContainerReport:
    from bundle.stack import engine

    facts = engine.container_image(name)
    report = ContainerReport(name, facts.image_ref)
    if facts.labels.get(IMAGE_KIND_LABEL) == modes.registry().IMAGE_LABEL:
        report.findings.append(Finding(Level.INFO, f"{name} runs the {modes.word()} image (simulated worker), which "
                                                    f"is not built from the lock: not compared"))
        return report
    label = facts.labels.get(LOCK_HASH_LABEL)
    if label != lock.hash:
        report.findings.append(Finding(Level.FAIL, f"{name} runs {facts.image_ref}, built from lock {label or 'unknown'}; "
                                                    f"docker/lock.toml is {lock.hash}",
                                       fix="bundle build (or bundle pull), then bundle launch again"))
    if not facts.running:
        report.findings.append(Finding(Level.WARN, f"{name} is not running: its installed set cannot be read",
                                       fix="bundle status says why; bundle launch starts it again"))
        return report
    run = engine.exec_in_container(name, contents.probe_command())
    installed = contents.facts_from_output(run.output)
    if installed is None:
        report.findings.append(Finding(Level.FAIL, f"{name}: its installed set could not be read "
                                                    f"(exit {run.returncode}): {run.output.strip()[-300:]}",
                                       fix="the container needs python on PATH (/opt/venv/bin)"))
        return report
    # The audit's package findings, each naming the container it was read in.
    report.findings += [replace(f, what=f"{name}: {f.what}")
                        for f in contents.findings(installed, lock, root, image=facts.image_ref)]
    return report
