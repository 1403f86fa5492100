"""`bundle verify`: a running topology's containers against the lock: the image each runs (its
lock-hash label) and, read from inside each running container, its installed set (the audit's
package checks on the live container, so a `pip install` into a running server is found too)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bundle.images import contents
from bundle.images.audit.core import Finding, Level
from bundle.lock import LOCK_HASH_LABEL, Lock

REHEARSAL_LABEL = "io.sglang-bundle.image"  # "rehearsal" on the simulator's image


@dataclass
class ContainerVerdict:
    container: str
    image: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def level(self) -> Level:
        order = [Level.OK, Level.INFO, Level.WARN, Level.FAIL]
        return max((f.level for f in self.findings), key=order.index, default=Level.OK)

    def as_dict(self) -> dict:
        return {"container": self.container, "image": self.image, "level": self.level.value,
                "findings": [f.as_dict() for f in self.findings]}


def verify_container(name: str, lock: Lock, root: Path) -> ContainerVerdict:
    from bundle.stack import engine

    facts = engine.container_image(name)
    verdict = ContainerVerdict(name, facts.image_ref)
    if facts.labels.get(REHEARSAL_LABEL) == "rehearsal":
        verdict.findings.append(Finding(Level.INFO, f"{name} runs the rehearsal image (simulated worker), which "
                                                     f"is not built from the lock: not compared"))
        return verdict
    label = facts.labels.get(LOCK_HASH_LABEL)
    if label != lock.hash:
        verdict.findings.append(Finding(Level.FAIL, f"{name} runs {facts.image_ref}, built from lock {label or 'unknown'}; "
                                                     f"docker/lock.toml is {lock.hash}",
                                        "bundle build (or bundle pull), then bundle launch again"))
    if not facts.running:
        verdict.findings.append(Finding(Level.WARN, f"{name} is not running: its installed set cannot be read",
                                        "bundle status says why; bundle launch starts it again"))
        return verdict
    run = engine.exec_in_container(name, contents.probe_command())
    installed = contents.facts_from_output(run.output)
    if installed is None:
        verdict.findings.append(Finding(Level.FAIL, f"{name}: its installed set could not be read "
                                                     f"(exit {run.returncode}): {run.output.strip()[-300:]}",
                                        "the container needs python on PATH (/opt/venv/bin)"))
        return verdict
    verdict.findings += [Finding(f.level, f"{name}: {f.what}", f.fix)
                         for f in contents.findings(installed, lock, root, image=facts.image_ref)]
    return verdict
