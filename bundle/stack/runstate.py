"""What a launch left behind for the verbs that come after it (status, logs, smoke, bench, down):
the compose project, its files, profiles, env file and the rendered variables, written to
runs/<project>/launch.json. Later verbs read the record, never the env file."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from bundle import modes, paths
from bundle.errors import InputError

RECORD_NAME = "launch.json"


@dataclass
class LaunchRecord:
    project: str
    topology: str
    compose_files: list[str]
    env_file: str
    # The no-GPU mode's name (bundle.modes), None on GPUs; True: an older driver's simulator. On disk under
    # modes.record_key(), which older records use too.
    mode: str | None
    config: str  # the config file used, or "<embedded defaults>"
    started_at: float
    run_dir: str  # this launch's own folder (logs, attestation)
    profiles: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # what render gave compose (no secrets)
    target: str = "compose"  # its render target (targets/registry.py), whose stack() reads this record
    # The volumes this project's launch created (none existed under that name before): all `down`
    # answers for. A volume compose keeps by design, or that another target made, is left alone.
    created_volumes: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, rendered, *, mode: str | None, config: str, run_dir: Path, target: str = "compose") -> LaunchRecord:
        return cls(project=rendered.project, topology=rendered.topology.name,
                   compose_files=[str(f) for f in rendered.compose_files], env_file=str(rendered.env_file),
                   mode=mode, config=config, started_at=time.time(), run_dir=str(run_dir),
                   profiles=list(rendered.profiles), env=dict(rendered.env), target=target)


def project_dir(project: str) -> Path:
    return paths.runs_dir() / project


def new_run_dir(project: str, verb: str) -> Path:
    """A fresh folder runs/<project>/<time>-<verb>; a second run in the same second gets <time>.2-<verb>
    (it sorts after the first, and globs on *-<verb> still find it)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1, 1000):
        path = project_dir(project) / (f"{stamp}-{verb}" if n == 1 else f"{stamp}.{n}-{verb}")
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            continue
    raise InputError(f"{project_dir(project)}: cannot make a run folder for {verb}")


def save(record: LaunchRecord) -> Path:
    path = project_dir(record.project) / RECORD_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {modes.record_key() if k == "mode" else k: v for k, v in asdict(record).items()}
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def load(project: str) -> LaunchRecord:
    path = project_dir(project) / RECORD_NAME
    if not path.is_file():
        raise InputError(f"{path}: no launch recorded for project {project!r}",
                         hint="launch it first (`bundle launch ...`), or check BUNDLE_RUNS_DIR")
    return _read(path)


def _read(path: Path) -> LaunchRecord:
    try:
        data = json.loads(path.read_text())
        if isinstance(data, dict):
            data = {"mode" if k == modes.record_key() else k: v for k, v in data.items()}
        known = {f.name for f in fields(LaunchRecord)}
        return LaunchRecord(**{k: v for k, v in data.items() if k in known})
    except (ValueError, TypeError) as exc:
        raise InputError(f"{path}: unreadable launch record ({exc})",
                         hint="remove it and launch again") from None


def all_records() -> list[LaunchRecord]:
    """Every readable launch record under runs/ (one per compose project ever launched here)."""
    out = []
    for path in sorted(paths.runs_dir().glob(f"*/{RECORD_NAME}")):
        try:
            out.append(_read(path))
        except InputError:
            continue  # a damaged record of some other project is not this command's business
    return out
