"""The verdict per bench level (bundle/verify/verdict.py, limits.py): near or far from the cost model's
floor, what binds the floor, the likely causes ordered by how much of the gap each can explain, and unlike
runs named, never in percent."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from bundle.verify import cost_model as cm
from bundle.verify import gpu_state, limits, tables, verdict

SERVER = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
from tests.test_cost_model import V4  # noqa: E402 - DeepSeek-V4-Flash's config.json (the audit's)
# What attestation recorded for a server like the original deployment's: graphs on, the Triton
# sparse-MLA decode and the marlin MoE runner (attest.py's WARN findings).
SEEDS_ATTESTATION = {
    "kind": "attestation", "topology": "tp4", "ok": True,
    "records": [{"role": "server", "fields": {"tp_size": 4, "cuda_graphs": {"decode": {"backend": "full", "from": "x"},
                                                                           "prefill": {"backend": "disabled", "from": "x"}},
                                              "speculative_algorithm": None},
                 "env": {"SGLANG_SM120_FLASHMLA_BACKEND": "triton"}}],
    "findings": [{"level": "WARN", "what": "sm_120 sparse-MLA backend", "role": "server",
                  "detail": "SGLang's Triton sparse-MLA decode (CUDA cores)"},
                 {"level": "OK", "what": "CUDA graphs", "role": "server", "detail": "decode full"}],
}


def seeds_score(evidence: verdict.Evidence, tpot: float = 94.13) -> dict:
    limit = limits.Limits(cm.model_shape(V4), cm.gpu(SERVER), tp=4, servers=1, draft_tokens=0, evidence=evidence)
    return limits.score_level(limit, {"concurrency": 1, "metrics": {"mean_tpot_ms": tpot}},
                              {"input_len": 256, "output_len": 256})


@pytest.mark.parametrize("evidence", [verdict.Evidence(),
                                      verdict.evidence_from(SEEDS_ATTESTATION, None, None)],
                         ids=["nothing known", "the seeds' attestation"])
def test_the_original_deployments_run_is_far_with_fallback_kernels_named_first(evidence):
    scored = seeds_score(evidence)
    assert scored["mbu"] < 0.05 and scored["verdict"]["band"] == "far"
    first = scored["verdict"]["causes"][0]
    assert first["name"] == "fallback kernels"
    assert first["seen"] == bool(evidence.slow_paths)
    explains = [c["explains_ms"] for c in scored["verdict"]["causes"]]
    assert explains == sorted(explains, reverse=True)  # ordered by how much of the gap each can explain
    assert all(e <= 94.13 - scored["floor_tpot_ms"] + 1e-3 for e in explains)  # none explains more than the gap
    if evidence.slow_paths:
        assert "Triton sparse-MLA" in first["detail"] and 15 < first["explains_ms"] < 25  # 43 calls x 449 us
        names = [c["name"] for c in scored["verdict"]["causes"]]
        assert "eager mode" not in names  # attestation saw CUDA graphs on: ruled out
    assert scored["verdict"]["binds"].startswith("bound by weights: weights 2.59 ms")


def test_a_run_at_80_percent_of_the_floor_reads_as_near_and_still_names_what_binds_it():
    floor = seeds_score(verdict.Evidence())["floor_tpot_ms"]
    scored = seeds_score(verdict.Evidence(), tpot=floor / 0.8)
    assert scored["floor_share"] == pytest.approx(0.8, abs=0.001)
    assert scored["verdict"]["band"] == "near"
    assert scored["verdict"]["headline"].startswith("near the floor: 80.0% of the floor's speed")
    assert "collectives 1.23 ms (88 x 14 us)" in scored["verdict"]["binds"]
    # what is left of the gap is still explained, largest first
    assert scored["verdict"]["causes"] and all(c["explains_ms"] <= floor / 0.8 - floor + 1e-3
                                               for c in scored["verdict"]["causes"])


def test_causes_are_ordered_by_the_gap_each_explains_seen_or_not():
    evidence = verdict.Evidence(slow_paths=(), eager=True, pcie_safe=True, busbw_gb_s=12.5, power_limit_w=275.0,
                                power_default_w=600.0, pcie_gen=(5, 5), pcie_width=(8, 16), speculative="none")
    level = verdict.Level(figure="gpu", floor_share=0.05, mbu=0.04, measured_ms=60.0, floor_ms=3.0, binding="weights",
                          floor_line="weights 2 ms", tp=4, batch=1, layers=43, collectives=88, collective_each_us=14.0,
                          link_ms=0.02)
    causes = verdict.judge(level, evidence).causes
    names = [c.name for c in causes]
    assert names[:3] == ["fallback kernels", "eager mode", "power cap"]  # the gap (57 ms), 54 ms, 16 ms
    assert [c.explains_ms for c in causes] == sorted((c.explains_ms for c in causes), reverse=True)
    power = causes[names.index("power cap")]
    assert power.seen and "275 W of a default 600 W" in power.detail
    assert "width x 8 of 16" in causes[names.index("PCIe link")].detail
    assert "12.5 GB/s" in causes[names.index("PCIe-safe collectives")].detail
    # attestation listed no slow path: kernels stay a suspect it cannot rule out
    assert not causes[0].seen


def test_a_profile_adds_its_families_as_seen_causes():
    profile = verdict.ProfileEvidence(families=(
        verdict.FamilyTime("attention and indexer", 40.0, 0.5, ("_sparse_mla_decode_kernel",), fallback=True),
        verdict.FamilyTime("collectives", 1.3, 1.2, ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL",))),
        source="trace of C=1 (2 steps)")
    scored = seeds_score(verdict.evidence_from(SEEDS_ATTESTATION, None, None, profile=profile))
    first = scored["verdict"]["causes"][0]
    assert first["name"] == "profile: attention and indexer (fallback)" and first["seen"]
    assert first["explains_ms"] == pytest.approx(39.5) and "_sparse_mla_decode_kernel" in first["detail"]


def test_a_speculative_level_is_per_accepted_token_or_marked_acceptance_unknown():
    limit = limits.Limits(cm.model_shape(V4), cm.gpu(SERVER), tp=4, servers=1, draft_tokens=7,
                          evidence=verdict.Evidence(speculative="DSPARK"), ep=4)
    config = {"input_len": 256, "output_len": 256}
    unknown = limits.score_level(limit, {"concurrency": 1, "metrics": {"mean_tpot_ms": 8.65}}, config)
    known = limits.score_level(limit, {"concurrency": 1, "metrics": {"mean_tpot_ms": 8.65, "accept_length": 3.2}},
                               config)
    assert unknown["verdict"]["acceptance_unknown"] and "acceptance unknown" in unknown["verdict"]["headline"]
    assert "speculative acceptance unknown" in [c["name"] for c in unknown["verdict"]["causes"]]
    assert not known["verdict"]["acceptance_unknown"] and known["basis"] == "step"
    assert known["tokens_per_step"] == 8 and known["floor_tpot_ms"] != unknown["floor_tpot_ms"]
    assert "expert imbalance" in [c["name"] for c in known["verdict"]["causes"]]  # EP4: the busiest rank


def test_a_cpu_figure_says_what_bounds_a_tiny_model_on_cpu():
    level = verdict.Level(figure="cpu", floor_share=0.01, mbu=0.01, measured_ms=20.0, floor_ms=0.2,
                          binding="weights", floor_line="weights 0.20 ms")
    v = verdict.judge(level, verdict.Evidence())
    assert v.band == "far" and "CPU figure" in v.headline()
    assert [c.name for c in v.causes] == ["per-step overhead"]


def test_evidence_reads_collectives_json_with_doctors_bus_bandwidth():
    collectives = {"pcie_safe": True, "source": "probe", "reason": "P2P hung",
                   "evidence": {"runs": [{"gpus": [0, 1], "p2p": "on", "ok": False, "busbw_gbps": None},
                                         {"gpus": [0, 1], "p2p": "off", "ok": True, "busbw_gbps": 18.2},
                                         {"gpus": [2, 3], "p2p": "off", "ok": True, "busbw_gbps": 17.9}]}}
    e = verdict.evidence_from(None, collectives, None)
    assert e.pcie_safe is True and e.busbw_gb_s == 17.9 and e.slow_paths is None


def test_nvidia_smi_state_is_the_worst_gpu_of_the_decoding_group():
    text = ("0, NVIDIA RTX PRO 6000 Blackwell Server Edition, 600.00, 600.00, 5, 5, 16, 16\n"
            "1, NVIDIA RTX PRO 6000 Blackwell Server Edition, 275.00, 600.00, 5, 5, 8, 16\n"
            "4, NVIDIA RTX PRO 6000 Blackwell Server Edition, 300.00, 600.00, [N/A], [N/A], 16, 16\n")
    state = gpu_state.parse(text, (0, 1))
    assert state == {"gpu_name": SERVER, "power_limit_w": 275.0, "power_default_w": 600.0, "pcie_gen": (5, 5),
                     "pcie_width": (8, 16)}
    assert gpu_state.parse(text, (4,))["power_limit_w"] == 300.0 and "pcie_gen" not in gpu_state.parse(text, (4,))


def test_a_simulator_run_and_an_unknown_gpu_are_not_scored_and_say_why(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(V4))
    sim = limits.build(kind="sim", model_folder=str(tmp_path), gpu_names=[], tp=4, servers=1, gpus=(0,))
    assert sim.why_not and "simulator" in sim.why_not
    odd = limits.build(kind="gpu", model_folder=str(tmp_path), gpu_names=["NVIDIA GeForce GTX 480"], tp=4,
                       servers=1, gpus=(0,))
    assert "GTX 480" in odd.why_not and "hardware.json" in odd.why_not
    assert limits.verdict_lines({"limits": odd.describe(), "levels": []})[0].startswith("limit: not scored")


def test_an_engine_rehearsal_is_scored_as_a_cpu_figure_and_the_table_shows_it(tmp_path):
    from tests.test_cost_model import TINY_LLAMA

    (tmp_path / "config.json").write_text(json.dumps(TINY_LLAMA))
    limit = limits.build(kind="engine", model_folder=str(tmp_path), gpu_names=[], tp=4, servers=1, gpus=(0, 1, 2, 3),
                         host_gb_s=10.0)
    assert limit.hardware.figure == "cpu" and limit.tp == 4
    level = {"concurrency": 1, "status": "ok", "failed_requests": 0,
             "metrics": {"completed": 4, "mean_tpot_ms": 25.0, "output_throughput": 40.0}}
    level["limit"] = limits.score_level(limit, level, {"input_len": 32, "output_len": 32})
    record = {"topology": "pd", "label": None, "rehearsal": "engine", "config": {"input_len": 32, "output_len": 32},
              "limits": limit.describe(), "levels": [level]}
    console = Console(file=io.StringIO(), width=250, color_system=None)
    console.print(tables.bench_table(record))
    out = console.file.getvalue()
    assert "MBU (CPU)" in out and "x floor" in out
    lines = limits.verdict_lines(record)
    assert lines[0].startswith("C=1: far from the floor:") and "CPU figure" in lines[0]
    assert lines[1].startswith("  floor: bound by weights")


def test_a_damaged_attestation_is_left_out_not_a_crash(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(V4))
    (tmp_path / "attestation.json").write_text(json.dumps({"findings": ["not a finding"], "records": 3}))
    built = limits.build(kind="gpu", model_folder=str(tmp_path), gpu_names=[SERVER], tp=4, servers=1, gpus=(0,),
                         attestation_path=tmp_path / "attestation.json")
    assert built.why_not is None and built.evidence.slow_paths is None
