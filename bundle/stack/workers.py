"""How the driver reaches a worker directly, behind the front door: its /metrics, /get_server_info,
a request of its own (smoke's proof that each dp replica serves), the environment its server process
runs with, and its log.

pd workers publish no port (only the router does), so `ComposeWorkers` reads them from inside their
own containers (`docker compose exec <service> curl ...`); `HttpWorkers` reads servers a test or a
tp4 front door can reach over HTTP. Both answer the same questions, so smoke and attestation logic
runs unchanged against a local simulator process and against real containers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Protocol

import requests

from bundle import log_lines
from bundle.errors import BundleError

# Printed by curl after the body (-w), so the status code is read even when the body is an error.
_STATUS_MARK = "\n__bundle_http_status__="
# Reads the server process's own environment (PID 1: bundle-entrypoint execs the server), for the
# names asked only: the full environment is never read out of the container.
_ENVIRON_SCRIPT = (
    "import json, os, sys\n"
    "try:\n"
    "    raw = open('/proc/1/environ', 'rb').read().split(b'\\0')\n"
    "    env = dict(p.decode(errors='replace').split('=', 1) for p in raw if b'=' in p)\n"
    "    source = '/proc/1/environ'\n"
    "except OSError:\n"
    "    env, source = dict(os.environ), 'exec environment'\n"
    "print(json.dumps({'source': source, 'values': {n: env.get(n) for n in sys.argv[1:]}}))\n"
)
# A POST from inside the worker's container, with the key the entrypoint gave its server (the compose
# secret, read there: it never crosses the driver's command line). Arguments: timeout, body, the
# status mark, the URL.
_POST_SCRIPT = ('k=$(tr -d "\\r\\n" < /run/secrets/api_key 2>/dev/null || true); '
                'exec curl -sS -m "$1" -H "Content-Type: application/json" '
                '${k:+-H "Authorization: Bearer $k"} -d "$2" -w "$3%{http_code}" "$4"')


@dataclass(frozen=True)
class Reply:
    status: int  # HTTP status; 0 when the request did not get an answer at all
    text: str  # the body, or why there was no answer


@dataclass(frozen=True)
class Environ:
    source: str  # where the values were read ("/proc/1/environ" in container NAME, ...)
    values: dict[str, str | None]


class Workers(Protocol):
    roles: list[str]

    def get(self, role: str, path: str, *, timeout: float = 30) -> Reply: ...

    def post(self, role: str, path: str, body: dict, *, timeout: float = 30) -> Reply: ...

    def address(self, role: str) -> str:
        """The URL the router knows this worker by (what its /workers lists)."""
        ...

    def environ(self, role: str, names: list[str]) -> Environ | None: ...

    def log(self, role: str) -> str: ...

    def describe(self, role: str) -> str: ...


@dataclass
class HttpWorkers:
    """Workers reached over HTTP: {role: base URL}; headers carry the API key where one is needed."""

    urls: dict[str, str]
    headers: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def roles(self) -> list[str]:
        return list(self.urls)

    def get(self, role: str, path: str, *, timeout: float = 30) -> Reply:
        try:
            resp = requests.get(self.urls[role] + path, headers=self.headers, timeout=timeout)
        except requests.RequestException as exc:
            return Reply(0, f"{type(exc).__name__}: no answer from {self.urls[role]}{path}")
        return Reply(resp.status_code, resp.text)

    def post(self, role: str, path: str, body: dict, *, timeout: float = 30) -> Reply:
        try:
            resp = requests.post(self.urls[role] + path, json=body, headers=self.headers, timeout=timeout)
        except requests.RequestException as exc:
            return Reply(0, f"{type(exc).__name__}: no answer from {self.urls[role]}{path}")
        return Reply(resp.status_code, resp.text)

    def address(self, role: str) -> str:
        return self.urls[role]

    def environ(self, role: str, names: list[str]) -> Environ | None:
        return None  # a process behind a URL does not show its environment

    def log(self, role: str) -> str:
        return ""

    def describe(self, role: str) -> str:
        return f"HTTP {self.urls[role]}"


@dataclass
class ComposeWorkers:
    """Workers of a compose project, read from inside their containers with `compose exec`."""

    stack: object  # bundle.docker.Stack
    services: dict[str, str]  # role -> compose service
    port: int = 30000  # the port the server listens on inside its container

    @property
    def roles(self) -> list[str]:
        return list(self.services)

    def get(self, role: str, path: str, *, timeout: float = 30) -> Reply:
        command = ["curl", "-sS", "-m", str(int(timeout)), "-w", _STATUS_MARK + "%{http_code}",
                   f"http://127.0.0.1:{self.port}{path}"]
        return self._curl(role, command)

    def post(self, role: str, path: str, body: dict, *, timeout: float = 30) -> Reply:
        command = ["sh", "-c", _POST_SCRIPT, "post", str(int(timeout)), json.dumps(body), _STATUS_MARK,
                   f"http://127.0.0.1:{self.port}{path}"]
        return self._curl(role, command)

    def address(self, role: str) -> str:
        return f"http://{self.services[role]}:{self.port}"

    def _curl(self, role: str, command: list[str]) -> Reply:
        try:
            out = self.stack.exec(self.services[role], command)
        except BundleError as exc:
            # curl's own failure (connection refused, timeout) or a container that is not running.
            return Reply(0, _last_line(exc.message))
        body, _, status = (out or "").rpartition(_STATUS_MARK)
        try:
            return Reply(int(status.strip()), body)
        except ValueError:
            return Reply(0, "unreadable curl output")

    def environ(self, role: str, names: list[str]) -> Environ | None:
        try:
            out = self.stack.exec(self.services[role], ["python3", "-c", _ENVIRON_SCRIPT, *names])
            data = json.loads(log_lines.lines(out.strip())[-1])
        except (BundleError, ValueError, IndexError):
            return None
        return Environ(f"{data['source']} of service {self.services[role]} (compose exec)", data["values"])

    def log(self, role: str) -> str:
        try:
            return str(self.stack.logs(self.services[role]))
        except BundleError:
            return ""

    def describe(self, role: str) -> str:
        return f"compose exec {self.services[role]}"


def _last_line(text: str) -> str:
    lines = [line for line in log_lines.lines(text or "") if line.strip()]
    return lines[-1] if lines else "(no output)"


def sample_total(text: str, name: str, **labels: str) -> float | None:
    """The sum of `name`'s samples whose labels include `labels` (None when there is none): for a
    series that only one label value means, e.g. one stage of sglang:per_stage_req_latency_seconds."""
    from prometheus_client.parser import text_string_to_metric_families

    total = None
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    total = (total or 0.0) + float(sample.value)
    except ValueError:
        return None
    return total


def parse_prometheus(text: str) -> dict[str, float]:
    """Prometheus text format -> {sample name: sum over every label set} (counters only need sums),
    read by prometheus_client's own parser; a body that is not Prometheus text gives {}."""
    from prometheus_client.parser import text_string_to_metric_families

    totals: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                totals[sample.name] = totals.get(sample.name, 0.0) + float(sample.value)
    except ValueError:
        return {}
    return totals
