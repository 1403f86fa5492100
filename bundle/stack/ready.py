"""True readiness: every server's /health is 200 (its container healthcheck), the router has paired
prefill and decode (pd: /readiness), and one real generation came back through the front door.

Until then, progress follows each server's log milestones; a container that exits or turns
unhealthy ends the wait at once with the reason, instead of letting it run to the timeout.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import requests

from bundle.stack import milestones
from bundle.errors import EXIT_FAILED, EXIT_TIMEOUT, BundleError
from bundle.stack.frontdoor import FrontDoor

POLL_SECONDS = 2.0
TOOL_SERVICES = {"bench"}


@dataclass
class ServiceView:
    service: str
    state: str
    health: str
    restarts: int
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


class NotReady(BundleError):
    def __init__(self, message: str, *, services: list[ServiceView], exit_code: int = EXIT_FAILED,
                 hint: str | None = None):
        super().__init__(message, exit_code=exit_code, hint=hint)
        self.services = services


def _views(stack, topology: str, log_cache: dict[str, str]) -> list[ServiceView]:
    views = []
    for st in stack.states():
        if st.service in TOOL_SERVICES:
            continue
        text = stack.container_logs(st.name)
        log_cache[st.service] = text
        table = milestones.ROUTER_MILESTONES if st.service == "router" else milestones.SERVER_MILESTONES
        views.append(ServiceView(st.service, st.state, st.health, st.restart_count,
                                 milestones.latest(text, table)))
    return sorted(views, key=lambda v: v.service)


def _front_door_state(front: FrontDoor, topology: str) -> tuple[bool, str]:
    path = "/readiness" if topology == "pd" else "/health"
    try:
        response = requests.get(front.url + path, headers=front.headers, timeout=10)
    except requests.RequestException as exc:
        return False, f"{path}: {type(exc).__name__}"
    return response.status_code == 200, f"{path}: HTTP {response.status_code}"


def first_generation(front: FrontDoor, prompt: str, *, timeout: float = 120.0) -> str:
    """One real chat completion through the front door; returns its text or raises NotReady-worthy errors."""
    body = {"model": front.model, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": 16, "temperature": 0}
    response = requests.post(front.url + "/v1/chat/completions", json=body, headers=front.headers,
                             timeout=timeout)
    response.raise_for_status()
    text = response.json()["choices"][0]["message"]["content"] or ""
    if not text.strip():
        raise ValueError("the generation came back empty")
    return text


class BackgroundUp:
    """`compose up` in a thread: it blocks until depends_on's service_healthy conditions hold
    (minutes of weight loading in pd), and the wait must show progress meanwhile."""

    def __init__(self, stack):
        import threading

        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(stack,), daemon=True)
        self._thread.start()

    def _run(self, stack) -> None:
        try:
            stack.up()
        except BaseException as exc:  # handed to the waiting thread, which raises it
            self._error = exc

    def done(self) -> bool:
        return not self._thread.is_alive()

    def raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error


def wait_ready(stack, topology: str, front: FrontDoor, *, timeout: float, prompt: str,
               expected_services: set[str], report: Callable[[str], None],
               starting: BackgroundUp | None = None) -> Readiness:
    start = time.monotonic()
    deadline = start + timeout
    last_seen: dict[str, str] = {}
    exited_once: set[str] = set()
    logs: dict[str, str] = {}
    events: list[str] = []

    def event(text: str) -> None:
        line = f"[{time.monotonic() - start:6.1f}s] {text}"
        events.append(line)
        report(line)

    while True:
        if starting is not None:
            starting.raise_if_failed()
        views = _views(stack, topology, logs)
        for view in views:
            summary = view.describe()
            if last_seen.get(view.service) != summary:
                last_seen[view.service] = summary
                event(f"{view.service}: {summary}")
        missing = expected_services - {v.service for v in views}
        if missing and (starting is None or starting.done()):
            raise NotReady(f"containers never appeared: {', '.join(sorted(missing))}", services=views)
        for view in views:
            if view.health == "unhealthy":
                raise NotReady(_why(view, logs, "turned unhealthy"), services=views)
            if view.state in ("exited", "dead"):
                if view.service in exited_once:  # still down a poll later: no restart is coming
                    raise NotReady(_why(view, logs, "exited"), services=views)
                exited_once.add(view.service)
            else:
                exited_once.discard(view.service)
        servers_healthy = all(v.health == "healthy" for v in views if v.service != "router")
        if servers_healthy and not missing:
            ok, detail = _front_door_state(front, topology)
            if last_seen.get("front door") != detail:
                last_seen["front door"] = detail
                event(f"front door {front.url}{detail}")
            if ok:
                try:
                    text = first_generation(front, prompt)
                except (requests.RequestException, ValueError, KeyError, IndexError) as exc:
                    event(f"first generation not yet: {front.redact(str(exc))[:200]}")
                else:
                    event(f"first generation through the front door: {text.strip()[:60]!r}")
                    return Readiness(time.monotonic() - start, views, text, events)
        if time.monotonic() >= deadline:
            where = "; ".join(f"{v.service}: {v.describe()}" for v in views)
            raise NotReady(f"not ready after {timeout:.0f} s ({where})", services=views,
                           exit_code=EXIT_TIMEOUT,
                           hint="raise lifecycle.launch_timeout (or --timeout) if weights load slowly; "
                                "the saved logs show where each server stopped")
        time.sleep(POLL_SECONDS)


def _why(view: ServiceView, logs: dict[str, str], what: str) -> str:
    reason = milestones.last_fatal_line(logs.get(view.service, ""))
    text = f"{view.service} {what}"
    if view.milestone:
        text += f" after '{view.milestone}'"
    return text + (f": {reason}" if reason else "")
