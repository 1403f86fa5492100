"""SGLang's own profiler driven on each server for a few steps of one bench level: `POST /start_profile`
with a ProfileReq (sglang/srt/managers/io_struct.py, 0.5.23), the level's traffic, then the traces
copied out of the servers' containers and reduced by kernel family (profile_trace.py).

The ProfileReq asks `profile_by_stage` with `num_steps`: the scheduler starts torch's profiler at the
first batch of each stage, stops it after `num_steps` batches of that stage, and writes
`<output_dir>/<profile_id>-TP-<rank>[...]-<STAGE>.trace.json.gz` itself (scheduler_components/
profiler_manager.py), so a decode server's trace holds decode steps only and a disaggregated prefill
server's its prefills. A server that saw fewer batches than that gets `POST /stop_profile`, which
writes what it has. Activities follow the server's own device (`/server_info`'s `device`): CPU and GPU
on a GPU host, CPU alone where the server runs on CPU (the CPU engine).

The traces travel through the stack's `exec` (base64 on stdout), the one door every target's stack
view has; nothing is mounted into the servers for it.
"""

from __future__ import annotations

import base64
import binascii
import json
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bundle import log_lines
from bundle.errors import BundleError
from bundle.stack.workers import Workers
from bundle.verify import bench, profile_trace

PROFILE_DIR = "/tmp/bundle-profile"  # inside each server's container
DEFAULT_STEPS = 3  # a few decode steps: enough to average, small enough to keep a GPU trace small
WRITE_WAIT_S = 120.0  # after the traffic: torch's export of a trace takes seconds (a GPU server's, tens)
POLL_S = 2.0
# Lists a profile id's traces with their sizes, "NAME BYTES" a line: the scheduler writes a trace in place,
# so a file is taken only once its size holds still between two listings.
_LIST = "ls -1 {dir} 2>/dev/null | grep -F -- {pid} | grep '\\.trace\\.json\\.gz$' | while read f; do " \
        "printf '%s %s\\n' \"$f\" \"$(wc -c < {dir}/\"$f\")\"; done"
_READ = "import base64, sys; sys.stdout.write(base64.b64encode(open(sys.argv[1], 'rb').read()).decode())"


@dataclass
class ServerProfile:
    role: str
    activities: list[str]
    traces: list[Path] = field(default_factory=list)  # copied into the run's profile/ folder
    profiles: list[profile_trace.StepProfile] = field(default_factory=list)
    problem: str | None = None  # why this server gave no table

    def as_dict(self) -> dict:
        return {"role": self.role, "activities": self.activities, "traces": [p.name for p in self.traces],
                "profiles": [p.as_dict() for p in self.profiles], "problem": self.problem}


def request_body(profile_id: str, *, steps: int, activities: list[str]) -> dict:
    """The ProfileReq `/start_profile` takes (its fields as the pinned SGLang names them)."""
    return {"output_dir": f"{PROFILE_DIR}/{profile_id}", "num_steps": steps, "activities": activities,
            "profile_by_stage": True, "profile_id": profile_id, "with_stack": True, "record_shapes": False}


def activities_of(workers: Workers, role: str) -> list[str]:
    """CPU and GPU, or CPU alone where the server says it runs on CPU."""
    reply = workers.get(role, "/server_info")
    if reply.status != 200:
        reply = workers.get(role, "/get_server_info")  # 0.5.23's deprecated alias
    try:
        device = json.loads(reply.text).get("device")
    except (ValueError, AttributeError):
        device = None
    return ["CPU"] if device == "cpu" else ["CPU", "GPU"]


def start(workers: Workers, profile_id: str, *, steps: int) -> list[ServerProfile]:
    """Arms the profiler on every server; a server that refuses keeps its reason (and is not waited for)."""
    servers = []
    for role in workers.roles:
        activities = activities_of(workers, role)
        server = ServerProfile(role, activities)
        reply = workers.post(role, "/start_profile", request_body(profile_id, steps=steps, activities=activities))
        if reply.status != 200:
            server.problem = (f"/start_profile answered {reply.status or 'nothing'}: "
                              f"{reply.text.strip()[:300] or 'no text'}")
        servers.append(server)
    return servers


def _listed(stack, service: str, profile_id: str) -> dict[str, int]:
    folder = shlex.quote(f"{PROFILE_DIR}/{profile_id}")
    try:
        out = stack.exec(service, ["sh", "-c", _LIST.format(dir=folder, pid=shlex.quote(profile_id))])
    except BundleError:
        return {}
    files = {}
    for line in log_lines.lines(out or ""):
        name, _, size = line.strip().rpartition(" ")
        if name and size.isdigit():
            files[name] = int(size)
    return files


def _wait_for_traces(stack, service: str, profile_id: str, *, appear_s: float, timeout_s: float) -> list[str]:
    """The trace files once their sizes hold still between two listings; [] when none appeared within
    `appear_s`; what is there at `timeout_s` otherwise (a trace still being written is then cut)."""
    started, last = time.monotonic(), {}
    while True:
        now = _listed(stack, service, profile_id)
        if now and now == last:
            return sorted(now)
        waited = time.monotonic() - started
        if (not now and waited >= appear_s) or waited >= timeout_s:
            return sorted(now)
        last = now
        time.sleep(POLL_S)


def collect(stack, workers: Workers, servers: list[ServerProfile], profile_id: str, dest: Path, *,
            services: dict[str, str], timeout_s: float = WRITE_WAIT_S) -> list[ServerProfile]:
    """After the traffic: each armed server's traces copied to `dest` and reduced."""
    dest.mkdir(parents=True, exist_ok=True)
    for server in servers:
        if server.problem:
            continue
        service = services[server.role]
        names = _wait_for_traces(stack, service, profile_id, appear_s=10.0, timeout_s=timeout_s)
        if not names:
            # fewer batches than num_steps + 1 came: stop it, and the scheduler writes what it has
            stopped = workers.post(server.role, "/stop_profile", {}, timeout=timeout_s)
            if stopped.status != 200:  # never started: this server ran no step of the level
                server.problem = (f"it ran no step of the profiled level (/stop_profile answered "
                                  f"{stopped.status or 'nothing'}: {stopped.text.strip()[:200] or 'no text'})")
                continue
            names = _wait_for_traces(stack, service, profile_id, appear_s=timeout_s, timeout_s=timeout_s)
        if not names:
            server.problem = (f"no trace in {PROFILE_DIR}/{profile_id} of {service} within {timeout_s:.0f} s "
                              f"(see the server's log: `bundle logs`)")
            continue
        for name in names:
            path = dest / f"{server.role}-{name}"
            try:
                text = stack.exec(service, ["python3", "-c", _READ, f"{PROFILE_DIR}/{profile_id}/{name}"])
                path.write_bytes(base64.b64decode((text or "").strip(), validate=True))
            except (BundleError, binascii.Error, ValueError) as exc:
                server.problem = f"{name} could not be copied out of {service}: {exc}"
                continue
            server.traces.append(path)
            try:
                server.profiles.append(profile_trace.reduce_file(path))
            except profile_trace.TraceUnreadable as exc:
                server.problem = str(exc)
        try:  # copied: the container's /tmp keeps nothing a later profile needs
            stack.exec(service, ["rm", "-rf", f"{PROFILE_DIR}/{profile_id}"])
        except BundleError:
            pass
    return servers


def lines(servers: list[ServerProfile],
          under: Callable[[profile_trace.StepProfile], list[str]] = lambda table: []) -> list[str]:
    """Each server's tables, each followed by what `under` says of it (its floor's shares)."""
    out = []
    for server in servers:
        if server.problem and not server.profiles:
            out.append(f"{server.role}: no profile: {server.problem}")
            continue
        for profile in server.profiles:
            out.append(f"{server.role} ({'+'.join(server.activities)} activities):")
            out.extend(profile_trace.lines(profile))
            out.extend(under(profile))
        if server.problem:
            out.append(f"{server.role}: {server.problem}")
    return out


def profile_level(stack, workers: Workers, level, plan_, *, run_dir: Path, project: str, api_key_file: str | None,
                  redact: Callable[[str], str], services: dict[str, str], steps: int = DEFAULT_STEPS,
                  stack_gone: Callable[[], str | None] = lambda: None) -> tuple[list[ServerProfile], dict]:
    """One more run of `level` (its own folder, run_dir/profile/, never in the measured levels: the
    profiler slows the servers) with every server's profiler armed; returns each server's profile and
    the level's entry. Writes run_dir/profile/profile.json."""
    folder = run_dir / "profile"
    folder.mkdir(parents=True, exist_ok=True)
    profile_id = f"bundle-{run_dir.name}"
    servers = start(workers, profile_id, steps=steps)
    entry = bench.run_level(stack, level, plan_, run_dir=folder, project=project,
                            stamp=run_dir.name.split("-bench")[0].replace("-", "") + "p",
                            api_key_file=api_key_file, redact=redact, stack_gone=stack_gone)
    collect(stack, workers, servers, profile_id, folder, services=services)
    (folder / "profile.json").write_text(json.dumps({
        "level": {"concurrency": level.concurrency, "num_prompts": level.num_prompts, "status": entry["status"],
                  "reason": entry["reason"]},
        "steps_asked": steps, "servers": [s.as_dict() for s in servers]}, indent=2) + "\n")
    return servers, entry
