"""TopRequest -> readings of the live figures per running server (tok/s, TTFT, TPOT, queue, running, KV
use, KV transfer speed; bundle/monitoring/live.py), each from its /metrics read inside its container twice,
`interval` apart."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from bundle.errors import UsageError
from bundle.monitoring.live import Figures, figures
from bundle.service.running import Launched
from bundle.stack.workers import ComposeWorkers, parse_prometheus

METRICS_TIMEOUT_S = 5


@dataclass(frozen=True)
class TopRequest:
    target: Launched
    interval: float = 3.0  # seconds between the two readings rates and means are taken over

    def __post_init__(self):
        check_interval(self.interval)


def check_interval(interval: float) -> None:
    """No reading is taken over no time: a usage error, before anything is asked."""
    if interval <= 0:
        raise UsageError(f"--interval {interval}: must be above 0 seconds", hint="e.g. --interval 3")


@dataclass(frozen=True)
class Reading:
    project: str
    rows: list[Figures]  # one per running server
    seconds: float  # the time the two readings were really apart


def _metrics(workers: ComposeWorkers, services: list[str]) -> dict[str, dict[str, float]]:
    out = {}
    for service in services:
        reply = workers.get(service, "/metrics", timeout=METRICS_TIMEOUT_S)
        out[service] = parse_prometheus(reply.text) if reply.status == 200 else {}
    return out


def readings(request: TopRequest) -> Iterator[Reading]:
    """One reading after another, each `interval` long, of the servers running when it began; the
    caller takes as many as it shows."""
    target = request.target
    running = {s.service for s in target.stack.states() if s.state == "running"}
    services = [s.name for s in target.topology.servers if s.name in running]
    workers = ComposeWorkers(target.stack, {name: name for name in services}, port=target.dep.network.worker_port)
    while True:
        before = _metrics(workers, services)
        began = time.monotonic()
        time.sleep(request.interval)
        after = _metrics(workers, services)
        seconds = time.monotonic() - began
        yield Reading(target.project, [figures(s, before[s], after[s], seconds) for s in services], seconds)
