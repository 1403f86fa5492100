"""(typed config, topology) -> what `docker compose` runs: the variables the compose files read, the
files, the profiles, and each service's command line as compose will resolve it.

Pure: `render()` reads the compose files and writes nothing, so the rules check exactly what a
launch will run; `Rendered.write()` puts the env file (and each server's extra environment) under
runs/<project>/, and `docker compose --env-file runs/<project>/bundle.env -f compose/X.yaml` then
runs the same thing without the driver. What was rendered is recorded with a launch, never parsed
back from the env file.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


from bundle import paths
from bundle.config import levers
from bundle.config.model import Deployment, Layout, Role, RouterSection
from bundle.errors import ConfigError
from bundle.monitoring.files import DIR_NAME as MONITORING_DIR_NAME, monitoring_files
from bundle.monitoring.scrape import ROUTER_METRICS_PORT
from bundle.render import compose_files
from bundle.render.interpolate import split_command
from bundle.topology import ROUTER_MODULE, SERVER_MODULE, Overlay, Topology

ENV_FILE_NAME = "bundle.env"
NO_FILE = "/dev/null"  # compose files read /dev/null as "no secret" / "no extra environment"
ROUTER_PORT = 30000  # inside the router's container; only the host side is configurable
# smg's retry backoff (its own defaults but a 1 s cap instead of 30 s), explicit so the render can
# fit the attempts and their backoffs into the router's request_timeout_secs.
RETRY_INITIAL_BACKOFF_MS = 50
RETRY_BACKOFF_MULTIPLIER = 1.5
RETRY_MAX_BACKOFF_MS = 1000
RETRY_JITTER_FACTOR = 0.2


@dataclass(frozen=True)
class Rendered:
    """What one topology's compose run is made of."""

    topology: Topology
    project: str
    env: dict[str, str]  # every variable the compose files read (paths only, never a secret)
    compose_files: tuple[Path, ...]
    profiles: tuple[str, ...]
    commands: dict[str, list[str]]  # service -> argv, as compose will run it (`up`'s services only)
    templates: dict[str, str | list]  # service -> its `command:` as the compose files spell it
    run_dir: Path  # runs/<project>/: where write() puts the env files
    role_env: dict[str, dict[str, str]] = field(default_factory=dict)  # service -> its extra environment
    source_name: str = "bundle.yaml"
    collectives: levers.Collectives | None = None  # the PCIe-safe collectives decision rendered in
    layout: Layout | None = None  # the topology as the config set it, read once: what the rules check
    # Makes the monitoring profile's files (prometheus.yml, rules, Grafana's), relative to
    # run_dir/monitoring/: written with the env file whether or not the profile is on, so
    # COMPOSE_PROFILES=monitoring works. Made only when written or read (not by `bundle validate`).
    monitoring: Callable[[], dict[str, str]] | None = None

    @property
    def monitoring_files(self) -> dict[str, str]:
        return self.monitoring() if self.monitoring is not None else {}

    @property
    def env_file(self) -> Path:
        return self.run_dir / ENV_FILE_NAME

    def server_args(self, service: str) -> list[str] | None:
        return program_args(self.commands.get(service, []), SERVER_MODULE)

    def router_args(self) -> list[str] | None:
        router = self.topology.router
        return program_args(self.commands.get(router.name, []), ROUTER_MODULE) if router else None

    def write(self) -> Path:
        """The env file and each server's extra environment file, under run_dir; returns the env file."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        for service, env in self.role_env.items():
            _write_env_file(self.run_dir / f"{service}.env", env, (service, "env"), self.source_name)
        for relative, text in self.monitoring_files.items():
            path = self.run_dir / MONITORING_DIR_NAME / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        _write_env_file(self.env_file, self.env, ("(rendered)",), self.source_name)
        return self.env_file

    def written_paths(self) -> list[Path]:
        """Every file write() (re)writes: what a reconcile snapshots, to put back on roll back."""
        return ([self.run_dir / f"{service}.env" for service in self.role_env]
                + [self.run_dir / MONITORING_DIR_NAME / relative for relative in self.monitoring_files]
                + [self.env_file])

    @property
    def warnings(self) -> tuple[str, ...]:
        """The compose render adds none of its own: the rules' warnings are prepare()'s."""
        return ()

    def compose_command(self) -> str:
        files = " ".join(f"-f {f}" for f in self.compose_files)
        profiles = "".join(f" --profile {p}" for p in self.profiles)
        return f"docker compose -p {self.project} --env-file {self.env_file} {files}{profiles}"


def render(dep: Deployment, topology: Topology, *, image: str, lock_hash: str, mode: Overlay | None = None,
           extra_env: dict[str, str] | None = None, collectives: levers.Collectives | None = None,
           monitoring: bool = False) -> Rendered:
    """Every variable topology's compose file reads, from the config; `mode`: a way to run with no GPU (a
    bundle.topology.Overlay: its compose overlay and server-argument overrides) or None; `extra_env` (the
    mode's values, a test's overrides) wins. `monitoring`: the monitoring profile on (with Grafana and the
    DCGM exporter on a GPU host). `collectives`: launch's per-host decision for
    levers.pcie_safe_collectives: auto (without one, auto renders the safe setting). Reads the
    compose files; writes nothing."""
    collectives = collectives or levers.unprobed_collectives(dep.levers)
    project = dep.project_name(topology.name)
    run_dir = paths.runs_dir() / project
    layout = dep.layout(topology)
    roles = layout.roles
    env = {
        "COMPOSE_PROJECT_NAME": project,
        "BUNDLE_TOPOLOGY": topology.name,
        "BUNDLE_IMAGE": dep.image_ref or image,
        "BUNDLE_LOCK_HASH": lock_hash,
        "JIT_CACHE_VOLUME": f"{dep.project}-jit-{lock_hash}",
        "MODEL_HOST_PATH": str(Path(dep.model_path).expanduser()),
        "SERVED_MODEL_NAME": dep.served_name,
        "HOST_ADDRESS": dep.network.host_address,
        "FRONT_PORT": str(dep.network.front_port),
        "WORKER_PORT": str(dep.network.worker_port),
        "API_KEY_FILE": dep.api_key_file or NO_FILE,
        **levers.environment(dep.levers, collectives),
        **_lifecycle_env(dep),
    }
    role_env = {}
    for role in roles:
        env.update(_server_env(dep, layout, role, collectives))
        if role.env:
            role_env[role.name] = dict(role.env)
        env[f"{role.service.env_prefix}_ENV_FILE"] = str(run_dir / f"{role.name}.env") if role.env else NO_FILE
    router = layout.router
    if router is not None:
        env.update(_router_env(router, dep.source.name))
    if topology.disaggregated:
        pd = layout.section
        env.update({"PD_TRANSFER_BACKEND": pd.transfer_backend,
                    "PD_BOOTSTRAP_PORT": str(pd.bootstrap_port),
                    "KV_TRANSFER_TIMEOUT_SECS": str(pd.kv_transfer_timeout_secs)})
    if topology.replicated:
        # The router's --worker-urls: one URL per replica `up` starts.
        env["DP_WORKER_URLS"] = " ".join(f"http://{role.name}:{dep.network.worker_port}" for role in roles)
    env.update(_monitoring_env(topology, run_dir))
    profiles = topology.profiles_for(layout.replicas)
    if monitoring:
        # With no GPU, Prometheus only: Grafana and the DCGM exporter come from a registry and the
        # exporter needs GPUs (docs/monitoring.md).
        profiles += ["monitoring"] if mode is not None else ["monitoring", "grafana", "gpu-metrics"]
    if profiles:
        env["COMPOSE_PROFILES"] = ",".join(profiles)  # so plain `docker compose --env-file` agrees
    env.update(extra_env or {})
    if mode is not None and mode.server_args is not None:
        # e.g. the CPU engine: each server's own command line plus the CPU overrides.
        env.update(mode.server_args(topology, env))
    files = tuple(topology.compose_files(overlay=mode.overlay_file(topology) if mode else None))
    services = up_services(files, profiles)
    return Rendered(topology=topology, project=project, env=env, compose_files=files,
                    profiles=tuple(profiles),
                    commands={name: split_command(template, env) for name, template in services.items()},
                    templates=services, run_dir=run_dir, role_env=role_env, source_name=dep.source.name,
                    collectives=collectives, layout=layout,
                    monitoring=functools.partial(
                        monitoring_files, topology, dep.monitoring, worker_port=dep.network.worker_port,
                        fast=mode is not None, gpu_host=mode is None,
                        active={s.name for s in topology.active_services(layout.replicas)}))


def for_target(dep: Deployment, rendered: Rendered) -> Rendered:
    """The compose target (targets/registry.py): the compose render is its own output."""
    return rendered


def _monitoring_env(topology: Topology, run_dir: Path) -> dict[str, str]:
    """What compose/monitoring.yaml reads: its images (lock.toml's [monitoring]; Prometheus built
    here), the rendered files and the network it joins."""
    from bundle.image_tags import prometheus_tag
    from bundle.lock import load_lock

    pins = load_lock().table("monitoring")
    return {"MONITORING_DIR": str(run_dir / MONITORING_DIR_NAME), "MONITORING_NETWORK": topology.network,
            "PROMETHEUS_IMAGE": prometheus_tag(), "GRAFANA_IMAGE": pins["grafana"],
            "DCGM_EXPORTER_IMAGE": pins["dcgm_exporter"], "ROUTER_METRICS_PORT": str(ROUTER_METRICS_PORT)}


def _gpu_list(gpus) -> str:
    return ",".join(str(g) for g in gpus)


def _server_env(dep: Deployment, layout: Layout, role: Role, collectives: levers.Collectives) -> dict[str, str]:
    """One server's variables: TP size, GPU placement, extra args (the levers' flags first)."""
    if layout.topology.gpu_visibility == "union" and layout.section.share_gpus:
        # Every server sees the union and picks its own GPUs with --base-gpu-id (CUDA IPC between them).
        visible = sorted({g for r in layout.roles for g in r.gpus})
        base = visible.index(min(role.gpus))
    else:
        visible, base = sorted(role.gpus), 0  # the container sees only its own GPUs
    prefix = role.service.env_prefix
    args = levers.server_args(dep.levers, collectives) + list(role.extra_args)
    return {
        f"{prefix}_TP_SIZE": str(role.tp_size),
        f"{prefix}_VISIBLE_GPUS": _gpu_list(visible),
        f"{prefix}_BASE_GPU_ID": str(base),
        f"{prefix}_EXTRA_ARGS": shell_join(args, role.key_path + ("extra_args",), dep.source.name),
    }


def _lifecycle_env(dep: Deployment) -> dict[str, str]:
    health, life = dep.health, dep.lifecycle
    return {
        "HEALTH_START_PERIOD": health.start_period,
        "HEALTH_INTERVAL": health.interval,
        "HEALTH_TIMEOUT": health.timeout,
        "HEALTH_RETRIES": str(health.retries),
        "RESTART_POLICY": life.restart,  # every service's, the router's too (compose/pd.yaml)
        "STOP_GRACE_PERIOD": life.stop_grace_period,
    }


def _router_env(router: RouterSection, source: str) -> dict[str, str]:
    return {
        "ROUTER_PORT": str(ROUTER_PORT),
        "ROUTER_POLICY": router.policy,
        "ROUTER_HEALTH_CHECK_INTERVAL_SECS": str(router.health_check_interval_secs),
        "ROUTER_HEALTH_CHECK_TIMEOUT_SECS": str(router.health_check_timeout_secs),
        "ROUTER_HEALTH_FAILURE_THRESHOLD": str(router.health_failure_threshold),
        "ROUTER_HEALTH_SUCCESS_THRESHOLD": str(router.health_success_threshold),
        # Per attempt: smg's --request-timeout-secs bounds one attempt, the budget is the total.
        "ROUTER_REQUEST_TIMEOUT_SECS": str(attempt_timeout_secs(router)),
        "ROUTER_RETRY_INITIAL_BACKOFF_MS": str(RETRY_INITIAL_BACKOFF_MS),
        "ROUTER_RETRY_BACKOFF_MULTIPLIER": str(RETRY_BACKOFF_MULTIPLIER),
        "ROUTER_RETRY_MAX_BACKOFF_MS": str(RETRY_MAX_BACKOFF_MS),
        "ROUTER_RETRY_JITTER_FACTOR": str(RETRY_JITTER_FACTOR),
        "ROUTER_WORKER_STARTUP_TIMEOUT_SECS": str(router.worker_startup_timeout_secs),
        "ROUTER_RETRY_MAX_RETRIES": str(router.retry_max_retries),
        "ROUTER_CB_FAILURE_THRESHOLD": str(router.cb_failure_threshold),
        "ROUTER_CB_TIMEOUT_SECS": str(router.cb_timeout_secs),
        "ROUTER_SHUTDOWN_GRACE_SECS": str(router.shutdown_grace_secs),
        # The router's container must outlive its own drain.
        "ROUTER_STOP_GRACE_PERIOD": f"{router.shutdown_grace_secs + 15}s",
        "ROUTER_EXTRA_ARGS": shell_join(router.extra_args, router.key_path + ("extra_args",), source),
    }


def retry_backoff_secs(attempts: int) -> float:
    """The longest smg waits between `attempts` attempts in all (jitter at its largest)."""
    waits = (min(RETRY_INITIAL_BACKOFF_MS * RETRY_BACKOFF_MULTIPLIER ** k, RETRY_MAX_BACKOFF_MS)
             for k in range(attempts - 1))
    return sum(waits) * (1 + RETRY_JITTER_FACTOR) / 1000


def attempt_timeout_secs(router: RouterSection) -> int:
    """smg's per-attempt timeout that keeps every attempt and backoff within request_timeout_secs
    (at least 1 s; the rules refuse a budget too small for its attempts)."""
    attempts = router.retry_max_retries
    return max(1, int((router.request_timeout_secs - retry_backoff_secs(attempts)) // attempts))


def shell_join(tokens, key_path: tuple, source: str = "bundle.yaml") -> str:
    """Tokens -> one string that compose's shell-style split turns back into the same tokens.

    Tokens that need quoting get double quotes (JSON values keep their inner quotes escaped), so
    the joined string never holds a single quote and the env file can quote it literally.
    """
    out = []
    for token in map(str, tokens):
        where = ".".join(map(str, key_path))
        if "$" in token:
            # compose would interpolate it; "$$" is how a compose file spells a literal dollar.
            raise ConfigError([f"{where}: {token!r} contains '$', which compose would expand; "
                               f"write $$ for a literal dollar sign"], source=source)
        if "'" in token or "\n" in token:
            raise ConfigError([f"{where}: {token!r}: single quotes and newlines cannot pass through "
                               f"compose's env file; use double quotes"], source=source)
        if token and all(c.isalnum() or c in "-_.,:/=+@%" for c in token):
            out.append(token)
        else:
            escaped = token.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`")
            out.append(f'"{escaped}"')
    return " ".join(out)


def env_file_text(env: dict[str, str], key_path: tuple, source: str = "bundle.yaml") -> str:
    lines = ["# Written by `bundle render`/`bundle launch`; compose reads it with --env-file. Do not edit: "
             "edit bundle.yaml."]
    for name in sorted(env):
        lines.append(f"{name}={_quote_env_value(str(env[name]), key_path + (name,), source)}")
    return "\n".join(lines) + "\n"


def _write_env_file(path: Path, env: dict[str, str], key_path: tuple, source: str) -> None:
    path.write_text(env_file_text(env, key_path, source))


def _quote_env_value(value: str, key_path: tuple, source: str) -> str:
    # compose's env-file reader takes single-quoted values literally (no $ expansion, no escapes).
    if "'" not in value and "\n" not in value:
        return f"'{value}'"
    if not any(c in value for c in '"$\\\n'):
        return f'"{value}"'
    raise ConfigError([f"{'.'.join(map(str, key_path))}: a value may contain single quotes or one of "
                       f"\" $ \\ and newlines, not both; simplify {value!r}"], source=source)


def up_services(files, profiles=()) -> dict[str, str | list]:
    """Each service `up` starts with `profiles` active -> its `command:` as the files spell it (the
    last file that sets it wins, as in compose). A contract test compares the resolved commands
    with `docker compose config`."""
    services: dict[str, dict] = {}
    for path in files:
        for name, service in compose_files.services(path).items():
            merged = services.setdefault(name, {})
            for key in ("command", "profiles"):
                if key in service:
                    merged[key] = service[key]
    active = set(profiles)
    # A service behind a profile (the bench tool, dp's optional replicas) is part of `up` only when
    # one of its profiles is active.
    return {name: s["command"] for name, s in services.items()
            if "command" in s and (not s.get("profiles") or active & set(s["profiles"]))}


def program_args(argv: list[str], module: str) -> list[str] | None:
    """The arguments after `python3 -m <module>` in argv, or None if argv does not run it."""
    for i in range(len(argv) - 1):
        if argv[i] == "-m" and argv[i + 1] == module:
            return argv[i + 2:]
    return None
