"""Deployment + topology -> what `docker compose` sees: an env file, the compose files, a project.

The compose files in compose/ are the source of truth for the topologies; this module only writes
the variables they read, so `docker compose --env-file runs/<project>/bundle.env -f compose/X.yaml`
runs the same thing without the driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from bundle import paths
from bundle.config import levers
from bundle.config.loader import Deployment
from bundle.errors import ConfigError
from bundle.render.interpolate import split_command

ENV_FILE_NAME = "bundle.env"
NO_FILE = "/dev/null"  # compose files read /dev/null as "no secret" / "no extra environment"
ROUTER_PORT = 30000  # inside the router's container; only the host side is configurable
SERVER_MODULE = "sglang.launch_server"
ROUTER_MODULE = "sglang_router.launch_router"


def compose_files(topology: str, *, rehearsal: bool = False) -> list[Path]:
    if rehearsal:
        from bundle.images import rehearsal as rehearsal_mod

        return rehearsal_mod.compose_files(topology)
    return [paths.compose_dir() / f"{topology}.yaml"]


def _gpu_list(gpus) -> str:
    return ",".join(str(g) for g in gpus)


def _duration_env(dep: Deployment) -> dict[str, str]:
    health, life = dep.raw["health"], dep.raw["lifecycle"]
    return {
        "HEALTH_START_PERIOD": health["start_period"],
        "HEALTH_INTERVAL": health["interval"],
        "HEALTH_TIMEOUT": health["timeout"],
        "HEALTH_RETRIES": str(health["retries"]),
        "WORKER_RESTART_POLICY": life["restart"],
        "STOP_GRACE_PERIOD": life["stop_grace_period"],
    }


def _router_env(dep: Deployment) -> dict[str, str]:
    router = dep.raw["pd"]["router"]
    return {
        "ROUTER_PORT": str(ROUTER_PORT),
        "ROUTER_POLICY": router["policy"],
        "ROUTER_HEALTH_CHECK_INTERVAL_SECS": str(router["health_check_interval_secs"]),
        "ROUTER_HEALTH_CHECK_TIMEOUT_SECS": str(router["health_check_timeout_secs"]),
        "ROUTER_HEALTH_FAILURE_THRESHOLD": str(router["health_failure_threshold"]),
        "ROUTER_HEALTH_SUCCESS_THRESHOLD": str(router["health_success_threshold"]),
        "ROUTER_REQUEST_TIMEOUT_SECS": str(router["request_timeout_secs"]),
        "ROUTER_WORKER_STARTUP_TIMEOUT_SECS": str(router["worker_startup_timeout_secs"]),
        "ROUTER_RETRY_MAX_RETRIES": str(router["retry_max_retries"]),
        "ROUTER_CB_FAILURE_THRESHOLD": str(router["cb_failure_threshold"]),
        "ROUTER_CB_TIMEOUT_SECS": str(router["cb_timeout_secs"]),
        "ROUTER_SHUTDOWN_GRACE_SECS": str(router["shutdown_grace_secs"]),
        # The router's container must outlive its own drain.
        "ROUTER_STOP_GRACE_PERIOD": f"{router['shutdown_grace_secs'] + 15}s",
        "ROUTER_EXTRA_ARGS": shell_join(router["extra_args"], ("pd", "router", "extra_args")),
    }


def shell_join(tokens, key_path: tuple) -> str:
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
                               f"write $$ for a literal dollar sign"], source="bundle.yaml")
        if "'" in token or "\n" in token:
            raise ConfigError([f"{where}: {token!r}: single quotes and newlines cannot pass through "
                               f"compose's env file; use double quotes"], source="bundle.yaml")
        if token and all(c.isalnum() or c in "-_.,:/=+@%" for c in token):
            out.append(token)
        else:
            escaped = token.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`")
            out.append(f'"{escaped}"')
    return " ".join(out)


def role_variables(dep: Deployment, topology: str) -> dict[str, str]:
    """Per-server variables: TP size, GPU placement, extra args (levers' flags first)."""
    lever_args = levers.server_args(dep.levers)
    env: dict[str, str] = {}
    if topology == "tp4":
        role = dep.roles("tp4")[0]
        env.update({
            "TP4_TP_SIZE": str(role.tp_size),
            "TP4_VISIBLE_GPUS": _gpu_list(role.gpus),
            "TP4_BASE_GPU_ID": "0",  # the container sees only its own GPUs
            "TP4_EXTRA_ARGS": shell_join(lever_args + list(role.extra_args), role.key_path + ("extra_args",)),
        })
        return env
    pd = dep.raw["pd"]
    prefill, decode = dep.roles("pd")
    union = sorted(set(prefill.gpus) | set(decode.gpus))
    for role in (prefill, decode):
        prefix = f"PD_{role.name.upper()}"
        if pd["share_gpus"]:
            visible, base = union, union.index(min(role.gpus))
        else:
            visible, base = sorted(role.gpus), 0
        env.update({
            f"{prefix}_TP_SIZE": str(role.tp_size),
            f"{prefix}_VISIBLE_GPUS": _gpu_list(visible),
            f"{prefix}_BASE_GPU_ID": str(base),
            f"{prefix}_EXTRA_ARGS": shell_join(lever_args + list(role.extra_args),
                                               role.key_path + ("extra_args",)),
        })
    env.update({
        "PD_TRANSFER_BACKEND": pd["transfer_backend"],
        "PD_BOOTSTRAP_PORT": str(pd["bootstrap_port"]),
        "KV_TRANSFER_TIMEOUT_SECS": str(pd["kv_transfer_timeout_secs"]),
    })
    env.update(_router_env(dep))
    return env


def environment(dep: Deployment, topology: str, *, image: str | None = None,
                lock_hash: str | None = None) -> dict[str, str]:
    """Every variable compose/<topology>.yaml reads, from the config (and the lock for image/hash)."""
    if image is None or lock_hash is None:
        from bundle.images.lock import load_lock

        lock = load_lock()
        lock_hash = lock_hash or lock.hash
        image = image or dep.raw["image"]["ref"] or lock.image_ref
    net = dep.network
    env = {
        "COMPOSE_PROJECT_NAME": dep.project_name(topology),
        "BUNDLE_TOPOLOGY": topology,
        "BUNDLE_IMAGE": image,
        "BUNDLE_LOCK_HASH": lock_hash,
        "JIT_CACHE_VOLUME": f"{dep.project}-jit-{lock_hash}",
        "MODEL_HOST_PATH": str(Path(dep.model_path).expanduser()),
        "SERVED_MODEL_NAME": dep.served_name,
        "HOST_ADDRESS": net["host_address"],
        "FRONT_PORT": str(net["front_port"]),
        "WORKER_PORT": str(net["worker_port"]),
        "API_KEY_FILE": dep.api_key_file or NO_FILE,
    }
    env.update(levers.environment(dep.levers))
    env.update(_duration_env(dep))
    env.update(role_variables(dep, topology))
    return env


@dataclass
class Rendered:
    """What one topology's compose run is made of, written under runs/<project>/."""

    topology: str
    project: str
    env: dict[str, str]
    env_file: Path
    compose_files: list[Path]
    role_env_files: dict[str, Path] = field(default_factory=dict)

    def stack(self):
        from bundle.stack.docker import Stack

        return Stack(self.project, self.compose_files, self.env_file)

    def compose_command(self) -> str:
        files = " ".join(f"-f {f}" for f in self.compose_files)
        return f"docker compose -p {self.project} --env-file {self.env_file} {files}"


_ROLE_ENV_VARIABLE = {"tp4": "TP4_ENV_FILE", "prefill": "PD_PREFILL_ENV_FILE",
                      "decode": "PD_DECODE_ENV_FILE"}


def render(dep: Deployment, topology: str, *, rehearsal: bool = False, run_dir: Path | None = None,
           extra_env: dict[str, str] | None = None, image: str | None = None,
           lock_hash: str | None = None) -> Rendered:
    """Write the env file (and per-server extra environment files) and return what compose needs."""
    env = environment(dep, topology, image=image, lock_hash=lock_hash)
    env.update(extra_env or {})
    project = env["COMPOSE_PROJECT_NAME"]
    run_dir = Path(run_dir or paths.runs_dir() / project)
    run_dir.mkdir(parents=True, exist_ok=True)
    role_files = {}
    for role in dep.roles(topology):
        variable = _ROLE_ENV_VARIABLE[role.name]
        if role.env:
            path = run_dir / f"{role.name}.env"
            write_env_file(path, role.env, role.key_path + ("env",))
            role_files[role.name] = path
            env[variable] = str(path)
        else:
            env[variable] = NO_FILE
    env_file = run_dir / ENV_FILE_NAME
    write_env_file(env_file, env, ("(rendered)",))
    return Rendered(topology=topology, project=project, env=env, env_file=env_file,
                    compose_files=compose_files(topology, rehearsal=rehearsal), role_env_files=role_files)


def env_file_text(env: dict[str, str], key_path: tuple) -> str:
    lines = ["# Written by `bundle render`; compose reads it with --env-file. Do not edit: edit bundle.yaml."]
    for name in sorted(env):
        lines.append(f"{name}={_quote_env_value(str(env[name]), key_path + (name,))}")
    return "\n".join(lines) + "\n"


def write_env_file(path: Path, env: dict[str, str], key_path: tuple) -> None:
    path.write_text(env_file_text(env, key_path))


def _quote_env_value(value: str, key_path: tuple) -> str:
    # compose's env-file reader takes single-quoted values literally (no $ expansion, no escapes).
    if "'" not in value and "\n" not in value:
        return f"'{value}'"
    if not any(c in value for c in '"$\\\n'):
        return f'"{value}"'
    raise ConfigError([f"{'.'.join(map(str, key_path))}: a value may contain single quotes or one of "
                       f"\" $ \\ and newlines, not both; simplify {value!r}"], source="bundle.yaml")


def resolved_commands(rendered_env: dict[str, str], files: list[Path]) -> dict[str, list[str]]:
    """Each service's argv as compose will resolve it (fast path; compose's own view is `config`)."""
    services: dict[str, dict] = {}
    for path in files:
        data = yaml.safe_load(Path(path).read_text()) or {}
        for name, service in (data.get("services") or {}).items():
            if not isinstance(service, dict):
                continue
            merged = services.setdefault(name, {})
            for key in ("command", "profiles"):
                if key in service:
                    merged[key] = service[key]
    # Services behind a profile (the bench tool) are not part of `up`, as compose config shows.
    return {name: split_command(s["command"], rendered_env) for name, s in services.items()
            if "command" in s and not s.get("profiles")}


def program_args(argv: list[str], module: str) -> list[str] | None:
    """The arguments after `python3 -m <module>` in argv, or None if argv does not run it."""
    for i in range(len(argv) - 1):
        if argv[i] == "-m" and argv[i + 1] == module:
            return argv[i + 2:]
    return None
