"""Semantic rules over a schema-valid Deployment: the mistakes that would otherwise cost a user ten
minutes of weight loading. All problems are collected in one pass; warnings do not stop a launch.

Server and router command lines are resolved from the compose files exactly as compose will run
them (bundle.interpolate) and parsed by snapshots of the pinned SGLang's and sglang-router's own
parsers (bundle.argspec).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bundle.rules import argspec
from bundle.config import levers
from bundle.rules.cmdline import option_value
from bundle.config.loader import Deployment
from bundle.errors import ConfigError
from bundle.render.compose import ROUTER_MODULE, SERVER_MODULE, compose_files, environment, program_args, resolved_commands
from bundle.config.source import format_path


@dataclass
class Findings:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def raise_if_errors(self, source: str) -> None:
        if self.errors:
            raise ConfigError(self.errors, source=source)


def check(dep: Deployment, topology: str, *, require_model: bool = False,
          env: dict[str, str] | None = None) -> Findings:
    """Every semantic rule for `topology`; `require_model` turns a missing model into an error."""
    found = Findings()
    where = dep.source.where

    def error(path: tuple, text: str) -> None:
        found.errors.append(f"{where(path)}: {format_path(path)}: {text}")

    roles = dep.roles(topology)
    for role in roles:
        _check_gpus(role, error)
    if topology == "pd":
        _check_pd(dep, roles, error)
    _check_managed_flags(dep, topology, roles, error)
    _check_model(dep, found, require_model)
    _check_api_key_file(dep, error)
    if not found.errors:
        # Only worth resolving command lines once the pieces they are made of are sound.
        _check_command_lines(dep, topology, env, error)
    return found


def _check_gpus(role, error) -> None:
    gpus = list(role.gpus)
    if len(gpus) != role.tp_size:
        error(role.key_path + ("gpus",),
              f"{len(gpus)} GPUs {gpus} but tp_size is {role.tp_size}; list exactly {role.tp_size} GPUs "
              f"or set tp_size: {len(gpus)}")
    if sorted(gpus) != list(range(min(gpus), min(gpus) + len(gpus))):
        error(role.key_path + ("gpus",),
              f"GPUs {gpus} are not consecutive; SGLang places its ranks on --base-gpu-id, +1, +2, ...: "
              f"use a consecutive range such as {list(range(min(gpus), min(gpus) + len(gpus)))}")


def _check_pd(dep: Deployment, roles, error) -> None:
    prefill, decode = roles
    shared = sorted(set(prefill.gpus) & set(decode.gpus))
    if shared:
        error(("pd", "decode", "gpus"),
              f"GPUs {shared} are given to both prefill (pd.prefill.gpus) and decode; "
              f"the two servers need disjoint GPU sets")
    pd = dep.raw["pd"]
    if pd["bootstrap_port"] == dep.network["worker_port"]:
        error(("pd", "bootstrap_port"),
              f"{pd['bootstrap_port']} is also network.worker_port; prefill listens on both, "
              f"so they must differ (SGLang's default bootstrap port is 8998)")


def _managed_flags(dep: Deployment, topology: str) -> dict[str, set[str]]:
    """Flags the compose files or the levers already set, per program: extra_args may not repeat them."""
    env = environment(dep, topology, image="x", lock_hash="x")
    for name in list(env):
        if name.endswith("_EXTRA_ARGS"):
            env[name] = ""
    server, router = set(levers.MTP_ARGS + levers.EAGER_ARGS + levers.PCIE_SAFE_ARGS), set()
    for argv in resolved_commands(env, compose_files(topology)).values():
        args = program_args(argv, SERVER_MODULE)
        if args is not None:
            server |= {a for a in args if a.startswith("--")}
        args = program_args(argv, ROUTER_MODULE)
        if args is not None:
            router |= {a for a in args if a.startswith("--")}
    server.add("--api-key")
    router.add("--api-key")

    def with_aliases(flags: set[str], spec: str) -> set[str]:
        known = argspec.aliases(spec)
        return {alias for f in flags for alias in known.get(f, (f,))}

    return {"sglang-server": with_aliases(server, "sglang-server"),
            "sglang-router": with_aliases(router, "sglang-router")}


def _check_managed_flags(dep: Deployment, topology: str, roles, error) -> None:
    managed = _managed_flags(dep, topology)
    lists = [(role.key_path + ("extra_args",), role.extra_args, "sglang-server") for role in roles]
    if topology == "pd":
        lists.append((("pd", "router", "extra_args"), dep.raw["pd"]["router"]["extra_args"], "sglang-router"))
    for path, tokens, spec in lists:
        for index, token in enumerate(tokens):
            flag = str(token).split("=", 1)[0]
            if flag in managed[spec]:
                error(path + (index,),
                      f"{flag} is set by the bundle itself (from model:, network:, levers:, tp_size, gpus "
                      f"or pd:); change that key instead of passing the flag")


def _check_model(dep: Deployment, found: Findings, required: bool) -> None:
    model = Path(dep.model_path).expanduser()
    line = f"{dep.source.where(('model', 'path'))}: model.path: "
    if not model.is_dir():
        text = line + f"{model} does not exist on this host"
    elif not (model / "config.json").is_file():
        text = line + f"{model} has no config.json; point it at the folder that holds the weights"
    else:
        return
    if required:
        found.errors.append(text)
    else:
        found.warnings.append(text + " (fine if the model lives only on the GPU host)")


def _check_api_key_file(dep: Deployment, error) -> None:
    path = dep.api_key_file
    if path is None:
        return
    key = Path(path)
    if not key.is_file():
        error(("api_key_file",), f"{path} does not exist; write the key into it (one line) or set "
                                 f"api_key_file: null")
    elif not key.read_text().strip():
        error(("api_key_file",), f"{path} is empty; write the key into it or set api_key_file: null")


def _check_command_lines(dep: Deployment, topology: str, env: dict[str, str] | None, error) -> None:
    env = env or environment(dep, topology, image="x", lock_hash="x")
    roles = {role.name: role for role in dep.roles(topology)}
    service_role = {"server": "tp4", "prefill": "prefill", "decode": "decode"}
    prefill_bootstrap = None
    router_args = None
    for service, argv in resolved_commands(env, compose_files(topology)).items():
        server_args = program_args(argv, SERVER_MODULE)
        if server_args is not None:
            role = roles[service_role[service]]
            problem = argspec.check_arguments("sglang-server", server_args)
            if problem:
                error(role.key_path + ("extra_args",),
                      f"the {service} command line is rejected by SGLang's parser: {problem}")
            if service == "prefill":
                prefill_bootstrap = option_value(server_args, "--disaggregation-bootstrap-port")
        args = program_args(argv, ROUTER_MODULE)
        if args is not None:
            router_args = args
            problem = argspec.check_arguments("sglang-router", args)
            if problem:
                error(("pd", "router", "extra_args"),
                      f"the router command line is rejected by sglang-router's parser: {problem}")
    if router_args is not None and prefill_bootstrap is not None:
        router_bootstrap = _router_prefill_bootstrap(router_args)
        if router_bootstrap != prefill_bootstrap:
            error(("pd", "bootstrap_port"),
                  f"the router pairs prefill with bootstrap port {router_bootstrap} but prefill listens on "
                  f"{prefill_bootstrap}; requests would fail with 'connection refused'")


def _router_prefill_bootstrap(args: list[str]) -> str | None:
    for i, token in enumerate(args):
        if token == "--prefill" and i + 2 < len(args) and not args[i + 2].startswith("--"):
            return args[i + 2]
    return None
