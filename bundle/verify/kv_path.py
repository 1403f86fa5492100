"""A broken KV path named from what the servers themselves report.

In a disaggregated topology every server's /health and the router's readiness can be green while
no request completes: SGLang's health generation never crosses the transfer path (sglang #32652).
What does show it: the front door answers server errors, the router logs "Decode server returned
error status", and decode counts the failures (SGLang's sglang:num_transfer_failed_reqs_total,
sglang:num_bootstrap_failed_reqs_total, sglang:num_aborted_requests_total) while prefill's count of
sent transfers tells whether the KV left prefill at all.

ServerErrorWatch turns the front door's server errors during launch's wait into an early, named
stop: within seconds once decode's counters confirm the transfer path (disaggregated topologies:
the registry's capability), and after SERVER_ERROR_LIMIT_S of nothing but server errors in any
topology, instead of the whole launch budget with a hint about weights loading slowly.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from bundle import log_lines
from bundle.stack.workers import Workers, parse_prometheus
from bundle.topology import DECODE, PREFILL, Topology

TRANSFER_FAILED = "sglang:num_transfer_failed_reqs_total"
BOOTSTRAP_FAILED = "sglang:num_bootstrap_failed_reqs_total"
ABORTED = "sglang:num_aborted_requests_total"
SENT = "sglang:kv_transfer_latency_ms_count"  # prefill observes one latency per KV transfer it sent
FAILURE_COUNTERS = (TRANSFER_FAILED, BOOTSTRAP_FAILED, ABORTED)
# smg's line when decode answers an error (its pd router; read in smg 1.13.0's log).
ROUTER_ERROR_MARK = "Decode server returned error status"
# Any topology: this long of only server errors from the front door, with every server and the
# router healthy, ends the wait: the servers are up and answering, so waiting longer loads nothing.
SERVER_ERROR_LIMIT_S = 60.0
# Disaggregated: from the second server error on, decode's counters are read; failures there name
# the KV path at once (one error could be a request caught by a restart).
CONFIRM_AFTER_ERRORS = 2
HINT = ("check the KV transfer path between prefill and decode: `bundle doctor --only nixl` (NIXL and its "
        "UCX transports between the two containers), UCX_TLS in the servers' env (pd.*.env), and that decode "
        "reaches prefill's bootstrap port (pd.kv_transfer.bootstrap_port); the saved logs have decode's error")
SERVER_ERROR_HINT = ("the servers are up and healthy but every generation fails: read the saved logs of the "
                     "servers (the first error), then `bundle smoke` once fixed")


@dataclass
class KvEvidence:
    """What the servers say about the KV path: decode's failure counters, prefill's sent transfers,
    the router's error line and the front door's last answer."""

    decode: dict[str, float] = field(default_factory=dict)  # FAILURE_COUNTERS -> value ({}: unread)
    prefill_sent: float | None = None
    router_line: str | None = None
    front: str = ""  # "HTTP 500: <body>"

    @property
    def broken(self) -> bool:
        return self.decode.get(TRANSFER_FAILED, 0) > 0 or self.decode.get(BOOTSTRAP_FAILED, 0) > 0

    def text(self) -> str:
        counts = ", ".join(f"{self.decode[name]:g} {name}" for name in FAILURE_COUNTERS if name in self.decode)
        parts = [f"decode counts {counts}" if counts else "decode's counters unreadable"]
        if self.prefill_sent is not None:
            parts.append(f"prefill sent {self.prefill_sent:g} KV transfers ({SENT})"
                         + (": the KV leaves prefill and fails on decode's side" if self.prefill_sent else
                            ": nothing left prefill"))
        if self.router_line:
            parts.append(f"router: {self.router_line}")
        if self.front:
            parts.append(f"front door: {self.front}")
        return "; ".join(parts)


def read_counters(workers: Workers, role: str, names) -> dict[str, float]:
    """The named counters from `role`'s /metrics (a counter not counted yet is 0); {} when its
    /metrics does not answer."""
    reply = workers.get(role, "/metrics", timeout=10)
    if reply.status != 200:
        return {}
    totals = parse_prometheus(reply.text)
    return {name: totals.get(name, 0.0) for name in names}


def router_error_line(router_log: str) -> str | None:
    """smg's last "Decode server returned error status" line, trimmed to its message."""
    lines = [line for line in log_lines.lines(router_log) if ROUTER_ERROR_MARK in line]
    if not lines:
        return None
    line = lines[-1]
    return line[line.index(ROUTER_ERROR_MARK):][:200]


def evidence(workers: Workers, topology: Topology, *, router_log: str = "", front: str = "") -> KvEvidence:
    """Decode's and prefill's words on the KV path (disaggregated topologies: roles from the registry)."""
    by_role = {s.role: s.name for s in topology.servers if s.name in workers.roles}
    decode, prefill = by_role.get(DECODE), by_role.get(PREFILL)
    found = KvEvidence(front=front, router_line=router_error_line(router_log))
    if decode:
        found.decode = read_counters(workers, decode, FAILURE_COUNTERS)
    if prefill:
        found.prefill_sent = read_counters(workers, prefill, (SENT,)).get(SENT)
    return found


class ServerErrorWatch:
    """Fed each failed first generation of launch's wait (server errors only); says when to stop.

    `workers`: the servers, read directly (ComposeWorkers in launch, HttpWorkers in tests);
    `router_log`: the router's recent log. stop_reason() returns (message, hint) or None."""

    def __init__(self, topology: Topology, workers: Workers | None, *, router_log: Callable[[], str] = lambda: "",
                 clock: Callable[[], float] = time.monotonic, limit_s: float = SERVER_ERROR_LIMIT_S):
        self.topology = topology
        self.workers = workers
        self.router_log = router_log
        self.clock = clock
        self.limit_s = limit_s
        self.first: float | None = None
        self.errors = 0

    def succeeded(self) -> None:
        self.first, self.errors = None, 0

    def explain(self) -> tuple[str, str] | None:
        """After server errors were seen, when the wait ends for another reason (smg's circuit
        breaker turning the router unhealthy): the KV path's words, if decode counts failures."""
        if not (self.errors and self.topology.disaggregated and self.workers is not None):
            return None
        found = evidence(self.workers, self.topology, router_log=self.router_log())
        if not found.broken:
            return None
        return f"the KV transfer between prefill and decode fails ({found.text()})", HINT

    def server_error(self, status: int, body: str) -> tuple[str, str] | None:
        now = self.clock()
        self.first = now if self.first is None else self.first
        self.errors += 1
        front = f"HTTP {status}: {' '.join(body.split())[:160]}"
        if self.topology.disaggregated and self.workers is not None and self.errors >= CONFIRM_AFTER_ERRORS:
            found = evidence(self.workers, self.topology, router_log=self.router_log(), front=front)
            if found.broken:
                return (f"the KV transfer between prefill and decode fails: every server and the router are "
                        f"healthy, but the front door's generations fail ({found.text()})", HINT)
        if now - self.first >= self.limit_s:
            return (f"every server and the router are healthy, but the front door's generations have failed with "
                    f"server errors for {now - self.first:.0f} s ({self.errors} tries; last {front})",
                    HINT if self.topology.disaggregated else SERVER_ERROR_HINT)
        return None
