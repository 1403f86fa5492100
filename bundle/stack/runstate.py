"""What a launch left behind for the verbs that come after it (status, logs, smoke, bench, down):
the compose project, its files and env file, written to runs/<project>/launch.json."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bundle import paths
from bundle.errors import EXIT_CONFIG, BundleError

RECORD_NAME = "launch.json"


@dataclass
class LaunchRecord:
    project: str
    topology: str
    compose_files: list[str]
    env_file: str
    rehearsal: bool
    config: str  # the config file used, or "<embedded defaults>"
    started_at: float
    run_dir: str  # this launch's own folder (logs, attestation)

    def stack(self):
        from bundle.stack.docker import Stack

        return Stack(self.project, [Path(f) for f in self.compose_files], Path(self.env_file))


def project_dir(project: str) -> Path:
    return paths.runs_dir() / project


def new_run_dir(project: str, verb: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = project_dir(project) / f"{stamp}-{verb}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def save(record: LaunchRecord) -> Path:
    path = project_dir(record.project) / RECORD_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(record), indent=2) + "\n")
    return path


def load(project: str) -> LaunchRecord:
    path = project_dir(project) / RECORD_NAME
    if not path.is_file():
        raise BundleError(f"{path}: no launch recorded for project {project!r}",
                          hint="launch it first (`bundle launch ...`), or check BUNDLE_RUNS_DIR",
                          exit_code=EXIT_CONFIG)
    try:
        return LaunchRecord(**json.loads(path.read_text()))
    except (ValueError, TypeError) as exc:
        raise BundleError(f"{path}: unreadable launch record ({exc})",
                          hint="remove it and launch again", exit_code=EXIT_CONFIG) from None
