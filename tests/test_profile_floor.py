"""A profile's per-family table set against each family's share of the floor (bundle/verify/profile_floor.py,
cost_model.FloorParts.families), and the verdict ordered by what the profile measured: a real H100 trace
(tests/data/profile/), a fallback named from the kernels' library, and CPU or prefill tables named as not
comparable rather than given a ratio."""

from __future__ import annotations

import pytest

from bundle.verify import cost_model as cm
from bundle.verify import kernel_families as kf
from bundle.verify import limits, profile_floor, profile_trace, verdict
from tests.test_cost_model import SERVER, TINY_LLAMA, V4
from tests.test_profile_trace import H100_TRACE
from tests.test_verdict import SEEDS_ATTESTATION

H100 = "NVIDIA H100 80GB HBM3"
RUN = {"input_len": 256, "output_len": 256}


def scored(model: dict, gpu: str, tpot: float, *, tp: int = 1, evidence=verdict.Evidence(), profile=None) -> dict:
    limit = limits.Limits(cm.model_shape(model), cm.gpu(gpu), tp=tp, servers=1, draft_tokens=0, evidence=evidence)
    return limits.score_level(limit, {"concurrency": 1, "metrics": {"mean_tpot_ms": tpot}}, RUN, profile=profile)


def table(*families: profile_trace.FamilyTime, idle: float = 1.0, activities="GPU", stage="DECODE"):
    busy = sum(f.ms_per_step for f in families)
    return profile_trace.StepProfile("decode-TP-0-DECODE.trace.json.gz", activities, stage, 3, busy + idle,
                                     list(families), idle)


def family(name: str, ms: float, library: str, kernel: str) -> profile_trace.FamilyTime:
    return profile_trace.FamilyTime(name, ms, 43.0, {library: ms}, [(kernel, library, ms)])


@pytest.mark.parametrize("graphs", [True, False], ids=["CUDA graphs", "eager"])
def test_the_floors_families_add_up_to_its_step_and_carry_each_part(graphs):
    model, run = cm.model_shape(V4), cm.RunShape(tp=4, concurrency=1, input_len=256, output_len=256)
    parts = cm.score(model, run, cm.gpu(SERVER), 94.13, cuda_graphs=graphs).parts
    assert sum(parts.families.values()) == pytest.approx(parts.step_ms)
    assert parts.families[kf.COLLECTIVES] == pytest.approx(parts.collectives_ms)
    assert parts.families.get(kf.IDLE, 0.0) == pytest.approx(parts.launches_ms) and (kf.IDLE in parts.families) != graphs
    # expert parallelism: the busiest rank reads more experts, the MoE's share grows and nothing else's
    ep = cm.score(model, cm.RunShape(tp=4, concurrency=1, input_len=256, output_len=256, ep=4), cm.gpu(SERVER),
                  94.13, cuda_graphs=graphs).parts
    assert ep.families[kf.MOE] > parts.families[kf.MOE]
    assert ep.families[kf.DENSE_GEMM] == pytest.approx(parts.families[kf.DENSE_GEMM])


def test_the_h100_tables_families_are_set_against_their_floor_shares_or_said_to_have_none():
    limit = scored(TINY_LLAMA, H100, 6.0)
    lines = profile_floor.lines(profile_trace.reduce_file(H100_TRACE), limit, "C=1")
    assert lines[0] == f"  against the floor of C=1, per step ({limit['parts']['line']}):"
    rows = {line.split(" ms a step")[0].rsplit(None, 1)[0].strip(): line for line in lines[1:]}
    assert set(rows) == {kf.MOE, kf.DENSE_GEMM, kf.ATTENTION, kf.SAMPLING, kf.ELEMENTWISE, kf.IDLE}
    assert rows[kf.DENSE_GEMM].endswith("x)") and "floor's share" in rows[kf.DENSE_GEMM]
    assert rows[kf.SAMPLING].endswith("x)")  # the sampler's read of the logits
    assert "not in the floor" in rows[kf.IDLE]  # CUDA graphs on: no launch part
    assert "floor's share 0 ms" in rows[kf.MOE]  # a dense Llama has no MoE: no ratio to a zero share


def test_the_h100_trace_orders_the_verdict_and_a_run_without_one_keeps_the_profile_free_order():
    plain = scored(TINY_LLAMA, H100, 6.0)
    evidence = profile_floor.evidence([profile_trace.reduce_file(H100_TRACE)], plain, "C=1")
    profiled = scored(TINY_LLAMA, H100, 6.0, profile=evidence)
    names = [c["name"] for c in profiled["verdict"]["causes"]]
    assert names[0] == "profile: idle gaps"  # 4.8 ms of a 5.2 ms step between kernels
    figures = [c["explains_ms"] for c in profiled["verdict"]["causes"]]
    assert figures == sorted(figures, reverse=True)
    assert "fallback kernels" not in names and "eager mode" not in names  # the profile measured them
    assert [c["name"] for c in plain["verdict"]["causes"]][:2] == ["fallback kernels", "eager mode"]
    assert scored(TINY_LLAMA, H100, 6.0, profile=None) == plain


def test_a_moe_on_triton_where_a_prebuilt_kernel_was_expected_is_named_a_fallback_and_leads():
    """The seeds' run (TP4, 94.13 ms) with a profile whose MoE ran Triton's fused_moe_kernel (SGLang's
    sm_120 default is FlashInfer's MXFP4 module)."""
    limit = scored(V4, SERVER, 94.13, tp=4)
    seeds = table(family(kf.MOE, 36.0, "Triton", "fused_moe_kernel"),
                  family(kf.ATTENTION, 20.0, "FlashInfer", "BatchDecodeWithPagedKVCacheKernel"),
                  family(kf.COLLECTIVES, 1.5, "NCCL", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"), idle=30.0)
    rows = {row.family: row for row in profile_floor.rows(seeds, limit["parts"]["families"])}
    assert rows[kf.MOE].fallback and not rows[kf.ATTENTION].fallback and not rows[kf.COLLECTIVES].fallback
    assert "a fallback: fused_moe_kernel (Triton)" in rows[kf.MOE].line()
    judged = scored(V4, SERVER, 94.13, tp=4, profile=profile_floor.evidence([seeds], limit, "C=1"))
    first = judged["verdict"]["causes"][0]
    assert first["name"] == "profile: MoE GEMM (fallback)" and "fused_moe_kernel (Triton)" in first["detail"]


def test_pytorchs_glue_around_a_prebuilt_moe_is_no_fallback_and_a_fallback_names_its_own_kernel():
    # PyTorch the largest library, but not the most of the time: top-k, sorting and copies around the GEMMs
    glue = profile_trace.FamilyTime(kf.MOE, 1.0, 40.0, {"PyTorch": 0.45, "CUTLASS": 0.35, "FlashInfer": 0.2},
                                    [("topk", "PyTorch", 0.45), ("sm120_gemm", "CUTLASS", 0.35)])
    assert not profile_floor.rows(table(glue), {kf.MOE: 0.5})[0].fallback
    triton = profile_trace.FamilyTime(kf.ATTENTION, 1.0, 43.0, {"Triton": 0.6, "cuBLAS": 0.4},
                                      [("nvjet_tst", "cuBLAS", 0.4), ("_sparse_mla_decode_kernel", "Triton", 0.6)])
    row = profile_floor.rows(table(triton), {kf.ATTENTION: 0.1})[0]
    assert row.fallback and row.line().endswith("; a fallback: _sparse_mla_decode_kernel (Triton)")


@pytest.mark.parametrize("activities, stage, says", [
    ("CPU", "DECODE", "CPU ops' self time on the host"),
    ("GPU", "EXTEND", "the floor is a decode step's; this table is of EXTEND steps"),
])
def test_a_cpu_or_prefill_table_is_not_comparable_and_gets_no_ratio_nor_a_say_in_the_verdict(activities, stage, says):
    limit = scored(V4, SERVER, 94.13, tp=4)
    other = table(family(kf.DENSE_GEMM, 16.5, "PyTorch", "aten::mm"), activities=activities, stage=stage)
    lines = profile_floor.lines(other, limit, "C=1")
    assert len(lines) == 1 and "not comparable: " + says in lines[0] and "x)" not in lines[0]
    assert limit["parts"]["line"] in lines[0]  # the floor's parts still shown
    assert profile_floor.evidence([other], limit, "C=1") is None


def test_a_level_with_no_floor_says_so():
    lines = profile_floor.lines(profile_trace.reduce_file(H100_TRACE), None, "C=1")
    assert lines == ["  against the floor: not comparable: the level has no floor (it was not scored)"]


def test_a_slow_path_attestation_named_is_timed_by_the_profile_not_counted_twice():
    """The seeds' attestation (Triton sparse-MLA decode) and a profile whose attention ran that kernel."""
    evidence = verdict.evidence_from(SEEDS_ATTESTATION, None, None)
    limit = scored(V4, SERVER, 94.13, tp=4, evidence=evidence)
    seeds = table(family(kf.ATTENTION, 19.0, "Triton", "_sparse_mla_decode_kernel"), idle=5.0)
    causes = scored(V4, SERVER, 94.13, tp=4, evidence=evidence,
                    profile=profile_floor.evidence([seeds], limit, "C=1"))["verdict"]["causes"]
    assert causes[0]["name"] == "profile: attention and indexer (fallback)"
    attested = next(c for c in causes if c["name"] == "fallback kernels")
    assert attested["seen"] and attested["explains_ms"] == 0 and "Triton sparse-MLA decode" in attested["detail"]
