"""True readiness: every server's /health is 200 (its container healthcheck), the router has the
workers it needs (/readiness), one real generation came back through the front door, and every
container with a healthcheck (the router's too) reports healthy, as `compose up --wait` would.

Until then, progress follows each server's log milestones (only the lines logged since the last
poll are read); a container that exits or turns unhealthy ends the wait at once, and the headline
names the first service that failed, its exit code and its last fatal log line.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from dataclasses import dataclass, field
from typing import Callable

import requests

from bundle.errors import NotReady, TimedOut
from bundle.log_lines import Stamp
from bundle.stack import milestones
from bundle.stack.frontdoor import FrontDoor
from bundle.topology import ROUTER, TOOL_SERVICE, Topology

POLL_SECONDS = 2.0
CRASH_LOOP_RESTARTS = 2  # restarts during one launch's wait that make it a crash loop


@dataclass
class ServiceView:
    service: str
    state: str
    health: str
    restarts: int
    exit_code: int | None
    milestone: str | None

    def describe(self) -> str:
        parts = [self.state] + ([self.health] if self.health else []) + ([self.milestone] if self.milestone else [])
        if self.restarts:
            parts.append(f"restarted {self.restarts}x")
        return ", ".join(parts)


@dataclass
class Readiness:
    seconds: float
    services: list[ServiceView]
    generation_text: str
    events: list[str] = field(default_factory=list)


class StackNotReady(NotReady):
    """The compose project did not become ready: what each of its services showed last."""

    def __init__(self, message: str, *, services: list[ServiceView], hint: str | None = None):
        super().__init__(message, hint=hint)
        self.services = services


class StackNotReadyInTime(TimedOut, StackNotReady):
    """Nothing failed, but readiness did not come within the launch timeout (a timeout's exit code)."""


@dataclass
class _Progress:
    """What one service's log has shown so far."""

    milestone: int = -1  # index into its milestone table
    fatal: str | None = None  # its last fatal-looking line, escape codes stripped


class LogProgress:
    """Follows every container's log by reading only what was logged since the last poll."""

    def __init__(self, stack):
        self.stack = stack
        self._since: dict[str, Stamp] = {}  # container -> stamp of the last complete line read
        self.progress: dict[str, _Progress] = {}

    def update(self, container: str, service: str) -> None:
        table = milestones.ROUTER_MILESTONES if service == ROUTER else milestones.SERVER_MILESTONES
        state = self.progress.setdefault(service, _Progress())
        last = self._since.get(container)
        for line in self.stack.container_log_lines(container, since=last):
            # A line without a stamp, or one still without its newline (a bar mid-way), is read but
            # never moves `since`: the next poll reads the rest of it.
            if line.stamp is not None and line.complete:
                self._since[container] = line.stamp
            state.milestone = max(state.milestone, milestones.reached(line.text, table))
            if milestones.is_fatal(line.text):
                state.fatal = milestones.clean(line.text)

    def milestone(self, service: str) -> str | None:
        table = milestones.ROUTER_MILESTONES if service == ROUTER else milestones.SERVER_MILESTONES
        state = self.progress.get(service)
        return table[state.milestone][0] if state and state.milestone >= 0 else None

    def fatal(self, service: str) -> str | None:
        state = self.progress.get(service)
        return state.fatal if state else None


def first_generation(front: FrontDoor, prompt: str, *, timeout: float = 120.0) -> str:
    """One real chat completion through the front door; returns its text or raises NotReady-worthy errors."""
    response = requests.post(front.chat_url, json=front.chat_body(prompt, max_tokens=16), headers=front.headers,
                             timeout=timeout)
    response.raise_for_status()
    text = response.json()["choices"][0]["message"]["content"] or ""
    if not text.strip():
        raise ValueError("the generation came back empty")
    return text


def front_door_state(front: FrontDoor, *, timeout: float = 10, workers: int = 0) -> tuple[bool, str]:
    """Whether the front door's readiness path answers 200; with `workers`, also whether the router
    counts that many healthy workers (smg's /readiness says how many: a dp router is ready with one
    replica of two, and ready then means all of them)."""
    path = front.readiness_path
    try:
        response = requests.get(front.url + path, headers=front.headers, timeout=timeout)
    except requests.RequestException as exc:
        return False, f"{path}: {type(exc).__name__}"
    detail = f"{path}: HTTP {response.status_code}"
    if response.status_code != 200 or not workers:
        return response.status_code == 200, detail
    try:
        healthy = int(response.json().get("healthy_workers", workers))
    except (ValueError, AttributeError, TypeError):
        return True, detail  # a readiness answer without counts: its 200 is all it says
    return healthy >= workers, f"{detail}, {healthy} of {workers} workers healthy"


class BackgroundUp:
    """`compose up` in a thread: it blocks until depends_on's service_healthy conditions hold
    (minutes of weight loading in pd), and the wait must show progress meanwhile."""

    def __init__(self, stack, work: Callable[[], None] | None = None):
        """`work`: what to run in place of a plain `stack.up()` (a reconcile's converge)."""
        self._error: BaseException | None = None
        self._work = work or stack.up
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._work()
        except BaseException as exc:  # handed to the waiting thread, which raises it
            self._error = exc

    def done(self) -> bool:
        return not self._thread.is_alive()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error


def workers_away(states, topology: Topology, expected_services: set[str]) -> set[str]:
    """The servers not running (stopped by an operator, exited, or missing) in `states` (anything
    with .service and .state: the project's containers before a reconcile starts them): the ones
    this launch brings back."""
    running = {st.service for st in states if st.state == "running"}
    return {s.name for s in topology.servers if s.name in expected_services and s.name not in running}


def router_awaits_workers(view: ServiceView, views: list[ServiceView], topology: Topology,
                          returning: set[str]) -> bool:
    """Whether `view`, the router, may be unhealthy because a worker it routes to was away when the
    wait began (`returning`, see workers_away) and is not healthy yet: what a reconcile looks like
    after an operator stopped a worker and the router kept running. A worker that fails during the
    wait is not in `returning`: the router turning unhealthy then is a failure, as before."""
    router = topology.router
    if router is None or view.service != router.name:
        return False
    health = {v.service: v.health for v in views}
    return any(health.get(name) != "healthy" for name in returning)


@dataclass
class _Failure:
    service: str
    what: str  # "exited", "restarted", "turned unhealthy"
    exit_code: int | None
    fatal: str | None
    milestone: str | None

    def headline(self) -> str:
        text = f"{self.service} {self.what}"
        if self.exit_code not in (None, 0) and self.what != "turned unhealthy":
            text += f" (exit code {self.exit_code})"
        if self.milestone:
            text += f" after '{self.milestone}'"
        return text + (f": {self.fatal}" if self.fatal else "")


def wait_ready(stack, topology: Topology, front: FrontDoor, *, timeout: float, prompt: str,
               expected_services: set[str], report: Callable[[str], None],
               starting: BackgroundUp | None = None, returning: set[str] = frozenset(),
               server_errors=None) -> Readiness:
    """Poll until ready (see the module's docstring). `returning`: the workers a reconcile brings
    back or replaces (workers_away before `compose up`, and those it recreates): while one is not
    healthy yet, the router's unhealthy state is expected, and while `starting` runs, its stop is.
    `server_errors`: told of each server error the first generation gets (bundle.verify.kv_path.
    ServerErrorWatch); when it answers (message, hint), the wait ends with that."""
    return _Wait(stack, topology, front, timeout=timeout, prompt=prompt, expected_services=expected_services,
                 report=report, starting=starting, returning=returning, server_errors=server_errors).run()


class _Wait:
    """One wait_ready: what the polls have seen so far, and one named step per thing a poll judges
    (in the order a poll runs them): read the containers, note changes and the first failure, end
    on a failure, then ask the front door, then the deadline."""

    def __init__(self, stack, topology: Topology, front: FrontDoor, *, timeout: float, prompt: str,
                 expected_services: set[str], report: Callable[[str], None],
                 starting: BackgroundUp | None, returning: set[str], server_errors) -> None:
        self.stack, self.topology, self.front = stack, topology, front
        self.timeout, self.prompt, self.expected_services = timeout, prompt, expected_services
        self.report, self.starting, self.returning, self.server_errors = report, starting, returning, server_errors
        self.start = time.monotonic()
        self.began = datetime.now(timezone.utc) - timedelta(seconds=1)  # for the engine's exit events
        self.deadline = self.start + timeout
        self.last_seen: dict[str, str] = {}
        self.generated: str | None = None  # the first generation's text, once one came back
        self.exited_once: set[str] = set()
        self.restarts: dict[str, int] = {}
        self.first_seen: dict[str, int] = {}  # each service's restart count when the wait first saw it
        self.first_failure: _Failure | None = None
        self.logs = LogProgress(stack)
        self.events: list[str] = []
        self.server_names = {s.name for s in topology.servers}
        self.seen_running: set[str] = set()
        self.healthy_once: set[str] = set()
        # Crashed before it ever served, its log saying why (a traceback, an error line): ends the wait.
        self.failed_start: set[str] = set()
        # A router found unhealthy while a worker it needs was away: it may take until its next health
        # checks after the worker is back to say healthy again; the launch budget bounds that wait.
        self.recovering: set[str] = set()
        self.views: list[ServiceView] = []

    def run(self) -> Readiness:
        while True:
            if self.starting is not None:
                self.starting.raise_if_failed()
            self.views = self._read_views()
            for view in self.views:
                self._note(view)
            missing = self.expected_services - {v.service for v in self.views}
            if missing and self._up_done():
                raise StackNotReady(f"containers never appeared: {', '.join(sorted(missing))}",
                                    services=self.views)
            up_done = self._up_done()
            for view in self.views:
                self._judge(view, up_done)
            servers_healthy = all(v.health == "healthy" for v in self.views if v.service in self.server_names)
            # Ready only once `compose up` (a reconcile's converge) is done: a server it has not
            # replaced yet may still be healthy on its old configuration.
            if servers_healthy and not missing and up_done:
                ready = self._through_front_door()
                if ready is not None:
                    return ready
            if time.monotonic() >= self.deadline:
                where = "; ".join(f"{v.service}: {v.describe()}" for v in self.views)
                raise StackNotReadyInTime(f"not ready after {self.timeout:.0f} s ({where})", services=self.views,
                                          hint="raise lifecycle.launch_timeout (or --timeout) if weights load "
                                               "slowly; the saved logs show where each server stopped")
            time.sleep(POLL_SECONDS)

    def _up_done(self) -> bool:
        return self.starting is None or self.starting.done()

    def _event(self, text: str) -> None:
        line = f"[{time.monotonic() - self.start:6.1f}s] {text}"
        self.events.append(line)
        self.report(line)

    def _read_views(self) -> list[ServiceView]:
        """Every container but the tool's, its log followed since the last poll, sorted by service."""
        views = []
        for st in self.stack.states():
            if st.service == TOOL_SERVICE:
                continue
            self.logs.update(st.name, st.service)
            views.append(ServiceView(st.service, st.state, st.health, st.restart_count, st.exit_code,
                                     self.logs.milestone(st.service)))
        views.sort(key=lambda v: v.service)
        return views

    def _note(self, view: ServiceView) -> None:
        """Report what changed in `view`, and remember the first crash (the headline of a failure)."""
        summary = view.describe()
        if self.last_seen.get(view.service) != summary:
            self.last_seen[view.service] = summary
            self._event(f"{view.service}: {summary}")
        # A worker a reconcile is replacing stops on purpose while its `up --no-deps` runs.
        replacing = view.service in self.returning and not self._up_done()
        crashed = not replacing and (view.restarts > self.restarts.get(view.service, view.restarts)
                                     or view.state == "restarting"
                                     or (view.state in ("exited", "dead") and view.service in self.seen_running))
        if view.health == "healthy":
            self.healthy_once.add(view.service)
        elif crashed and view.service not in self.healthy_once and self.logs.fatal(view.service):
            self.failed_start.add(view.service)
        first = self.first_failure
        if first is None and crashed:
            self.first_failure = _Failure(view.service, "exited" if view.state in ("exited", "dead")
                                          else "crashed and was restarted", view.exit_code,
                                          self.logs.fatal(view.service), view.milestone)
        elif first is not None and first.service == view.service:
            # A later poll may see what the first did not: the exit code, the fatal line.
            if view.exit_code not in (None, 0):
                first.exit_code = view.exit_code
            first.fatal = self.logs.fatal(view.service) or first.fatal
        self.restarts[view.service] = view.restarts
        self.first_seen.setdefault(view.service, view.restarts)

    def _judge(self, view: ServiceView, up_done: bool) -> None:
        """End the wait if `view` crash-loops, turned unhealthy or stayed exited; else note its progress."""
        if view.service in self.failed_start:
            # A start that failed with an error of its own fails the same way when the restart policy
            # tries again, and each try of a real server costs a model load (minutes on the GPU host):
            # the first crash ends the wait. Without such a line (a SIGKILL, an OOM kill) it may be
            # passing trouble, and the policy gets its tries until the crash loop below.
            raise self._fail(view, "crashed while starting")
        if view.restarts - self.first_seen.get(view.service, view.restarts) >= CRASH_LOOP_RESTARTS:
            # Its restart policy keeps bringing it back to crash again: no need to wait for the
            # policy to give up (or for `compose up`, which waits on it, to fail).
            raise self._fail(view, f"is crash-looping (restarted {view.restarts}x)")
        if view.state == "running":
            self.seen_running.add(view.service)
        if view.health == "healthy":
            self.recovering.discard(view.service)
        if view.health == "unhealthy" and view.state == "running":
            if view.service not in self.recovering and router_awaits_workers(view, self.views, self.topology,
                                                                             self.returning):
                self.recovering.add(view.service)
                self._event(f"{view.service}: unhealthy while a worker it needs comes back; waiting for it")
            # A worker the converge has yet to replace (or is stopping: its /health answers 503
            # while it shuts down) is judged on its new container, once the converge is done. CI
            # saw decode's old container unhealthy while prefill was being recreated before it.
            replaced_later = view.service in self.returning and not up_done
            if view.service not in self.recovering and not replaced_later:
                raise self._fail(view, "turned unhealthy")
        # A container stopped before this launch (a reconcile) waits for `compose up` to start
        # it, which waits on its dependencies: stopped only counts once it ran, or up is done.
        replacing = view.service in self.returning and not up_done
        if view.state in ("exited", "dead") and not replacing and (view.service in self.seen_running or up_done):
            if view.service in self.exited_once:  # still down a poll later: no restart is coming
                raise self._fail(view, "exited")
            self.exited_once.add(view.service)
        else:
            self.exited_once.discard(view.service)

    def _through_front_door(self) -> Readiness | None:
        """Every server healthy: the front door's readiness, then one real generation, then every other
        healthcheck. The Readiness once all three hold, else None (poll again)."""
        front, views = self.front, self.views
        ok, detail = front_door_state(front, workers=len(self.server_names & {v.service for v in views})
                                      if self.topology.has_router else 0)
        if self.last_seen.get("front door") != detail:
            self.last_seen["front door"] = detail
            self._event(f"front door {front.url}{detail}")
        if ok and self.generated is None:
            self._try_first_generation()
        if self.generated is None:
            return None
        # Every other container with a healthcheck (the router) healthy too, as `compose up
        # --wait` would have it: "ready" never comes while `docker ps` still says starting.
        pending = sorted(v.service for v in views if v.health and v.health != "healthy")
        if not pending:
            return Readiness(time.monotonic() - self.start, views, self.generated, self.events)
        if self.last_seen.get("healthchecks") != str(pending):
            self.last_seen["healthchecks"] = str(pending)
            self._event(f"waiting on the healthcheck of {', '.join(pending)}")
        return None

    def _try_first_generation(self) -> None:
        """One generation through the front door; a server error the watch calls final ends the wait."""
        front = self.front
        try:
            text = first_generation(front, self.prompt)
        except (requests.RequestException, ValueError, KeyError, IndexError) as exc:
            self._event(f"first generation not yet: {front.redact(str(exc))[:200]}")
            response = getattr(exc, "response", None)
            if self.server_errors is not None and response is not None and response.status_code >= 500:
                stop = self.server_errors.server_error(response.status_code, front.redact(response.text))
                if stop is not None:
                    raise StackNotReady(stop[0], services=self.views, hint=stop[1])
        else:
            self._event(f"first generation through the front door: {text.strip()[:60]!r}")
            self.generated = text

    def _fail(self, view: ServiceView, what: str) -> NotReady:
        # A crash of one server usually shows first as its own exit or restart and only later as
        # the router turning unhealthy: the headline names whoever failed first.
        cause = self.first_failure or _Failure(view.service, what, view.exit_code, self.logs.fatal(view.service),
                                               view.milestone)
        if cause.exit_code in (None, 0):
            codes = [code for service, code in self.stack.exits(self.began) if service == cause.service and code]
            cause.exit_code = codes[0] if codes else cause.exit_code
        text = cause.headline()
        if cause.service != view.service:
            text += f" (then {view.service} {what})"
        kv = self.server_errors.explain() if self.server_errors is not None else None
        if kv is not None and cause.service in self.server_names and cause.exit_code not in (None, 0):
            # A server that exited or crashed is the cause: the transfers decode counted as failed
            # went to (or came from) it, so they are its consequence, said after it.
            return StackNotReady(f"{text}; before it, {kv[0]}", services=self.views)
        if kv is not None:  # generations failed while every server ran: what decode counts says why
            return StackNotReady(f"{kv[0]}; then {text}", services=self.views, hint=kv[1])
        return StackNotReady(text, services=self.views)
