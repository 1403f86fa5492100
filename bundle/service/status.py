"""StatusRequest -> what runs of one launched project: each container's state, health, restarts, ports,
processes and problem (paused, hung, not answering), whether the front door really serves (a one-token
generation, not only its readiness path), the KV path's evidence when a disaggregated front door answers
server errors, what its target adds (Target.status: a batch job's queue, say), and where it stands in one
line (which services run, which do not, whether it serves: after a reboot, say) with the one command that
brings it back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import requests

from bundle.config.source import DEFAULTS_NAME
from bundle.errors import BundleError
from bundle import modes
from bundle.service.running import Launched
from bundle.stack.docker import ContainerState
from bundle.stack.engine import container_processes
from bundle.stack.frontdoor import FrontDoor, front_door
from bundle.stack.ready import front_door_state
from bundle.stack.workers import ComposeWorkers
from bundle.verify import kv_path

WORKER_PROBE_SECONDS = 5  # a server that cannot answer /health in this long is flagged as hung
FRONT_PROBE_SECONDS = 10


@dataclass(frozen=True)
class StatusRequest:
    target: Launched
    target_name: str | None = None  # the render target its launch record names (its key in the JSON)
    target_status: Callable[[str], dict] | None = None  # what that target adds, from the project's name
    default_target: str | None = None  # the target `bundle launch` takes without --target (the registry's)
    processes: Callable[[str], list[str]] = container_processes  # a container's process names


@dataclass
class FrontDoorState:
    url: str | None
    serving: bool = False
    detail: str = "not running"
    status: int | None = None  # the one-token generation's HTTP status, when it was asked
    kv_path: str | None = None  # the KV transfer's failure, when a disaggregated front door errs
    kv_path_fix: str | None = None

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None or k == "url"}


@dataclass(frozen=True)
class ContainerStatus:
    service: str
    name: str
    state: str
    health: str
    restarts: int
    exit_code: int | None
    ports: dict[str, list[str]]
    problem: str | None
    processes: list[str]  # names only, never arguments


@dataclass(frozen=True)
class Standing:
    """Where the stack stands, in words (after a reboot: which services came back, which did not, whether
    the front door serves), and the one command that brings it back (None while it serves)."""
    running: list[str]  # services whose container runs
    not_running: list[str]  # "prefill (exited, exit code 0)": stopped, never started, restarting, ...
    serving: bool
    words: str
    command: str | None


@dataclass(frozen=True)
class Status:
    topology: str
    project: str
    mode: str | None  # the no-GPU mode's name, None on GPUs
    containers: list[ContainerStatus]
    front_door: FrontDoorState
    target_name: str | None = None  # a target that adds to the status: its name, the key of what it adds
    target_view: dict | None = None  # what it adds
    standing: Standing | None = None  # None for a project with no containers

    def to_dict(self) -> dict:
        """What `bundle status --json` prints for it."""
        out = {"topology": self.topology, "project": self.project, modes.record_key(): self.mode,
               "containers": [asdict(c) for c in self.containers], "front_door": self.front_door.to_dict()}
        if self.standing is not None:
            out["standing"] = asdict(self.standing)
        if self.target_name is not None:
            out[self.target_name] = self.target_view
        return out


def front_door_serves(front: FrontDoor) -> FrontDoorState:
    """Serving = the readiness path answers 200 and a one-token generation comes back in time."""
    seconds = FRONT_PROBE_SECONDS
    door = FrontDoorState(front.url)
    ok, door.detail = front_door_state(front, timeout=seconds)
    if not ok:
        return door
    try:
        reply = requests.post(front.chat_url, json=front.chat_body("ping", max_tokens=1), headers=front.headers,
                              timeout=seconds)
        door.serving = reply.status_code == 200
        door.status = reply.status_code
        door.detail += f"; a one-token generation: HTTP {reply.status_code}"
    except requests.RequestException as exc:
        door.detail += f"; a one-token generation: {type(exc).__name__} within {seconds} s"
    return door


def server_problem(state: ContainerState, workers: ComposeWorkers) -> str | None:
    """Paused, crash-looping, hung or not answering; None for a server that answers /health (or is not
    running)."""
    if state.state == "paused":
        return "paused: its processes are frozen (`docker unpause` or `bundle launch` again)"
    if state.state == "restarting":
        # Docker's backoff between two starts of a server that keeps exiting (its restart policy has no
        # limit: compose/pd.yaml says why).
        return (f"crash-looping: restarted {state.restart_count}x, last exit code {state.exit_code} "
                f"(`bundle logs {state.service}`)")
    if state.state != "running":
        return None
    seconds = WORKER_PROBE_SECONDS
    reply = workers.get(state.service, "/health", timeout=seconds)
    if reply.status == 0 and "timed out" in reply.text.lower():
        return f"hung: /health gave no answer within {seconds} s"
    if reply.status == 0:
        return f"not answering: {reply.text[:120]}"
    return None


def kv_path_evidence(target: Launched, workers: ComposeWorkers, door: FrontDoorState) -> None:
    """When a disaggregated front door answers server errors: the KV path's evidence, as launch's early
    stop names it (bundle/verify/kv_path.py), added to `door` if decode counts failed transfers."""
    router = target.topology.router
    try:
        log = str(target.stack.logs(router.name, tail=200)) if router else ""
    except BundleError:
        log = ""
    found = kv_path.evidence(workers, target.topology, router_log=log)
    if found.broken:
        door.kv_path, door.kv_path_fix = found.text(), kv_path.HINT


def relaunch_command(target: Launched, default_target: str | None = None) -> str:
    """The `bundle launch` that brings this project back as it was launched: on a project that is up it
    reconciles (starts what is stopped, keeps what runs) and waits until the front door serves."""
    record = target.record
    words = ["bundle", "launch", target.topology.name]
    if record is not None:
        if record.config and record.config != DEFAULTS_NAME:
            words += ["-c", record.config]
        mode = modes.record_value(modes.from_record(record.mode))
        if mode:
            words += [modes.flag(), mode]
        if record.target and record.target != default_target:
            words += ["--target", record.target]
        if "monitoring" in (record.profiles or []):
            words.append("--monitoring")
    return " ".join(words)


def standing(containers: list[ContainerStatus], door: FrontDoorState, command: str) -> Standing:
    """One line on what runs, what does not and whether the front door serves; `command` unless it serves
    with every service running."""
    ordered = sorted(containers, key=lambda c: c.service)
    running = [c.service for c in ordered if c.state == "running"]
    not_running = [f"{c.service} ({c.state}" + (f", exit code {c.exit_code}" if c.state == "exited" else "") + ")"
                   for c in ordered if c.state != "running"]
    starting = [c.service for c in ordered if c.state == "running" and c.health == "starting"]
    if not running:
        words = f"none of its services runs ({', '.join(not_running)}); the front door does not serve"
    elif not_running:
        words = (f"running: {', '.join(running)}; not running: {', '.join(not_running)}; "
                 f"the front door {'serves' if door.serving else 'does not serve'}")
    elif door.serving:
        words = f"every service runs ({', '.join(running)}) and the front door serves"
    else:
        still = f" ({', '.join(starting)} still starting)" if starting else ""
        words = f"every service runs ({', '.join(running)}) but the front door does not serve yet{still}"
    whole = door.serving and not not_running
    return Standing(running, not_running, door.serving, words, None if whole else command)


def status(request: StatusRequest) -> Status:
    """What runs of request.target; asks nothing of a project with no containers."""
    target = request.target
    record = target.record
    states = target.stack.states() if target.up and target.stack is not None else []
    door = FrontDoorState(None)
    servers = {s.name for s in target.topology.servers}
    workers = None
    if states:
        workers = ComposeWorkers(target.stack, {name: name for name in servers}, port=target.dep.network.worker_port)
        door = front_door_serves(front_door(target.dep, target.topology))
        if target.topology.disaggregated and (door.status or 0) >= 500:
            kv_path_evidence(target, workers, door)
    containers = []
    for s in states:
        problem = server_problem(s, workers) if s.service in servers else ("paused" if s.state == "paused" else None)
        # What really runs inside (SGLang names its processes: sglang::scheduler, ...; the simulator
        # is one python): names only, never arguments.
        processes = request.processes(s.name) if s.state in ("running", "paused") else []
        containers.append(ContainerStatus(s.service, s.name, s.state, s.health, s.restart_count, s.exit_code,
                                          s.ports, problem, processes))
    mode = modes.from_record(record.mode if record else None)
    adds = record is not None and request.target_status is not None
    view = request.target_status(target.project) if adds else None  # the target's own view (Target.status)
    where = standing(containers, door, relaunch_command(target, request.default_target)) if containers else None
    return Status(target.topology.name, target.project, modes.record_value(mode), containers, door,
                  request.target_name if adds else None, view, where)
