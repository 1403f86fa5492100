"""A profile reduced to a decode step's time by kernel family: the parser on a real CUDA trace made on
an H100 (tests/data/profile/README.md), on a CPU trace torch's profiler makes here (what the CPU engine
rehearsal's server writes), and the families and libraries read from real kernel names."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from bundle.verify import kernel_families as kf
from bundle.verify import profile_trace
from tests.conftest import require_module

H100_TRACE = Path(__file__).parent / "data" / "profile" / "h100_decode_like.trace.json.gz"


@pytest.fixture(scope="module")
def h100():
    return profile_trace.reduce_file(H100_TRACE)


def test_the_h100_trace_reads_as_three_decode_steps_of_gpu_kernels_in_every_family(h100):
    assert h100.activities == "GPU" and h100.stage == "DECODE" and h100.steps == 3
    assert {f.family for f in h100.families} == {kf.MOE, kf.DENSE_GEMM, kf.ATTENTION, kf.SAMPLING, kf.ELEMENTWISE}
    assert h100.outside_steps == 0  # every kernel's launch lies in a step span (warm-up ran before the profile)
    # the libraries are named from the kernels: cuBLAS's nvjet GEMMs, the Triton kernel, cuDNN's SDPA
    assert {"cuBLAS", "Triton", "cuDNN", "PyTorch"} <= h100.libraries()
    moe = h100.family(kf.MOE)
    assert "Triton" in moe.libraries and moe.kernels_per_step == pytest.approx(42.0)
    assert h100.family(kf.ATTENTION).top[0][1] == "cuDNN"


def test_the_triton_kernel_inside_the_moe_is_named_as_triton(monkeypatch):
    monkeypatch.setattr(profile_trace, "TOP_KERNELS", 100)  # every kernel of the family, not the top 3
    moe = profile_trace.reduce_file(H100_TRACE).family(kf.MOE)
    assert ("silu_mul_kernel", "Triton") in {(name, lib) for name, lib, _ in moe.top}
    assert moe.libraries["Triton"] < moe.libraries["cuBLAS"]  # the expert GEMMs stay cuBLAS's


def test_a_steps_kernels_and_idle_gaps_add_up_to_the_step_on_one_stream(h100):
    """One CUDA stream: kernels never overlap, so the families' time plus the gaps is the step."""
    busy = sum(f.ms_per_step for f in h100.families)
    assert 0 < h100.idle_ms < h100.step_ms
    assert busy + h100.idle_ms == pytest.approx(h100.step_ms, rel=1e-6)
    # the toy step is launch-bound in eager mode (with_stack on): most of it is gaps between kernels
    assert h100.idle_ms / h100.step_ms > 0.5


def test_the_table_names_the_activities_and_every_family():
    text = "\n".join(profile_trace.lines(profile_trace.reduce_file(H100_TRACE)))
    assert "3 DECODE steps" in text and "GPU kernels (CUDA)" in text
    for family in (kf.MOE, kf.DENSE_GEMM, kf.ATTENTION, kf.SAMPLING, kf.ELEMENTWISE, kf.IDLE):
        assert family in text


def test_a_cpu_trace_of_steps_reads_its_innermost_ops_and_says_it_is_cpu(tmp_path):
    """torch's profiler with CPU activities, steps named as SGLang's ModelRunner names them."""
    torch = require_module("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    def moe_experts(h, w):
        return torch.relu(h @ w) @ w.T

    def sampler(logits):
        return torch.multinomial(torch.softmax(logits, dim=-1), 1)

    h, w = torch.randn(4, 256), torch.randn(256, 512)
    with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
        for _ in range(2):
            with record_function("step[DECODE bs=4]"):
                x = moe_experts(h, w)
                sampler(x[:, :64])
        with record_function("step[EXTEND bs=1 toks=8]"):
            moe_experts(h, w)
    path = tmp_path / "cpu.trace.json.gz"
    prof.export_chrome_trace(str(tmp_path / "cpu.trace.json"))
    path.write_bytes(gzip.compress((tmp_path / "cpu.trace.json").read_bytes()))
    cpu = profile_trace.reduce_file(path)
    assert cpu.activities == "CPU" and cpu.stage == "DECODE" and cpu.steps == 2
    assert cpu.family(kf.MOE) is not None and cpu.family(kf.SAMPLING) is not None
    assert "PyTorch" in cpu.family(kf.MOE).libraries
    assert "CPU ops" in "\n".join(profile_trace.lines(cpu))
    extend = profile_trace.reduce_file(path, stage="EXTEND")
    assert extend.steps == 1 and extend.family(kf.SAMPLING) is None


@pytest.mark.parametrize("name, context, family, library", [
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", (), kf.COLLECTIVES, "NCCL"),
    ("void sglang::cross_device_reduce_1stage<__nv_bfloat16, 4>(sglang::RankData*, sglang::RankSignals, "
     "sglang::Signal*, __nv_bfloat16*, int, int)", (), kf.COLLECTIVES, "sgl-kernel"),
    # the seeds' cause: the MoE on Triton's kernel where FlashInfer's CUTLASS module was expected
    ("fused_moe_kernel", ("cuLaunchKernelEx", "triton/runtime/jit.py(744): run",
                          "sglang/srt/layers/moe/fused_moe_triton/fused_moe.py(420): invoke_fused_moe_kernel"),
     kf.MOE, "Triton"),
    ("void tensorrt_llm::kernels::cutlass_kernels::sm120_gemm<cutlass::bfloat16_t>(Params)",
     ("cudaLaunchKernel", "flashinfer/fused_moe/core.py(812): cutlass_fused_moe"), kf.MOE, "CUTLASS"),
    ("main_kernel", ("cuLaunchKernel", "tilelang/jit/adapter/cython/adapter.py(310): __call__",
                     "sglang/srt/layers/attention/dsv4/indexer.py(201): forward"), kf.ATTENTION, "TileLang"),
    ("void flashinfer::BatchDecodeWithPagedKVCacheKernel<...>()", (), kf.ATTENTION, "FlashInfer"),
    ("nvjet_sm90_tst_256x8_64x6_2x1_v_bz_NNT", ("cuLaunchKernelEx", "aten::mm"), kf.DENSE_GEMM, "cuBLAS"),
    ("aten::mm", ("aten::matmul", "sglang/srt/layers/moe/fused_moe_native.py(60): moe_forward_native"),
     kf.MOE, "PyTorch"),
    # a projection inside the attention module is a dense GEMM (SGLang's Llama on the CPU engine)
    ("aten::mm", ("aten::matmul", "aten::linear", "sglang/srt/layers/linear.py(612): forward",
                  "nn.Module: QKVParallelLinear_0", "nn.Module: LlamaAttention_0"), kf.DENSE_GEMM, "PyTorch"),
    ("aten::_scaled_dot_product_flash_attention_for_cpu", ("aten::scaled_dot_product_attention",),
     kf.ATTENTION, "PyTorch"),
    ("aten::softmax", ("sglang/srt/layers/sampler.py(98): forward",), kf.SAMPLING, "PyTorch"),
    ("aten::add", ("sglang/srt/layers/layernorm.py(130): forward_native",), kf.ELEMENTWISE, "PyTorch"),
    ("gloo:all_reduce", (), kf.COLLECTIVES, "other"),
])
def test_families_and_libraries_from_real_kernel_names(name, context, family, library):
    assert kf.classify(name, context) == kf.Kind(family, library)


def test_what_is_not_a_trace_is_named_with_its_file(tmp_path):
    bad = tmp_path / "x.trace.json.gz"
    bad.write_bytes(b"\x1f\x8b not gzip")
    with pytest.raises(profile_trace.TraceUnreadable, match="x.trace.json.gz: not a readable trace"):
        profile_trace.reduce_file(bad)
    stepless = tmp_path / "nosteps.json"
    stepless.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1,
                                                     "dur": 2, "pid": 1, "tid": 1}]}))
    with pytest.raises(profile_trace.TraceUnreadable, match="no SGLang step span"):
        profile_trace.reduce_file(stepless)


def test_sglangs_sampler_after_the_step_span_counts_in_the_step_and_nested_ops_by_self_time(tmp_path):
    """The shape of SGLang's CPU trace (seen in the engine rehearsal's): the sampler's call comes after the
    step's span closes; aten::linear holds aten::mm. Times in microseconds, one thread."""
    def x(cat, name, ts, dur):
        return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": 1}

    events = [x("user_annotation", "step[DECODE bs=1]", 0, 100),
              x("python_function", "nn.Module: LlamaAttention_0", 5, 90),
              x("cpu_op", "aten::linear", 10, 60), x("cpu_op", "aten::mm", 15, 50),
              x("python_function", "sglang/srt/layers/sampler.py(148): forward", 120, 20),
              x("cpu_op", "aten::argmax", 125, 10),
              x("user_annotation", "step[DECODE bs=1]", 200, 100), x("cpu_op", "aten::mm", 210, 50),
              x("cpu_op", "aten::argmax", 400, 10)]  # after the last step, under no sampler frame: outside
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    table = profile_trace.reduce_file(path)
    assert table.steps == 2 and table.step_ms == pytest.approx((140 + 100) / 2 / 1000)
    gemm, sampling = table.family(kf.DENSE_GEMM), table.family(kf.SAMPLING)
    assert gemm.ms_per_step == pytest.approx((60 + 50) / 2 / 1000)  # linear's 10 us of its own + mm's 50, twice
    assert sampling.ms_per_step == pytest.approx(10 / 2 / 1000) and sampling.kernels_per_step == 0.5
    assert table.idle_ms == pytest.approx(((140 - 70) + (100 - 50)) / 2 / 1000)
