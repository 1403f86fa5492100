"""Semantic rules over a schema-valid Deployment and what render made of it: the mistakes that would
otherwise cost a user ten minutes of weight loading. All problems are collected in one pass;
warnings do not stop a launch.

The rules take the one render of the command: its server and router command lines are exactly what
compose will run, and snapshots of the pinned SGLang's and router's own parsers (bundle.rules.argspec)
check them.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bundle.config import levers
from bundle.config.model import Deployment, Layout, Role, RouterSection
from bundle.config.source import format_path
from bundle.errors import ConfigError
from bundle.findings import Finding, Level
from bundle.rules import argspec, backends, checkpoint, dspark, exposure, guards
from bundle.rules.cmdline import option_value
from bundle.topology import PREFILL

Error = Callable[[tuple, str], None]


@dataclass
class RulesReport:
    """What the rules found, as the shared findings (bundle/findings.py): a FAIL stops the command
    before anything runs, a WARN is said and does not. Each finding's `what` is the whole line: the
    file and line, the key path, the problem and what to do."""

    findings: list[Finding] = field(default_factory=list)

    def error(self, line: str) -> None:
        self.findings.append(Finding(Level.FAIL, line))

    def warning(self, line: str) -> None:
        self.findings.append(Finding(Level.WARN, line))

    def error_at(self, source, path: tuple, text: str) -> None:
        """An error at `path` of `source` (a config Source): its file and line, the key path, the text."""
        self.error(f"{source.where(path)}: {format_path(path)}: {text}")

    def errors_of(self, source) -> Error:
        """The `error(path, text)` a rule takes, for the keys of `source`."""
        return lambda path, text: self.error_at(source, path, text)

    # The rules' own words at their edge: a ConfigError lists the errors, the verbs print each warning
    # as "warning: ..." (users and their scripts read those).
    @property
    def errors(self) -> list[str]:
        return [f.what for f in self.findings if f.level is Level.FAIL]

    @property
    def warnings(self) -> list[str]:
        return [f.what for f in self.findings if f.level is Level.WARN]

    def raise_if_errors(self, source: str) -> None:
        if self.errors:
            raise ConfigError(self.errors, source=source)


def check(dep: Deployment, rendered, *, require_model: bool = False) -> RulesReport:
    """Every semantic rule for the rendered topology; `require_model` turns a missing model into an error."""
    found = RulesReport()
    error = found.errors_of(dep.source)

    layout = rendered.layout  # the topology as the render read it from the config, once
    topology, roles = layout.topology, list(layout.roles)
    if topology.replicated:
        _check_replicas(layout, error)
    else:
        for role in roles:
            _check_gpus(role, error)
    if topology.disaggregated:
        _check_pd(dep, layout, error)
    _check_router_budget(layout.router, error)
    _check_managed_flags(rendered, layout, error)
    _check_backends(dep, rendered, roles, error)
    _check_kv_cache_dtype(dep, error)
    dspark.check(dep, rendered, roles, error)
    _check_model(dep, found, require_model)
    _check_api_key_file(dep, error)
    _check_exposure(dep, topology, found)
    if not found.errors:
        # Only worth parsing command lines once the pieces they are made of are sound.
        _check_command_lines(rendered, layout, error)
    return found


def _consecutive(gpus) -> bool:
    return sorted(gpus) == list(range(min(gpus), min(gpus) + len(gpus)))


def _check_gpus(role: Role, error: Error) -> None:
    gpus = list(role.gpus)
    if len(gpus) != role.tp_size:
        error(role.key_path + ("gpus",),
              f"{len(gpus)} GPUs {gpus} but tp_size is {role.tp_size}; list exactly {role.tp_size} GPUs "
              f"or set tp_size: {len(gpus)}")
    if not _consecutive(gpus):
        error(role.key_path + ("gpus",),
              f"GPUs {gpus} are not consecutive; SGLang places its ranks on --base-gpu-id, +1, +2, ...: "
              f"use a consecutive range such as {list(range(min(gpus), min(gpus) + len(gpus)))}")


def _check_replicas(layout: Layout, error: Error) -> None:
    topology, dp = layout.topology, layout.section
    key, name = dp.key_path, format_path(dp.key_path)
    gpus, want = list(dp.gpus), dp.replicas * dp.tp_size
    if dp.replicas > topology.max_replicas:
        error(key + ("replicas",), f"{dp.replicas} replicas, but compose/{topology.name}.yaml defines "
                                   f"{topology.max_replicas}; use at most {topology.max_replicas}")
    if len(gpus) != want:
        error(key + ("gpus",), f"{len(gpus)} GPUs {gpus} for {dp.replicas} replicas of tp_size {dp.tp_size}; "
                               f"list exactly {want} GPUs (replica i takes the i-th {dp.tp_size}) or change "
                               f"{name}.replicas / {name}.tp_size")
    for role in layout.roles:
        group = list(role.gpus)
        if group and not _consecutive(group):
            error(key + ("gpus",), f"{role.name} gets GPUs {group}, which are not consecutive; SGLang places "
                                   f"its ranks on --base-gpu-id, +1, ...: order {name}.gpus so each group of "
                                   f"{dp.tp_size} is a consecutive range")


def _check_router_budget(router: RouterSection | None, error: Error) -> None:
    """Each attempt gets (request_timeout_secs - backoffs) / retry_max_retries: at least a second."""
    from bundle.render.compose import retry_backoff_secs

    if router is None:
        return
    attempts = router.retry_max_retries
    if router.request_timeout_secs - retry_backoff_secs(attempts) < attempts:
        error(router.key_path + ("request_timeout_secs",),
              f"{router.request_timeout_secs} s cannot hold {attempts} attempts (retry_max_retries) and "
              f"their backoffs with at least 1 s each; raise request_timeout_secs or lower retry_max_retries")


def _check_pd(dep: Deployment, layout: Layout, error: Error) -> None:
    pd = layout.section
    prefill, decode = layout.roles
    shared = sorted(set(prefill.gpus) & set(decode.gpus))
    if shared:
        error(decode.key_path + ("gpus",),
              f"GPUs {shared} are given to both prefill ({format_path(prefill.key_path + ('gpus',))}) and decode; "
              f"the two servers need disjoint GPU sets")
    if pd.bootstrap_port == dep.network.worker_port:
        error(pd.key_path + ("bootstrap_port",),
              f"{pd.bootstrap_port} is also network.worker_port; prefill listens on both, "
              f"so they must differ (SGLang's default bootstrap port is 8998)")


def _template_flags(template) -> set[str]:
    """The flags a compose `command:` spells out itself (not those that come in through a variable)."""
    tokens = template if isinstance(template, list) else shlex.split(template)
    return {t for t in tokens if t.startswith("--")}


def _with_aliases(flags: set[str], spec: str) -> set[str]:
    known = argspec.aliases(spec)
    return {alias for f in flags for alias in known.get(f, (f,))}


def _check_managed_flags(rendered, layout: Layout, error: Error) -> None:
    """extra_args may not repeat a flag the compose file or a lever already sets."""
    lever_flags = levers.LEVER_FLAGS
    lists = []
    for role in layout.roles:
        managed = _template_flags(rendered.templates.get(role.name, "")) | lever_flags | {"--api-key"}
        lists.append((role.key_path + ("extra_args",), role.extra_args,
                      _with_aliases(managed, argspec.SERVER_SPEC)))
    router = layout.router
    if router is not None:
        managed = _template_flags(rendered.templates.get(rendered.topology.router.name, "")) | {"--api-key"}
        lists.append((router.key_path + ("extra_args",), router.extra_args,
                      _with_aliases(managed, argspec.ROUTER_SPEC)))
    seen = set()
    for path, tokens, managed in lists:
        if path in seen:  # dp's replicas share one extra_args
            continue
        seen.add(path)
        for index, token in enumerate(tokens):
            flag = str(token).split("=", 1)[0]
            if flag in managed:
                error(path + (index,),
                      f"{flag} is set by the bundle itself (from model:, network:, levers:, tp_size, gpus "
                      f"or the topology's section); change that key instead of passing the flag")


# The environment names levers render into (compose/*.yaml) -> (the flag they feed, the lever).
_LEVER_BACKEND_VARS = {"MOE_RUNNER_BACKEND": ("--moe-runner-backend", ("levers", "moe_runner"))}


def _check_backends(dep: Deployment, rendered, roles: list[Role], error: Error) -> None:
    """Every backend name the servers get is one the pinned SGLang knows (bundle.rules.backends)."""
    for var, (flag, key_path) in _LEVER_BACKEND_VARS.items():
        value = rendered.env.get(var)
        for _, text in backends.flag_problems([flag, value] if value is not None else []):
            error(key_path, text)
    seen = set()
    for role in roles:
        if role.key_path in seen:  # dp's replicas share one section
            continue
        seen.add(role.key_path)
        for index, text in backends.flag_problems(role.extra_args):
            error(role.key_path + ("extra_args", index), text)
        value = role.env.get(backends.SM120_FLASHMLA_ENV)
        if value is not None:
            problem = backends.env_problem(value)
            if problem:
                error(role.key_path + ("env", backends.SM120_FLASHMLA_ENV), problem)


def _check_kv_cache_dtype(dep: Deployment, error: Error) -> None:
    # SGLang 0.5.23 asserts this for DeepseekV4ForCausalLM (arg_groups/overrides.py,
    # _deepseek_v4_kv_cache_dtype): the server would die after loading its config.
    if dep.levers.kv_cache_dtype not in ("auto", "fp8_e4m3", "bf16", "bfloat16"):
        error(("levers", "kv_cache_dtype"),
              f"{dep.levers.kv_cache_dtype} is refused by SGLang 0.5.23 for DeepSeek-V4 (only fp8_e4m3 and "
              f"bf16); use auto (SGLang's choice: fp8_e4m3), fp8_e4m3 or bf16")


def _check_model(dep: Deployment, found: RulesReport, required: bool) -> None:
    model = Path(dep.model_path).expanduser()
    line = f"{dep.source.where(('model', 'path'))}: model.path: "
    if not model.is_dir():
        text = line + f"{model} does not exist on this host"
    elif not (model / "config.json").is_file():
        text = line + f"{model} has no config.json; point it at the folder that holds the weights"
    else:
        refused = checkpoint.unsupported_checkpoint(model / "config.json")
        if refused:
            found.error(line + refused)  # wherever it is validated: it can never serve
        return
    if required:
        found.error(text)
    else:
        found.warning(text + " (fine if the model lives only on the GPU host)")


def _check_api_key_file(dep: Deployment, error: Error) -> None:
    path = dep.api_key_file
    if path is None:
        return
    key = Path(path)
    if not key.is_file():
        error(("api_key_file",), f"{path} does not exist; write the key into it (one line) or set "
                                 f"api_key_file: null")
    elif not key.read_text().strip():
        error(("api_key_file",), f"{path} is empty; write the key into it or set api_key_file: null")


def _check_exposure(dep: Deployment, topology, found: RulesReport) -> None:
    address = dep.network.host_address
    if exposure.is_loopback(address):
        return
    text = exposure.unkeyed(dep, topology, f"listens on {address}:{dep.network.front_port}")
    if text:
        path = ("network", "host_address")
        found.warning(f"{dep.source.where(path)}: {format_path(path)}: {text}")


def _check_command_lines(rendered, layout: Layout, error: Error) -> None:
    roles = list(layout.roles)
    prefill_bootstrap = None
    reported = set()
    for role in roles:
        args = rendered.server_args(role.name)
        if args is None:
            continue
        problem = argspec.check_arguments(argspec.SERVER_SPEC, args)
        if problem and role.key_path not in reported:
            reported.add(role.key_path)
            error(role.key_path + ("extra_args",),
                  f"the {role.name} command line is rejected by SGLang's parser: {problem}")
        if role.service.role == PREFILL:
            prefill_bootstrap = option_value(args, "--disaggregation-bootstrap-port")
    if rendered.topology.disaggregated and not reported:
        _check_speculative_pd(rendered, roles, error)
    router_args = rendered.router_args()
    router = layout.router
    if router_args is not None:
        problem = argspec.check_arguments(argspec.ROUTER_SPEC, router_args)
        if problem:
            error(router.key_path + ("extra_args",),
                  f"the router command line is rejected by the router's parser: {problem}")
    if router_args is not None and prefill_bootstrap is not None:
        router_bootstrap = _router_prefill_bootstrap(router_args)
        if router_bootstrap != prefill_bootstrap:
            error(layout.section.key_path + ("bootstrap_port",),
                  f"the router pairs prefill with bootstrap port {router_bootstrap} but prefill listens on "
                  f"{prefill_bootstrap}; requests would fail with 'connection refused'")


def speculative_settings(args: list[str]) -> dict:
    """Every speculative-decoding setting a server command line gives (the parser's speculative_*
    fields, defaults included), so two command lines compare setting by setting."""
    dests = [o["dest"] for o in argspec.load_spec(argspec.SERVER_SPEC)["options"]
             if o["dest"].startswith("speculative_") or o["dest"] == "enable_multi_layer_eagle"]
    return argspec.option_values(argspec.SERVER_SPEC, args, dests)


def _check_speculative_pd(rendered, roles: list[Role], error: Error) -> None:
    """PD with speculative decoding needs the same settings on prefill and decode (sglang #30461):
    prefill hands decode the draft state of each request's first tokens."""
    by_role = {role.service.role: role for role in roles}
    prefill, decode = by_role.get("prefill"), by_role.get("decode")
    if prefill is None or decode is None:
        return
    try:
        ours = speculative_settings(rendered.server_args(prefill.name))
        theirs = speculative_settings(rendered.server_args(decode.name))
    except argspec.ArgumentsRejected:
        return  # the parser check reports it
    def shown(value):
        return "unset" if value is None else repr(value)
    differ = [f"{k.removeprefix('speculative_')}: prefill {shown(ours[k])}, decode {shown(theirs.get(k))}"
              for k in ours if ours[k] != theirs.get(k)]
    if not differ:
        return
    blamed = decode if any(str(t).startswith("--speculative") or str(t).startswith("--enable-multi-layer-eagle")
                           for t in decode.extra_args) or not any(
        str(t).startswith("--speculative") for t in prefill.extra_args) else prefill
    error(blamed.key_path + ("extra_args",),
          f"prefill and decode must carry identical speculative settings in pd ({guards.cite(guards.PD_SPECULATIVE)}): "
          f"{'; '.join(differ)}; set them once with levers.speculative (none | mtp | mtp-light), or give "
          f"pd.prefill.extra_args and pd.decode.extra_args the same speculative flags")


def _router_prefill_bootstrap(args: list[str]) -> str | None:
    for i, token in enumerate(args):
        if token == "--prefill" and i + 2 < len(args) and not args[i + 2].startswith("--"):
            return args[i + 2]
    return None
