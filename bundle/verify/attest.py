"""Attestation: what each SGLang server really runs, read back after launch, against what the
config asked for.

The original deployment answered "Paris" while running at a tenth of the expected speed, because
nobody read back which paths were live. Here every worker's /server_info (SGLang's resolved server
arguments) and the sparse-MLA environment of its server process are read, a few fields recorded
(never the raw info: it holds the API key), and judged:
  FAIL  the server runs something other than the config asked for (a pin, a lever, a TP size);
  WARN  a path known to be slow on sm_120 (eager mode, Triton fallbacks) is live;
  OK    as asked;
  N/A   the check does not apply to what runs (the shared SKIP: said, never passed).

Where each value comes from: tp4 through the front door with the key; pd workers (no published
port) with `docker compose exec <service> curl http://127.0.0.1:<port>/server_info`. SGLang does
not echo its environment, so SGLANG_SM120_FLASHMLA_BACKEND and friends are read from the server
process's /proc/1/environ inside the container (bundle-entrypoint execs the server as PID 1).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bundle import modes
from bundle import topology as registry
from bundle.config import levers
from bundle.errors import InputError, NotFound
from bundle.findings import Finding, Level, failed
from bundle.topology import DECODE, PREFILL
from bundle.stack import docker
from bundle.stack.workers import ComposeWorkers, HttpWorkers, Workers
from bundle.rules import checkpoint
from bundle.rules.cmdline import option_value

# A check that does not apply to what runs (the CPU engine's small Llama) is the shared SKIP:
# said, never passed. Attestation's table and JSON have always called it N/A.
SHOWN = {Level.SKIP: "N/A"}

# Environment variables the servers' behaviour depends on and SGLang does not report.
ENV_NAMES = ["SGLANG_SM120_FLASHMLA_BACKEND", "BUNDLE_SPARSE_MLA_OVERLAY", "NCCL_P2P_DISABLE",
             "SGLANG_FP8_PAGED_MQA_LOGITS_TORCH"]
# Backends that are CUDA-core fallbacks on sm_120 (the original deployment's 38% + 39% of GPU time).
SLOW_ATTENTION = {"triton", "torch_native", "flex_attention"}
SLOW_MOE = {"triton", "triton_kernel", "lora_triton"}
SLOW_SPARSE_MLA = {"triton": "SGLang's Triton sparse-MLA decode (CUDA cores, ~0.2-12 ms per layer call)",
                   "torch": "the torch sparse-MLA path"}
# SGLang's algorithm names for DeepSeek's MTP head (levers.MTP_ARGS asks for EAGLE; NEXTN is the
# alias SGLang resolves to EAGLE).
MTP_ALGORITHMS = {"NEXTN", "EAGLE"}
# Values a server reports when it did not resolve a field (SGLang answers with resolved_dict(), so a
# real 0.5.23 server never should): attestation then says it could not read SGLang's choice.
UNRESOLVED = {None, "auto"}
KV_ALIASES = {"bf16": "bfloat16"}
# The fields recorded per worker (server_info key -> report name). Nothing else is kept.
RECORDED = {
    "version": "sglang_version", "tp_size": "tp_size", "kv_cache_dtype": "kv_cache_dtype",
    "attention_backend": "attention_backend", "decode_attention_backend": "decode_attention_backend",
    "prefill_attention_backend": "prefill_attention_backend", "moe_runner_backend": "moe_runner_backend",
    "disaggregation_mode": "disaggregation_mode",
    "disaggregation_transfer_backend": "transfer_backend", "speculative_algorithm": "speculative_algorithm",
    "disable_custom_all_reduce": "disable_custom_all_reduce",
    "speculative_num_steps": "speculative_num_steps", "speculative_eagle_topk": "speculative_eagle_topk",
    "speculative_num_draft_tokens": "speculative_num_draft_tokens", "page_size": "page_size",
    "device": "device",
    "speculative_dspark_block_size": "speculative_dspark_block_size",
    # the rank layout the cost model scores (expert parallelism, DP attention)
    "ep_size": "ep_size", "enable_dp_attention": "enable_dp_attention",
}
DSPARK = "DSPARK"
# The checks of DeepSeek-V4 on sm_120 GPUs: on a CPU server (the CPU engine: a small Llama on
# SGLang's CPU device) they do not apply, and attestation says so instead of passing them.
GPU_MODEL_CHECKS = ("CUDA graphs", "KV-cache dtype", "MoE runner", "sm_120 sparse-MLA backend",
                    "speculative decoding", "PCIe-safe collectives")
INFO_PATHS = ("/server_info", "/get_server_info")  # the second is 0.5.23's deprecated alias


@dataclass(frozen=True)
class ServerFinding(Finding):
    """The shared finding (bundle/findings.py) about one server: `what` names the setting judged,
    `detail` the verdict on it."""

    role: str = ""


def level_word(level: Level) -> str:
    return SHOWN.get(level, level.value)


def finding_dict(finding: ServerFinding) -> dict:
    """A finding as attestation.json has always written it."""
    return {"level": level_word(finding.level), "role": finding.role, "what": finding.what, "detail": finding.detail}


@dataclass
class WorkerRecord:
    role: str
    source: str  # how the info was read
    fields: dict = field(default_factory=dict)  # the RECORDED subset, plus cuda_graphs
    env: dict | None = None  # ENV_NAMES -> value (None: unset); None: could not be read
    env_source: str | None = None
    simulated: bool = False  # the worker simulator (no GPU), not SGLang
    error: str | None = None  # why nothing could be read


@dataclass
class Expected:
    """What the config asks one server to run (levers, then the role's own extra_args)."""

    role: str
    tp_size: int
    kv_cache_dtype: str
    moe_runner: str
    sparse_mla_env: str  # SGLANG_SM120_FLASHMLA_BACKEND
    overlay: bool  # the bundle's sparse-MLA kernel overlay
    cuda_graphs: bool
    speculative: str  # "none", a levers preset ("mtp", "mtp-light"), or "custom" (from extra_args)
    pcie_safe: bool
    sglang_version: str | None
    # (steps, top-k, draft tokens) of the preset; None: not checked
    speculative_shape: tuple[int, int, int] | None = None
    collectives_why: str = ""  # how the PCIe-safe decision was made (levers.Collectives)
    disaggregation_mode: str = "null"
    transfer_backend: str | None = None
    # dspark: the block size (gamma) SGLang should resolve: levers.dspark.block_size, else the draft's
    # own (the checkpoint's config.json), else SGLang's default 7; None: the checkpoint was not readable
    dspark_block_size: int | None = None


@dataclass
class Attestation:
    topology: str
    records: list[WorkerRecord]
    findings: list[ServerFinding]

    @property
    def ok(self) -> bool:
        return not failed(self.findings)

    @property
    def warnings(self) -> list[ServerFinding]:
        return [f for f in self.findings if f.level is Level.WARN]

    def to_dict(self) -> dict:
        return {"kind": "attestation", "topology": self.topology, "ok": self.ok,
                "records": [asdict(r) for r in self.records],
                "findings": [finding_dict(f) for f in self.findings]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


# ---- what the config asks for ----------------------------------------------------------------
def expectations(dep, topology, collectives: levers.Collectives | None = None,
                 model_folder: str | None = None) -> dict[str, Expected]:
    """Per server (by service name): what the config asks it to run (`topology`: a name or entry;
    `collectives`: the PCIe-safe decision the launch rendered, else the unprobed one; `model_folder`:
    the checkpoint the servers mount, for the DSpark block size its draft gives)."""
    entry = registry.get(topology) if isinstance(topology, str) else topology
    lv = dep.levers
    collectives = collectives or levers.unprobed_collectives(lv)
    env = levers.environment(lv, collectives)
    try:
        from bundle.lock import load_lock

        version = load_lock().pins.get("sglang")
    except (InputError, NotFound):  # a broken or missing lock is `bundle validate`'s to report, not attestation's
        version = None
    out = {}
    for role in dep.roles(entry):
        extra = role.extra_args
        graphs_off = (option_value(extra, "--cuda-graph-backend-decode") == "disabled"
                      or "--disable-cuda-graph" in extra)
        exp = Expected(
            role=role.name, tp_size=role.tp_size,
            kv_cache_dtype=option_value(extra, "--kv-cache-dtype") or lv.kv_cache_dtype,
            moe_runner=option_value(extra, "--moe-runner-backend") or lv.moe_runner,
            sparse_mla_env=role.env.get("SGLANG_SM120_FLASHMLA_BACKEND", env["SM120_SPARSE_MLA_BACKEND"]),
            overlay=env["BUNDLE_SPARSE_MLA_OVERLAY"] == "1",
            cuda_graphs=lv.cuda_graphs and not graphs_off,
            speculative="custom" if option_value(extra, "--speculative-algorithm") else lv.speculative,
            pcie_safe=collectives.pcie_safe, sglang_version=version,
            speculative_shape=_preset_shape(lv.speculative),
            collectives_why=f"{collectives.source}: {collectives.reason}",
            dspark_block_size=_dspark_block_size(lv, model_folder or dep.model_path))
        if role.service.role in (PREFILL, DECODE):
            exp.disaggregation_mode = role.service.role
            exp.transfer_backend = dep.section(entry).transfer_backend
        out[role.name] = exp
    return out


def _dspark_block_size(lv, model_folder: str) -> int | None:
    if lv.speculative != "dspark":
        return None
    if lv.dspark.block_size is not None:
        return lv.dspark.block_size
    held = checkpoint.identify(Path(model_folder).expanduser())
    if held is None or not held.has_draft:
        return None
    return held.block_size or checkpoint.DSPARK_DEFAULT_BLOCK_SIZE


def _preset_shape(preset: str) -> tuple[int, int, int] | None:
    args = levers.SPECULATIVE_ARGS.get(preset) or []
    if "--speculative-num-steps" not in args:  # none, or dspark: SGLang resolves its shape (dspark_block_size)
        return None
    return tuple(int(option_value(args, flag)) for flag in (
        "--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens"))


# ---- reading ---------------------------------------------------------------------------------------
def cuda_graph_backends(info: dict) -> dict[str, dict]:
    """Per phase: {"backend": full|breakable|disabled|default, "from": which field said so}.

    A server that has resolved its arguments reports cuda_graph_config with a backend per phase;
    before resolution (or in the simulator) only the flags are there, resolved here with SGLang's
    precedence (arg_groups/cuda_graph_hook.py): explicit config > per-phase backend flag >
    per-phase disable flag > the deprecated global --disable-cuda-graph > default.
    """
    cfg = info.get("cuda_graph_config")
    out = {}
    for phase in ("decode", "prefill"):
        section = cfg.get(phase) if isinstance(cfg, dict) else None
        if isinstance(section, dict) and section.get("backend"):
            out[phase] = {"backend": section["backend"], "from": f"cuda_graph_config.{phase}.backend"}
        elif info.get(f"cuda_graph_backend_{phase}"):
            out[phase] = {"backend": info[f"cuda_graph_backend_{phase}"], "from": f"cuda_graph_backend_{phase}"}
        elif info.get(f"disable_{phase}_cuda_graph"):
            out[phase] = {"backend": "disabled", "from": f"disable_{phase}_cuda_graph"}
        elif info.get("disable_cuda_graph"):
            out[phase] = {"backend": "disabled", "from": "disable_cuda_graph"}
        else:
            # SGLang's defaults: decode full; prefill breakable on CUDA (cuda_graph_config.py).
            out[phase] = {"backend": "default", "from": "no override"}
    return out


def read_worker(role: str, info_from: Workers, env_from: Workers | None) -> WorkerRecord:
    """One worker's record: the RECORDED fields of its server info and its sparse-MLA environment."""
    record = WorkerRecord(role=role, source=info_from.describe(role))
    reply = None
    for path in INFO_PATHS:
        reply = info_from.get(role, path)
        if reply.status != 404:
            record.source += f" {path}"
            break
    try:
        info = json.loads(reply.text) if reply.status == 200 else None
    except ValueError:
        info = None
    if not isinstance(info, dict):
        # The body may be an error page that echoes a header: only the status is kept.
        record.error = f"server info unreadable (HTTP {reply.status})" if reply.status else \
            f"server info unreadable: {reply.text[:200]}"
        return record
    record.fields = {name: info.get(key) for key, name in RECORDED.items()}
    record.fields["cuda_graphs"] = cuda_graph_backends(info)
    record.simulated = "worker_simulator" in info
    if env_from is not None:
        environ = env_from.environ(role, ENV_NAMES)
        if environ is not None:
            record.env, record.env_source = environ.values, environ.source
    return record


# ---- judging ---------------------------------------------------------------------------------------
def evaluate(record: WorkerRecord, exp: Expected) -> list[ServerFinding]:
    """The findings for one worker; pure, so every rule is tested on saved server-info samples."""
    role = record.role
    out: list[ServerFinding] = []

    def add(level, what, detail):
        out.append(ServerFinding(level, what, detail, role=role))

    if record.error:
        add(Level.FAIL, "server info", f"{record.error} from {record.source}: nothing could be attested")
        return out
    f = record.fields
    if record.simulated:
        add(Level.OK, "worker", f"worker simulator ({modes.word()}): values echo its command line, no kernel ran")
    if f.get("device") == "cpu":
        return _cpu_engine(record, exp, add)

    if exp.sglang_version and f.get("sglang_version") and f["sglang_version"] != exp.sglang_version:
        add(Level.FAIL, "SGLang version", f"runs {f['sglang_version']}, the lock pins {exp.sglang_version}")
    elif f.get("sglang_version"):
        add(Level.OK, "SGLang version", str(f["sglang_version"]))

    decode = f["cuda_graphs"]["decode"]
    prefill = f["cuda_graphs"]["prefill"]
    graphs = f"decode {decode['backend']} ({decode['from']}), prefill {prefill['backend']} ({prefill['from']})"
    decode_on = decode["backend"] != "disabled"
    if exp.cuda_graphs and not decode_on:
        add(Level.FAIL, "CUDA graphs", f"decode runs eager but the config asks for CUDA graphs: {graphs}")
    elif not exp.cuda_graphs and decode_on:
        add(Level.FAIL, "CUDA graphs", f"the config asks for eager mode (levers.cuda_graphs: false) but {graphs}")
    elif not decode_on:
        add(Level.WARN, "CUDA graphs", f"eager decode, as configured: known ~10x slower ({graphs})")
    else:
        add(Level.OK, "CUDA graphs", graphs)

    if f.get("tp_size") != exp.tp_size:
        add(Level.FAIL, "TP size", f"runs tp_size {f.get('tp_size')}, the config asks for {exp.tp_size}")
    else:
        add(Level.OK, "TP size", str(exp.tp_size))

    kv = f.get("kv_cache_dtype")
    if exp.kv_cache_dtype == "auto":
        if kv in UNRESOLVED:
            add(Level.WARN, "KV-cache dtype", f"the server reported {kv!r}: what SGLang resolved auto to could "
                                        f"not be read (0.5.23 resolves it to fp8_e4m3 for DeepSeek-V4)")
        else:
            add(Level.OK, "KV-cache dtype", f"auto -> {kv} (SGLang's choice)")
    elif KV_ALIASES.get(kv, kv) != KV_ALIASES.get(exp.kv_cache_dtype, exp.kv_cache_dtype):
        add(Level.FAIL, "KV-cache dtype", f"runs {kv}, the config asks for {exp.kv_cache_dtype}")
    else:
        add(Level.OK, "KV-cache dtype", str(kv))

    moe = f.get("moe_runner_backend")
    if exp.moe_runner != "auto" and moe != exp.moe_runner:
        add(Level.FAIL, "MoE runner", f"runs {moe}, the config asks for {exp.moe_runner}")
    elif exp.moe_runner == "auto" and moe in UNRESOLVED:
        add(Level.WARN, "MoE runner", f"the server reported {moe!r}: what SGLang resolved auto to could not be "
                                f"read (0.5.23 picks flashinfer_mxfp4 for DeepSeek-V4's FP4 experts on sm_120)")
    elif moe in SLOW_MOE:
        add(Level.WARN, "MoE runner", f"{moe}: a Triton fallback on sm_120 (SGLang's auto picks flashinfer_mxfp4)")
    elif exp.moe_runner == "auto":
        add(Level.OK, "MoE runner", f"auto -> {moe} (SGLang's choice)")
    else:
        add(Level.OK, "MoE runner", str(moe))

    attention = {k: f.get(k) for k in ("attention_backend", "decode_attention_backend",
                                       "prefill_attention_backend") if f.get(k)}
    slow = {k: v for k, v in attention.items() if v in SLOW_ATTENTION}
    text = ", ".join(f"{k}={v}" for k, v in attention.items()) or "chosen by SGLang for the model (not overridden)"
    add(Level.WARN if slow else Level.OK, "attention backend", text + (": a fallback path" if slow else ""))

    _sparse_mla(record, exp, add)

    if exp.transfer_backend is not None:
        if f.get("disaggregation_mode") != exp.disaggregation_mode:
            add(Level.FAIL, "PD role", f"runs disaggregation_mode {f.get('disaggregation_mode')}, "
                                 f"expected {exp.disaggregation_mode}")
        if f.get("transfer_backend") != exp.transfer_backend:
            add(Level.FAIL, "transfer backend", f"runs {f.get('transfer_backend')}, the config asks for "
                                          f"{exp.transfer_backend}")
        else:
            add(Level.OK, "transfer backend", str(exp.transfer_backend))

    _speculative(f, exp, add)
    _collectives(record, exp, add)
    return out


def _cpu_engine(record: WorkerRecord, exp: Expected, add) -> list[ServerFinding]:
    """SGLang on CPU (the CPU engine, no GPU): what the real server resolved for what applies (version,
    TP size, PD role and transfer backend, the attention backend it chose), N/A for DeepSeek-V4's GPU checks."""
    f, out = record.fields, []

    def keep(level, what, detail):
        out.append(ServerFinding(level, what, detail, role=record.role))

    if exp.sglang_version and f.get("sglang_version") != exp.sglang_version:
        keep(Level.FAIL, "SGLang version", f"runs {f.get('sglang_version')}, the lock pins {exp.sglang_version}")
    else:
        keep(Level.OK, "SGLang version", f"{f.get('sglang_version')} (the real server, on CPU)")
    if f.get("tp_size") != exp.tp_size:
        keep(Level.FAIL, "TP size", f"runs tp_size {f.get('tp_size')}, the launch rendered {exp.tp_size}")
    else:
        keep(Level.OK, "TP size", f"{exp.tp_size} (CPU engine {modes.word()})")
    keep(Level.OK, "attention backend", f"{f.get('attention_backend')} (SGLang's CPU path)")
    if exp.transfer_backend is not None:
        mode, backend = f.get("disaggregation_mode"), f.get("transfer_backend")
        good = mode == exp.disaggregation_mode and backend == exp.transfer_backend
        keep(Level.OK if good else Level.FAIL, "PD role", f"{mode} over {backend}"
             + ("" if good else f"; expected {exp.disaggregation_mode} over {exp.transfer_backend}"))
    for what in GPU_MODEL_CHECKS:
        keep(Level.SKIP, what, f"does not apply: the CPU engine {modes.word()} serves a small Llama on SGLang's "
                                   "CPU device, not DeepSeek-V4 on sm_120")
    return out


def _speculative(f: dict, exp: Expected, add) -> None:
    spec = f.get("speculative_algorithm")
    shape = tuple(f.get(k) for k in ("speculative_num_steps", "speculative_eagle_topk",
                                     "speculative_num_draft_tokens"))
    shown = f"{spec} (steps {shape[0]}, top-k {shape[1]}, draft tokens {shape[2]})" if spec else "none"
    if exp.speculative == "dspark":
        _dspark(f, exp, add, spec, shape)
        return
    if exp.speculative == "none":
        if spec:
            add(Level.FAIL, "speculative decoding", f"the config asks for none; the server runs {shown}")
        else:
            add(Level.OK, "speculative decoding", "none")
        return
    if str(spec).upper() not in MTP_ALGORITHMS and exp.speculative != "custom":
        add(Level.FAIL, "speculative decoding", f"the config asks for {exp.speculative}; the server runs {shown}")
    elif not spec:
        add(Level.FAIL, "speculative decoding", "extra_args ask for speculative decoding; the server runs none")
    elif exp.speculative_shape and None not in shape and shape != exp.speculative_shape:
        add(Level.FAIL, "speculative decoding", f"the config asks for {exp.speculative} (steps, top-k, draft tokens "
                                          f"{exp.speculative_shape}); the server runs {shown}")
    else:
        add(Level.OK, "speculative decoding", f"{exp.speculative}: {shown}")


def _dspark(f: dict, exp: Expected, add, spec, shape: tuple) -> None:
    """DSpark: the algorithm and the block size (gamma) the server resolved; SGLang reports the block
    size as asked (None when left to it) and always the verify window, gamma + 1 draft tokens."""
    if str(spec).upper() != DSPARK:
        add(Level.FAIL, "speculative decoding", f"the config asks for dspark; the server runs {spec or 'none'}")
        return
    draft_tokens = shape[2]
    block = f.get("speculative_dspark_block_size")
    if block is None and isinstance(draft_tokens, int):
        block = draft_tokens - 1
    shown = f"DSPARK, block size {block} (verify window {draft_tokens}, steps {shape[0]}, top-k {shape[1]})"
    if block is None:
        add(Level.WARN, "speculative decoding", f"DSPARK, but the block size it resolved could not be read "
                                          f"(speculative_num_draft_tokens {draft_tokens!r})")
    elif exp.dspark_block_size is not None and block != exp.dspark_block_size:
        add(Level.FAIL, "speculative decoding", f"the config and checkpoint ask for DSpark block size "
                                          f"{exp.dspark_block_size}; the server runs {shown}")
    else:
        add(Level.OK, "speculative decoding", f"dspark: {shown}")


def _collectives(record: WorkerRecord, exp: Expected, add) -> None:
    f = record.fields
    p2p = (record.env or {}).get("NCCL_P2P_DISABLE")
    why = f" (decided by {exp.collectives_why})" if exp.collectives_why else ""
    if exp.pcie_safe:
        if not f.get("disable_custom_all_reduce"):
            add(Level.FAIL, "PCIe-safe collectives", "custom all-reduce is on; the PCIe-safe decision asks for "
                                               f"--disable-custom-all-reduce (hangs on some PCIe-only hosts){why}")
        elif record.env is not None and p2p != "1":
            add(Level.FAIL, "PCIe-safe collectives", f"NCCL_P2P_DISABLE={p2p} in the server process, expected 1{why}")
        else:
            add(Level.OK, "PCIe-safe collectives", "custom all-reduce off" +
                (", NCCL_P2P_DISABLE=1" if record.env is not None else "") + why)
        return
    if f.get("disable_custom_all_reduce"):
        add(Level.FAIL, "PCIe-safe collectives", f"custom all-reduce is off, but P2P collectives were chosen{why}")
    elif record.env is not None and p2p == "1":
        add(Level.FAIL, "PCIe-safe collectives", f"NCCL_P2P_DISABLE=1 in the server process, but P2P collectives "
                                           f"were chosen{why}")
    else:
        add(Level.OK, "PCIe-safe collectives", "P2P and custom all-reduce on" + why)


def _sparse_mla(record: WorkerRecord, exp: Expected, add) -> None:
    if record.env is None:
        add(Level.WARN, "sm_120 sparse-MLA backend",
            f"SGLANG_SM120_FLASHMLA_BACKEND could not be read (SGLang does not report it); "
            f"expected {exp.sparse_mla_env}")
        return
    value = record.env.get("SGLANG_SM120_FLASHMLA_BACKEND")
    shown = value if value is not None else "unset (SGLang's default: flashinfer)"
    effective = value or "flashinfer"
    overlay = record.env.get("BUNDLE_SPARSE_MLA_OVERLAY") == "1"
    where = f"from {record.env_source}"
    if effective != exp.sparse_mla_env:
        add(Level.FAIL, "sm_120 sparse-MLA backend", f"{shown}, the config asks for {exp.sparse_mla_env} ({where})")
    elif exp.overlay and not overlay:
        add(Level.FAIL, "sm_120 sparse-MLA backend", f"the config asks for the bundle's kernel overlay but "
                                               f"BUNDLE_SPARSE_MLA_OVERLAY is not 1 ({where})")
    elif overlay:
        add(Level.OK, "sm_120 sparse-MLA backend", f"{shown} patched by the bundle's kernel overlay ({where})")
    elif effective in SLOW_SPARSE_MLA:
        add(Level.WARN, "sm_120 sparse-MLA backend", f"{shown}: {SLOW_SPARSE_MLA[effective]} ({where})")
    else:
        add(Level.OK, "sm_120 sparse-MLA backend", f"{shown} ({where})")
    if record.env.get("SGLANG_FP8_PAGED_MQA_LOGITS_TORCH") not in (None, "", "0", "false", "False"):
        add(Level.WARN, "paged MQA logits", f"SGLANG_FP8_PAGED_MQA_LOGITS_TORCH forces the torch path ({where})")


# ---- the entry point launch calls ------------------------------------------------------------------
def attest(dep, rendered, *, stack=None) -> Attestation:
    """Read every server of the running topology and judge it against the config."""
    from bundle.stack.frontdoor import front_door

    topology = rendered.topology
    stack = stack or docker.stack_of(rendered)
    servers = {role.name: role.name for role in dep.roles(topology)}
    env_from = ComposeWorkers(stack, servers, port=dep.network.worker_port)
    if topology.has_router:
        info_from: Workers = env_from  # servers behind the router publish no port
    else:
        front = front_door(dep, topology)  # the lone server is the front door (and holds the key)
        info_from = HttpWorkers({name: front.url for name in servers}, front.headers)
    expected = expectations(dep, topology, rendered.collectives, rendered.env.get("MODEL_HOST_PATH"))
    for role in dep.roles(topology):
        # The TP size the launch rendered (the CPU engine lowers it), not only the config's.
        rendered_tp = rendered.env.get(f"{role.service.env_prefix}_TP_SIZE", "")
        if role.name in expected and rendered_tp.isdigit():
            expected[role.name].tp_size = int(rendered_tp)
    result = judge(topology.name, info_from, env_from, expected)
    from bundle.images.audit_record import latest_predicted

    found = latest_predicted(rendered.env.get("BUNDLE_LOCK_HASH", ""), dep.source.name)
    if found is not None:
        result.findings.extend(against_prediction(result.records, found[1], topology.name, found[0].name))
    return result


# What the image's audit predicted (SGLang's own resolution with the platform reported as sm_120)
# and what a server reports it runs: the same names in both.
PREDICTED = ("attention_backend", "page_size", "moe_runner_backend", "kv_cache_dtype", "speculative_algorithm")


def against_prediction(records: list[WorkerRecord], predicted: dict, topology: str, source: str) -> list[ServerFinding]:
    """A finding per server the audit predicted: OK when it runs what was predicted, WARN naming each
    choice that differs (the audit ran SGLang's own choices without a GPU; the server made them on one).
    Simulated workers are not held to an audit of the real image."""
    out = []
    for record in records:
        wanted = predicted.get(f"{topology}/{record.role}")
        if wanted is None or record.simulated or record.error:
            continue
        differs = [f"{key} {record.fields.get(key)!r}, predicted {wanted.get(key)!r}" for key in PREDICTED
                   if key in wanted and key in record.fields and record.fields.get(key) != wanted.get(key)]
        if differs:
            out.append(ServerFinding(Level.WARN, "predicted choices", f"the server chose differently from the image's "
                                     f"audit ({source}): " + "; ".join(differs), role=record.role))
        else:
            out.append(ServerFinding(Level.OK, "predicted choices", f"as the image's audit predicted ({source})",
                                     role=record.role))
    return out


def judge(topology: str, info_from: Workers, env_from: Workers | None,
          expected: dict[str, Expected]) -> Attestation:
    records, findings = [], []
    for role, exp in expected.items():
        record = read_worker(role, info_from, env_from)
        records.append(record)
        findings.extend(evaluate(record, exp))
    return Attestation(topology=topology, records=records, findings=findings)


def print_findings(result: Attestation, console) -> None:
    from rich.table import Table

    colour = {Level.OK: "green", Level.WARN: "yellow", Level.FAIL: "red", Level.SKIP: "dim"}
    table = Table(title=f"attestation ({result.topology}): what the servers run", title_justify="left")
    for column in ("server", "what", "", "detail"):
        table.add_column(column, overflow="fold")
    for f in result.findings:
        table.add_row(f.role, f.what, f"[{colour[f.level]}]{level_word(f.level)}[/]", f.detail.replace("[", "\\["))
    console.print(table)
