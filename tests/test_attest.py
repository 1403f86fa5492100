"""Attestation rules on /server_info samples built from the pinned SGLang's own ServerArgs
(tests/data/server_info/make_samples.py): what the servers run against what the config asked for."""

from __future__ import annotations

import json
from pathlib import Path


from bundle.verify import attest
from bundle.config.loader import load_config
from bundle.stack.workers import Environ, Reply
from tests.conftest import require_module, write_config

DATA = Path(__file__).parent / "data" / "server_info"
SAMPLE_KEY = "sk-SAMPLE-KEY-must-never-be-printed"
GOOD_ENV = {"SGLANG_SM120_FLASHMLA_BACKEND": "flashinfer", "BUNDLE_SPARSE_MLA_OVERLAY": "0",
            "NCCL_P2P_DISABLE": "1", "SGLANG_FP8_PAGED_MQA_LOGITS_TORCH": None}


def sample(name: str) -> dict:
    return json.loads((DATA / name).read_text())


class SavedWorkers:
    """Workers whose /server_info and environment are saved samples (what a GPU host returned)."""

    def __init__(self, infos: dict[str, dict | None], env: dict[str, dict] | None = None, status: int = 200):
        self.infos, self.env, self.status = infos, env, status
        self.roles = list(infos)

    def get(self, role, path, *, timeout=30):
        if self.status != 200:
            return Reply(self.status, f'{{"error": "Unauthorized", "echo": "{SAMPLE_KEY}"}}')
        return Reply(200, json.dumps(self.infos[role]))

    def environ(self, role, names):
        if self.env is None:
            return None
        return Environ(f"/proc/1/environ of {role}", {n: self.env[role].get(n) for n in names})

    def log(self, role):
        return ""

    def describe(self, role):
        return f"saved sample ({role})"


def deployment(tmp_path, levers: str = ""):
    text = "levers:\n" + levers if levers else "project: attest-test\n"
    return load_config(write_config(tmp_path, text))


def judge(dep, topology, infos, env="good", status=200):
    if env == "good":
        env = {role: dict(GOOD_ENV) for role in infos}
    workers = SavedWorkers(infos, env, status)
    return attest.judge(topology, workers, workers, attest.expectations(dep, topology))


def levels(result, what):
    return [f.level for f in result.findings if f.what == what]


def resolved(info: dict) -> dict:
    """A sample as a running 0.5.23 server reports it: /server_info is ServerArgs.resolved_dict(),
    after the DeepSeek-V4 overrides (the samples hold the parser's unresolved values)."""
    return {**info, "kv_cache_dtype": "fp8_e4m3", "moe_runner_backend": "flashinfer_mxfp4",
            "attention_backend": "dsv4", "page_size": 256}


def test_tp4_as_configured_is_all_ok_and_the_key_is_never_recorded(tmp_path):
    result = judge(deployment(tmp_path), "tp4", {"server": resolved(sample("tp4.json"))})
    assert result.ok, result.to_json()
    assert not result.warnings
    rec = result.records[0].fields
    assert rec["cuda_graphs"]["decode"] == {"backend": "full", "from": "cuda_graph_config.decode.backend"}
    assert rec["moe_runner_backend"] == "flashinfer_mxfp4" and rec["tp_size"] == 4
    details = {f.what: f.detail for f in result.findings}
    assert details["MoE runner"] == "auto -> flashinfer_mxfp4 (SGLang's choice)"
    assert details["KV-cache dtype"] == "auto -> fp8_e4m3 (SGLang's choice)"
    assert SAMPLE_KEY not in result.to_json()


def test_pd_workers_report_their_role_and_nixl(tmp_path):
    infos = {"prefill": sample("pd-prefill.json"), "decode": sample("pd-decode.json")}
    result = judge(deployment(tmp_path), "pd", infos)
    assert result.ok, result.to_json()
    assert levels(result, "transfer backend") == ["OK", "OK"]
    # SGLang's default transfer backend is mooncake: a server that lost the flag is caught.
    infos["decode"]["disaggregation_transfer_backend"] = "mooncake"
    result = judge(deployment(tmp_path), "pd", infos)
    assert not result.ok
    assert any(f.role == "decode" and f.level == "FAIL" and "mooncake" in f.detail for f in result.findings)


def test_eager_decode_fails_when_the_config_asks_for_cuda_graphs(tmp_path):
    info = sample("tp4.json")
    info["cuda_graph_config"]["decode"]["backend"] = "disabled"
    result = judge(deployment(tmp_path), "tp4", {"server": info})
    assert not result.ok
    assert levels(result, "CUDA graphs") == ["FAIL"]


def test_deprecated_global_flag_before_resolution_reads_as_eager(tmp_path):
    info = sample("tp4.json")
    info["cuda_graph_config"] = None  # a server that did not resolve (or an older one)
    info["disable_cuda_graph"] = True
    result = judge(deployment(tmp_path), "tp4", {"server": info})
    graphs = result.records[0].fields["cuda_graphs"]["decode"]
    assert graphs == {"backend": "disabled", "from": "disable_cuda_graph"}
    assert levels(result, "CUDA graphs") == ["FAIL"]


def test_eager_mode_asked_for_is_a_warning_not_a_failure(tmp_path):
    info = sample("tp4.json")
    info["cuda_graph_config"]["decode"]["backend"] = "disabled"
    result = judge(deployment(tmp_path, "  cuda_graphs: false\n"), "tp4", {"server": info})
    assert result.ok
    assert levels(result, "CUDA graphs") == ["WARN"]
    # ...and graphs on when eager was asked for is a failure.
    result = judge(deployment(tmp_path, "  cuda_graphs: false\n"), "tp4", {"server": sample("tp4.json")})
    assert levels(result, "CUDA graphs") == ["FAIL"]


def test_moe_runner_other_than_configured_fails_and_triton_warns(tmp_path):
    info = sample("tp4.json")
    info["moe_runner_backend"] = "triton"
    assert levels(judge(deployment(tmp_path, "  moe_runner: marlin\n"), "tp4", {"server": info}),
                  "MoE runner") == ["FAIL"]
    result = judge(deployment(tmp_path, "  moe_runner: triton\n"), "tp4", {"server": info})
    assert result.ok and levels(result, "MoE runner") == ["WARN"]
    # auto that SGLang resolved to a Triton fallback is shown as a warning, not hidden as "auto".
    result = judge(deployment(tmp_path), "tp4", {"server": info})
    assert result.ok and levels(result, "MoE runner") == ["WARN"]


def test_auto_the_server_did_not_resolve_says_what_could_not_be_read(tmp_path):
    result = judge(deployment(tmp_path), "tp4", {"server": sample("tp4.json") | {"moe_runner_backend": "auto"}})
    finding = {f.what: f for f in result.findings}
    assert finding["MoE runner"].level == "WARN" and "could not be read" in finding["MoE runner"].detail
    assert finding["KV-cache dtype"].level == "WARN" and "could not be read" in finding["KV-cache dtype"].detail


def test_sparse_mla_backend_is_read_from_the_server_process_environment(tmp_path):
    dep = deployment(tmp_path)
    env = {"server": dict(GOOD_ENV, SGLANG_SM120_FLASHMLA_BACKEND="triton")}
    result = judge(dep, "tp4", {"server": sample("tp4.json")}, env=env)
    assert levels(result, "sm_120 sparse-MLA backend") == ["FAIL"]  # flashinfer was asked for
    triton = deployment(tmp_path, "  sparse_mla: triton\n")
    result = judge(triton, "tp4", {"server": sample("tp4.json")}, env=env)
    assert result.ok and levels(result, "sm_120 sparse-MLA backend") == ["WARN"]  # known slow
    overlay = deployment(tmp_path, "  sparse_mla: bundle\n")
    env_overlay = {"server": dict(env["server"], BUNDLE_SPARSE_MLA_OVERLAY="1")}
    result = judge(overlay, "tp4", {"server": sample("tp4.json")}, env=env_overlay)
    assert levels(result, "sm_120 sparse-MLA backend") == ["OK"]
    result = judge(overlay, "tp4", {"server": sample("tp4.json")}, env=env)  # overlay switched off
    assert levels(result, "sm_120 sparse-MLA backend") == ["FAIL"]


def test_unreadable_environment_is_a_warning_that_says_so(tmp_path):
    result = judge(deployment(tmp_path), "tp4", {"server": sample("tp4.json")}, env=None)
    finding = next(f for f in result.findings if f.what == "sm_120 sparse-MLA backend")
    assert finding.level == "WARN" and "could not be read" in finding.detail


def test_forced_torch_paged_mqa_logits_warns(tmp_path):
    env = {"server": dict(GOOD_ENV, SGLANG_FP8_PAGED_MQA_LOGITS_TORCH="1")}
    result = judge(deployment(tmp_path), "tp4", {"server": sample("tp4.json")}, env=env)
    assert levels(result, "paged MQA logits") == ["WARN"]


def test_tp_size_kv_dtype_version_and_collectives_mismatches_fail(tmp_path):
    for field, value, what in (("tp_size", 2, "TP size"), ("kv_cache_dtype", "fp8_e4m3", "KV-cache dtype"),
                               ("version", "0.5.22", "SGLang version"),
                               ("disable_custom_all_reduce", False, "PCIe-safe collectives")):
        info = sample("tp4.json")
        info[field] = value
        dep = deployment(tmp_path, "  kv_cache_dtype: bf16\n")
        assert levels(judge(dep, "tp4", {"server": info}), what) == ["FAIL"], field


def test_a_host_decided_for_p2p_must_run_p2p_collectives(tmp_path):
    from bundle.config.levers import Collectives

    dep = deployment(tmp_path)
    p2p = Collectives(False, "probe", "all-reduce with P2P finished on every group")
    env = {"server": dict(GOOD_ENV, NCCL_P2P_DISABLE="0")}
    workers = SavedWorkers({"server": resolved(sample("tp4.json"))}, env)
    result = attest.judge("tp4", workers, workers, attest.expectations(dep, "tp4", p2p))
    finding = next(f for f in result.findings if f.what == "PCIe-safe collectives")
    assert finding.level == "FAIL" and "custom all-reduce is off, but P2P collectives were chosen" in finding.detail
    assert "decided by probe: all-reduce with P2P finished" in finding.detail
    info = resolved(sample("tp4.json")) | {"disable_custom_all_reduce": False}
    workers = SavedWorkers({"server": info}, env)
    result = attest.judge("tp4", workers, workers, attest.expectations(dep, "tp4", p2p))
    assert levels(result, "PCIe-safe collectives") == ["OK"]


def test_mtp_asked_for_but_not_running_fails(tmp_path):
    result = judge(deployment(tmp_path, "  speculative: mtp\n"), "tp4", {"server": sample("tp4.json")})
    assert levels(result, "speculative decoding") == ["FAIL"]
    info = sample("tp4.json")
    info["speculative_algorithm"] = "EAGLE"  # what SGLang resolves NEXTN to
    result = judge(deployment(tmp_path, "  speculative: mtp\n"), "tp4", {"server": info})
    assert levels(result, "speculative decoding") == ["OK"]
    info.update(speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4)
    assert levels(judge(deployment(tmp_path, "  speculative: mtp\n"), "tp4", {"server": info}),
                  "speculative decoding") == ["OK"]
    result = judge(deployment(tmp_path, "  speculative: mtp-light\n"), "tp4", {"server": info})
    finding = next(f for f in result.findings if f.what == "speculative decoding")
    assert finding.level == "FAIL" and "(1, 1, 2)" in finding.detail and "steps 3" in finding.detail


def test_unreadable_server_info_fails_without_keeping_the_body(tmp_path):
    result = judge(deployment(tmp_path), "tp4", {"server": sample("tp4.json")}, status=401)
    assert not result.ok
    assert "HTTP 401" in result.findings[0].detail
    assert SAMPLE_KEY not in result.to_json()


def test_the_fields_attestation_reads_exist_in_the_pinned_sglang():
    """Contract: a renamed ServerArgs field would silently read as None; fail here instead."""
    require_module("sglang.srt.server_args")
    from sglang.srt.server_args import ServerArgs, record_fields

    names = {f.name for f in record_fields(ServerArgs)}
    read = set(attest.RECORDED) - {"version"}  # version is added by http_server, not a field
    read |= {"cuda_graph_config", "cuda_graph_backend_decode", "cuda_graph_backend_prefill",
             "disable_cuda_graph", "disable_decode_cuda_graph", "disable_prefill_cuda_graph"}
    assert read <= names, sorted(read - names)
    saved = set(sample("tp4.json"))
    assert read <= saved, "regenerate tests/data/server_info with make_samples.py"


def test_samples_match_what_the_pinned_sglang_builds_now():
    require_module("sglang.srt.server_args")
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_samples", DATA / "make_samples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fresh = json.loads(json.dumps(module.sample(module.SAMPLES["tp4.json"]), default=str))
    assert set(fresh) == set(sample("tp4.json")), "regenerate tests/data/server_info with make_samples.py"


def test_attestation_reads_the_cuda_graph_record_the_pinned_sglang_serialises(tmp_path):
    """The samples' `cuda_graph_config` is written by make_samples.py; what must hold is that the record
    the pinned SGLang itself serialises (CudaGraphConfig through server_args._plain) has the samples'
    shape, and that attestation reads the backends out of it: here other ones than the samples'."""
    require_module("sglang.srt.server_args")
    from sglang.srt.model_executor.cuda_graph_config import CudaGraphConfig, PhaseConfig
    from sglang.srt.server_args import _plain

    real = json.loads(json.dumps(_plain(CudaGraphConfig(decode=PhaseConfig(backend="disabled", max_bs=8),
                                                        prefill=PhaseConfig(backend="full"))), default=str))
    saved = sample("tp4.json")["cuda_graph_config"]
    assert set(real) == set(saved) and set(real["decode"]) == set(saved["decode"])
    info = resolved(sample("tp4.json"))
    info["cuda_graph_config"] = real
    rec = judge(deployment(tmp_path), "tp4", {"server": info}).records[0].fields
    assert rec["cuda_graphs"]["decode"] == {"backend": "disabled", "from": "cuda_graph_config.decode.backend"}
    assert rec["cuda_graphs"]["prefill"]["backend"] == "full"


def test_what_the_server_runs_is_held_against_the_audits_prediction(tmp_path):
    record = attest.WorkerRecord(role="server", source="saved", fields={
        "attention_backend": "dsv4", "page_size": 256, "moe_runner_backend": "flashinfer_mxfp4",
        "kv_cache_dtype": "fp8_e4m3", "speculative_algorithm": None})
    predicted = {"tp4/server": {"attention_backend": "dsv4", "page_size": 256, "moe_runner_backend": "flashinfer_mxfp4",
                                "kv_cache_dtype": "fp8_e4m3", "speculative_algorithm": None}}
    (same,) = attest.against_prediction([record], predicted, "tp4", "latest.json")
    assert same.level == "OK"
    record.fields["moe_runner_backend"] = "triton"
    (differs,) = attest.against_prediction([record], predicted, "tp4", "latest.json")
    assert differs.level == "WARN" and "moe_runner_backend 'triton', predicted 'flashinfer_mxfp4'" in differs.detail
    record.simulated = True  # a rehearsal is not held to an audit of the real image
    assert attest.against_prediction([record], predicted, "tp4", "latest.json") == []


# ---- the CPU engine rehearsal: the real server's own resolution, N/A for DeepSeek-V4's GPU checks ----

def _cpu_expected(**overrides):
    from bundle.verify.attest import Expected

    values = dict(role="decode", tp_size=1, kv_cache_dtype="auto", moe_runner="auto", sparse_mla_env="flashinfer",
                  overlay=False, cuda_graphs=True, speculative="none", pcie_safe=True, sglang_version="0.5.23",
                  disaggregation_mode="decode", transfer_backend="nixl")
    values.update(overrides)
    return Expected(**values)


def _cpu_record(**fields):
    from bundle.verify.attest import WorkerRecord

    base = {"device": "cpu", "sglang_version": "0.5.23", "tp_size": 1, "attention_backend": "torch_native",
            "disaggregation_mode": "decode", "transfer_backend": "nixl",
            "cuda_graphs": {"decode": {"backend": "disabled", "from": "x"}, "prefill": {"backend": "disabled", "from": "x"}}}
    base.update(fields)
    return WorkerRecord(role="decode", source="test", fields=base)


def test_a_cpu_server_is_judged_on_what_applies_and_says_the_gpu_checks_do_not():
    from bundle.findings import Level
    from bundle.verify.attest import GPU_MODEL_CHECKS, evaluate

    findings = evaluate(_cpu_record(), _cpu_expected())
    levels = {f.what: f.level for f in findings}
    assert Level.FAIL not in levels.values()
    assert {what for what, level in levels.items() if level == Level.SKIP} == set(GPU_MODEL_CHECKS)
    assert levels["PD role"] == "OK" and levels["TP size"] == "OK"


def test_a_cpu_server_with_the_wrong_tp_or_role_fails():
    from bundle.findings import Level
    from bundle.verify.attest import evaluate

    wrong = evaluate(_cpu_record(tp_size=4, transfer_backend="mooncake"), _cpu_expected())
    assert {f.what for f in wrong if f.level == Level.FAIL} == {"TP size", "PD role"}
