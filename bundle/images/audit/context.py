"""The one view every audit check reads: the lock's packages, the config's rendered server command
lines, and the facts the probe gathered inside the image."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from bundle.lock import Lock, requirements_dir
from bundle.images.requirements import LAYERS, normalise

_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")
_PIN = re.compile(r"^([A-Za-z0-9._-]+)==([^\s;\\]+)")


@dataclass(frozen=True)
class LockedPackage:
    name: str
    version: str
    layer: str
    hashes: frozenset[str]  # sha256 of every wheel/sdist the lock allows


def locked_packages(lock: Lock) -> dict[str, LockedPackage]:
    """normalised name -> what docker/requirements/<layer>.txt pins, for every layer."""
    out: dict[str, LockedPackage] = {}
    folder = requirements_dir(lock.path)
    for layer in LAYERS:
        current = None
        for line in (folder / f"{layer}.txt").read_text().splitlines():
            m = _PIN.match(line)
            if m:
                current = normalise(m.group(1))
                prev = out.get(current)
                out[current] = LockedPackage(m.group(1), m.group(2), prev.layer if prev else layer,
                                             prev.hashes if prev else frozenset())
            if current and "--hash=" in line:
                pkg = out[current]
                out[current] = LockedPackage(pkg.name, pkg.version, pkg.layer,
                                             pkg.hashes | set(_HASH.findall(line)))
            if not line.rstrip().endswith("\\") and not m:
                current = None
    return out


def overlay_distribution(root: Path, lock: Lock) -> str | None:
    """The kernel overlay's own distribution name (kernels/pyproject.toml), installed by the overlay
    layer on purpose and so expected beside the lock's packages."""
    pyproject = root / lock.data["overlay"]["path"] / "pyproject.toml"
    if not pyproject.is_file():
        return None
    return tomllib.loads(pyproject.read_text()).get("project", {}).get("name")


@dataclass
class ServerCommand:
    name: str  # "<topology>/<service>"
    topology: str
    service: str
    key_path: str  # where in bundle.yaml its extra flags live ("pd.prefill")
    argv: list[str]  # the arguments after `-m sglang.launch_server`, as compose will run them
    env: dict[str, str]  # the variables SGLang reads that the levers set


@dataclass
class AuditContext:
    image: str
    lock: Lock
    packages: dict[str, LockedPackage]
    overlay: str | None
    commands: list[ServerCommand]
    config_name: str
    model_source: str  # the model folder mounted, or the shipped config.json
    facts: dict = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    router_module: str | None = None
