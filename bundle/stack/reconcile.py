"""A relaunch of a project that is up, done as `docker compose up` does it with a changed file, one
service at a time so the front door stays up, and undone when it fails.

- plan(): one step per service: keep, start (stopped), create (missing) or recreate (compose's config
  hash of the service differs from its container's label, or its image was rebuilt under the same
  tag), with the reason. `--no-recreate` only starts what is stopped, as compose's flag does.
- converge(): `compose up --no-deps SERVICE` for each step that is not a keep, servers before the
  router and what is stopped or missing first. A plain `compose up` would stop the router while it
  recreates a worker (pd's router depends on its workers with `restart: true`): the front door
  would go down for as long as the worker takes to load.
- Snapshot/roll_back(): the files a launch writes (env files, the launch record) as they were, and,
  after a failure or a signal, those files back and `up --no-deps` for every service touched (which
  recreates it on its old configuration) and for every service that ran before and no longer does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bundle.errors import BundleError
from bundle.stack.engine import first_line

KEEP, START, CREATE, RECREATE = "keep", "start", "create", "recreate"


@dataclass(frozen=True)
class Step:
    service: str
    action: str  # KEEP, START, CREATE or RECREATE
    reason: str

    def line(self) -> str:
        return f"{self.service}: {self.action} ({self.reason})"


def plan(states, wanted_hashes: dict[str, str], expected: set[str], *, servers: set[str],
         no_recreate: bool = False, image_ids: dict[str, str] | None = None) -> list[Step]:
    """The steps that bring the project's containers (`states`: ContainerState) to the services
    `expected`, in the order converge() takes them: servers before the router (so it never waits on a
    worker being replaced), and within each what does not run (stopped or missing, whether it is started
    or recreated) before what runs and is recreated: a running service is taken down only once every
    stopped one is back, so the count of running services never drops below what ran before.
    `wanted_hashes`: Stack.config_hashes(); `image_ids`: service -> the id its image tag names now."""
    by_service = {st.service: st for st in states}
    image_ids = image_ids or {}
    steps, running = [], set()
    for service in sorted(expected):
        st = by_service.get(service)
        want = wanted_hashes.get(service, "")
        changed = None
        if st is not None and st.config_hash and want and st.config_hash != want:
            changed = f"its configuration changed: config hash {st.config_hash[:12]} -> {want[:12]}"
        elif st is not None and st.image_id and image_ids.get(service) not in (None, "", st.image_id):
            changed = "its image was rebuilt under the same tag"
        if st is not None and st.state == "running":
            running.add(service)
        if st is None:
            steps.append(Step(service, CREATE, "no container"))
        elif changed and not no_recreate:
            steps.append(Step(service, RECREATE, changed))
        elif st.state != "running":
            kept = f"; {changed}, kept by --no-recreate" if changed else ""
            steps.append(Step(service, START, f"{st.state}{kept}"))
        else:
            kept = f"; {changed}, kept by --no-recreate" if changed else ", configuration unchanged"
            steps.append(Step(service, KEEP, f"running{kept}"))
    order = {CREATE: 0, START: 0, RECREATE: 1, KEEP: 2}

    def rank(step: Step) -> int:
        # A recreate of a container that does not run takes nothing down: it goes with the starts.
        return 0 if step.action == RECREATE and step.service not in running else order[step.action]

    return sorted(steps, key=lambda s: (s.service not in servers, rank(s), s.service))


def touched(steps: list[Step]) -> list[Step]:
    return [s for s in steps if s.action != KEEP]


def converge(stack, steps: list[Step], *, no_recreate: bool = False) -> None:
    """`compose up --no-deps` for each step that changes something, one service at a time."""
    for step in touched(steps):
        stack.up([step.service], dependencies=False, recreate=not no_recreate)


@dataclass
class Snapshot:
    """The files a launch (re)writes, as they were before it: bytes, or None for a file that did not
    exist (it is removed on roll back)."""

    files: dict[Path, bytes | None]

    @classmethod
    def of(cls, paths) -> Snapshot:
        return cls({Path(p): (Path(p).read_bytes() if Path(p).is_file() else None) for p in paths})

    def restore(self) -> None:
        for path, data in self.files.items():
            if data is None:
                path.unlink(missing_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)


def roll_back(stack, snapshot: Snapshot, steps: list[Step], running_before: set[str]) -> str:
    """After a failed or interrupted reconcile: the files as they were, each service it recreated
    recreated again on its old configuration, and every service that ran before running. Returns the
    headline's clause: what was rolled back and whether everything that ran before runs again."""
    snapshot.restore()
    redo = [s.service for s in touched(steps) if s.action == RECREATE]
    failures = []
    for service in redo:
        try:
            stack.up([service], dependencies=False)
        except BundleError as exc:
            failures.append(f"{service}: {first_line(exc.message)}")
    try:
        running = {st.service for st in stack.states() if st.state == "running"}
        for service in sorted(running_before - running):
            stack.up([service], dependencies=False)
        running = {st.service for st in stack.states() if st.state == "running"}
    except BundleError as exc:
        failures.append(first_line(exc.message))
        running = set()
    what = f"{', '.join(redo)} back on the previous configuration" if redo else "the previous files restored"
    away = sorted(running_before - running)
    if away:
        return f"reconcile rolled back ({what}), but not running again: {', '.join(away)}" + (
            f" ({'; '.join(failures)})" if failures else "")
    return f"reconcile rolled back ({what}): every service that was running before runs"
