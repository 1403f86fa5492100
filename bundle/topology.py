"""The topology registry: what each topology is, in one place. Every other module asks it.

A topology is a compose file (the source of truth for what runs), an overlay per way to run it with no
GPU (bundle.api.Mode.overlay), and the facts the driver needs about it: its services and their roles, where
each server's settings live in bundle.yaml, the compose variables of each server (one prefix per
server), the front door and its readiness path, and how GPU groups become visible devices and
`--base-gpu-id`.

Behaviour comes from the capabilities an entry states, never from its name: `disaggregated` (prefill
and decode servers, the KV cache moved between them), `replicated` (copies of one server behind the
router, sharing one config section), `has_router`, each service's `role` and `config_key`, the
topology's `config_section`, `gpu_visibility`. Code outside this module asks for a capability; a test
(tests/test_topology_registry.py) fails on a topology name compared anywhere else in bundle/.

The shape of a topology's section in bundle.yaml follows from its capabilities (config/model.py):
a disaggregated one holds `prefill`, `decode`, `router` and the KV transfer's settings; a replicated
one `replicas`, `tp_size`, `gpus` and `router`; any other one server's `gpus`, `tp_size`, ...
A new topology may share an existing section (its servers read the same settings) or bring its own
(then bundle.schema.json and defaults.yaml describe it).

Adding a topology = one entry in TOPOLOGIES + compose/<name>.yaml + each no-GPU mode's overlay for it
(compose/<Mode.overlay>, `{topology}` replaced by its name).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bundle.errors import UsageError
from bundle.paths import compose_dir

SERVER, PREFILL, DECODE, ROUTER = "server", "prefill", "decode", "router"
# The compose tool service (profile "tools": `up` never starts it) that runs bench_serving.
TOOL_SERVICE = "bench"
# SGLang's HTTP paths the front door and the workers answer.
SERVER_HEALTH_PATH = "/health"  # a one-token generation: 200 only once the model really serves
ROUTER_READINESS_PATH = "/readiness"  # 503 until the router has the workers it needs
# The programs the compose files run (`python3 -m MODULE ...`), found in their command lines by
# the rules and the contract tests.
SERVER_MODULE = "sglang.launch_server"
ROUTER_MODULE = "smg.launch_router"  # smg (Shepherd Model Gateway); `smg launch` runs the same


@dataclass(frozen=True)
class Service:
    """One compose service of a topology."""

    name: str  # the compose service name
    role: str  # server, prefill, decode or router
    # Where this server's settings live in bundle.yaml ((), for the router: its section is the
    # topology's `router:`). Replicas of dp share one section.
    config_key: tuple[str, ...] = ()
    # Prefix of the compose variables of this server: <prefix>_TP_SIZE, _VISIBLE_GPUS,
    # _BASE_GPU_ID, _EXTRA_ARGS, _ENV_FILE.
    env_prefix: str = ""
    replica: int = 0  # dp: which replica (its GPU group); 0 otherwise
    # compose profiles that enable it (dp's optional replicas); () = always part of `up`
    profiles: tuple[str, ...] = ()

    @property
    def is_server(self) -> bool:
        return self.role != ROUTER


@dataclass(frozen=True)
class Topology:
    name: str
    summary: str
    services: tuple[Service, ...]  # every service `up` may start, servers first
    front_service: str  # the only service with a published port
    config_section: str  # bundle.yaml's section of this topology: its servers' and router's settings
    # How servers see GPUs: "own" (each container its own group, --base-gpu-id 0) or "union" (every
    # server sees the union and picks its group with --base-gpu-id: pd's CUDA IPC between them).
    gpu_visibility: str = "own"
    max_replicas: int = 1  # dp: the compose file defines this many replica services
    network: str = "default"  # the compose network its services share (the monitoring profile joins it)

    @property
    def compose_file(self) -> Path:
        return compose_dir() / f"{self.name}.yaml"

    def compose_files(self, *, overlay: Path | None = None) -> list[Path]:
        """The topology's file, then an overlay (a no-GPU mode's, bundle.api.Mode): order
        matters, the overlay wins; then the monitoring profile's services (off unless the `monitoring`
        profile is active)."""
        return [self.compose_file, *([overlay] if overlay else []), compose_dir() / "monitoring.yaml"]

    @property
    def servers(self) -> tuple[Service, ...]:
        return tuple(s for s in self.services if s.is_server)

    @property
    def router(self) -> Service | None:
        return next((s for s in self.services if s.role == ROUTER), None)

    @property
    def has_router(self) -> bool:
        return self.router is not None

    @property
    def disaggregated(self) -> bool:
        """Prefill and decode are separate servers, the KV cache moved between them (PD)."""
        return any(s.role in (PREFILL, DECODE) for s in self.services)

    @property
    def replicated(self) -> bool:
        """Copies of one server behind the router, all read from the topology's one config section."""
        return self.max_replicas > 1

    @property
    def readiness_path(self) -> str:
        """The front door's readiness: the router's pairing, or the lone server's /health."""
        return ROUTER_READINESS_PATH if self.has_router else SERVER_HEALTH_PATH

    @property
    def front_port_variable(self) -> str:
        """The compose variable of the port the front service listens on inside its container."""
        return "ROUTER_PORT" if self.has_router else "WORKER_PORT"

    def service(self, name: str) -> Service:
        for s in self.services:
            if s.name == name:
                return s
        raise KeyError(f"{self.name} has no service {name!r}")

    def active_services(self, replicas: int = 1) -> tuple[Service, ...]:
        """What `up` starts: every service, less dp's replicas beyond `replicas`."""
        return tuple(s for s in self.services if not s.is_server or s.replica < max(replicas, 1))

    def profiles_for(self, replicas: int) -> list[str]:
        """The compose profiles that enable `replicas` replicas (dp's optional ones)."""
        wanted = {p for s in self.active_services(replicas) for p in s.profiles}
        return sorted(wanted)


def _replica(i: int, max_replicas: int) -> Service:
    # Replicas past the first two are optional: profile dp-N enables replica N-1 and below.
    profiles = tuple(f"dp-{n}" for n in range(i + 1, max_replicas + 1)) if i >= 2 else ()
    return Service(f"replica-{i}", SERVER, ("dp",), f"DP_REPLICA{i}", replica=i, profiles=profiles)


DP_MAX_REPLICAS = 4

TOPOLOGIES: dict[str, Topology] = {
    "tp4": Topology(
        name="tp4",
        summary="one SGLang server, tensor parallel 4 on GPUs 0-3",
        services=(Service("server", SERVER, ("tp4",), "TP4"),),
        front_service="server",
        config_section="tp4",
    ),
    "pd": Topology(
        name="pd",
        summary="prefill (GPUs 0-3) and decode (GPUs 4-7), KV cache moved by NIXL, the router in PD mode",
        services=(Service("prefill", PREFILL, ("pd", "prefill"), "PD_PREFILL"),
                  Service("decode", DECODE, ("pd", "decode"), "PD_DECODE"),
                  Service("router", ROUTER)),
        front_service="router",
        config_section="pd",
        gpu_visibility="union",
        network="pd",
    ),
    "dp": Topology(
        name="dp",
        summary="data-parallel replicas of one TP size (default 2 x TP4 on GPUs 0-3 and 4-7) behind the "
                "router (cache-aware)",
        services=(*(_replica(i, DP_MAX_REPLICAS) for i in range(DP_MAX_REPLICAS)), Service("router", ROUTER)),
        front_service="router",
        config_section="dp",
        max_replicas=DP_MAX_REPLICAS,
        network="dp",
    ),
}
NAMES = tuple(TOPOLOGIES)


def get(name: str) -> Topology:
    """The registry entry; a BundleError naming the known topologies for anything else."""
    try:
        return TOPOLOGIES[name]
    except KeyError:
        raise UsageError(f"unknown topology {name!r}; known: {', '.join(NAMES)}") from None


class Overlay(Protocol):
    """What the compose render asks of a way to run with no GPU (bundle.api.Mode implements it; the modes
    stand above this floor): its compose overlay for a topology, and its overrides of the
    servers' arguments (None: it keeps them)."""

    server_args: Callable[[Topology, dict[str, str]], dict[str, str]] | None

    def overlay_file(self, topology: Topology) -> Path: ...
