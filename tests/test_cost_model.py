"""The cost model of one decode step (bundle/verify/cost_model.py): DeepSeek-V4-Flash's bytes per token
from its config.json (the audit's copy, with its per-layer compress_ratios), the floors it gives on the GPUs
this project serves, and the original deployment's run and the public figures scored with it. The closed
form against the census of SGLang's own model is tests/test_census.py."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from bundle.verify import cost_model as cm

FIGURES = Path(__file__).resolve().parents[1] / "docsgen" / "public_figures.json"
SERVER = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
WORKSTATION = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
ROOT = Path(__file__).resolve().parents[1]
# DeepSeek-V4-Flash's config.json as the image audit keeps it: its compress_ratios decide which layers are
# compressed-sparse (4), heavily compressed (128) or window-only (0).
V4 = json.loads((ROOT / "bundle/images/audit/deepseek_v4_flash/config.json").read_text())
# The engine rehearsal's model (docker/engine/train_model.py): a tiny Llama in float32.
TINY_LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
              "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
              "vocab_size": 512, "torch_dtype": "float32"}


def public_runs() -> list[dict]:
    return json.loads(FIGURES.read_text())["runs"]


def tpot_of(run: dict) -> float:
    return run.get("tpot_ms") or 1000.0 * run["concurrency"] / run["output_tok_s"]


def test_deepseek_v4_flash_is_about_13b_active_and_a_tp1_step_reads_about_12_7_gb():
    model = cm.model_shape(V4)
    assert 12.5e9 < model.active_params() < 14.0e9  # the model card's "about 13B active" (+ mixers, compressors)
    cost = cm.step_cost(model, cm.RunShape(tp=1, concurrency=1, input_len=256, output_len=256))
    assert 12.4e9 < cost.weight_bytes < 12.9e9
    assert cost.kv_bytes < 0.01 * cost.weight_bytes  # a 384-token context is nothing beside the weights
    assert cost.bytes_by_class["attention wo_a"] == pytest.approx(43 * 8192 * 4096 * 2)  # BF16: dequantized at load


def test_the_per_layer_compress_ratios_drive_the_cache_read():
    ratios = V4["compress_ratios"]
    every_layer_indexed = cm.model_shape({k: v for k, v in V4.items() if k != "compress_ratios"})
    model = cm.model_shape(V4)
    run = cm.RunShape(4, 1, 32768, 256)
    assert sum(1 for r in ratios if r == 4) == 21 and sum(1 for r in ratios if r == 128) == 20
    # A long context: the heavily compressed and window-only layers read far less than an indexed one.
    assert cm.step_cost(model, run).kv_bytes < 0.7 * cm.step_cost(every_layer_indexed, run).kv_bytes
    # and only the ratio-4 layers carry an indexer
    held = model.held(cm.Layout(1))
    assert held["indexer wq_b"] == pytest.approx(21 * (64 * 128 * 1024 + 4 * 64 * 8), rel=1e-6)


def test_tensor_parallel_splits_the_bytes_but_not_the_replicated_classes():
    model = cm.model_shape(V4)
    one, four = (cm.step_cost(model, cm.RunShape(tp, 1, 256, 256)) for tp in (1, 4))
    for name in ("attention compressor", "indexer compressor", "indexer wq_b", "hyper-connection mixers",
                 "attention wq_a + wkv", "router"):
        assert four.bytes_by_class[name] == one.bytes_by_class[name], name
    for name in ("attention wq_b", "attention wo_a", "attention wo_b", "shared experts", "output head",
                 "routed experts"):
        assert four.bytes_by_class[name] == pytest.approx(one.bytes_by_class[name] / 4, rel=0.01), name
    assert 4.0e9 < four.weight_bytes < 4.3e9  # the independent count: about 4.14 GB at TP4
    assert four.collectives == 2 * 43 + 2 and one.collectives == 0 and one.link_bytes_per_gpu == 0
    assert [k.count for k in four.collective_kinds] == [86, 1, 1]


def test_expert_parallelism_reads_the_busiest_ranks_whole_experts():
    assert cm.busiest_rank_experts(256, 6, 1, 4) == pytest.approx(2.8, abs=0.05)  # exact: 2.80; mean 1.5
    assert cm.busiest_rank_experts(256, 6, 1, 1) == pytest.approx(6)
    model = cm.model_shape(V4)
    tp4, ep4 = (cm.step_cost(model, cm.RunShape(4, 1, 256, 256, ep=ep)) for ep in (1, 4))
    one_expert = 43 * 3 * 4096 * 2048 * cm.BYTES["mxfp4"]
    assert ep4.bytes_by_class["routed experts"] == pytest.approx(ep4.experts_read * one_expert)
    assert tp4.bytes_by_class["routed experts"] == pytest.approx(6 * one_expert / 4)
    assert 4.7e9 < ep4.weight_bytes < 5.0e9  # the independent count: about 4.88 GB on the busiest rank


def test_concurrency_touches_more_experts_and_a_longer_context_reads_more_cache():
    assert cm.distinct_experts(256, 6, 1) == pytest.approx(6)
    assert cm.distinct_experts(256, 6, 8) == pytest.approx(44.3, abs=0.1)
    model = cm.model_shape(V4)
    c1, c8 = (cm.step_cost(model, cm.RunShape(4, c, 256, 256)) for c in (1, 8))
    assert 1.8 < c8.weight_bytes / c1.weight_bytes < 2.6
    short, long = (cm.step_cost(model, cm.RunShape(4, 1, n, 256)) for n in (256, 32768))
    assert 5 * short.kv_bytes < long.kv_bytes < 40 * short.kv_bytes


def _safetensors(path: Path, tensors: dict[str, str]) -> None:
    header = json.dumps({name: {"dtype": dtype, "shape": [1], "data_offsets": [0, 1]}
                         for name, dtype in tensors.items()}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0")


def test_the_experts_stored_precision_is_read_from_the_safetensors_headers(tmp_path):
    _safetensors(tmp_path / "model-00001.safetensors",
                 {"layers.0.ffn.experts.0.w1.weight": "F8_E4M3", "layers.0.attn.wq_a.weight": "F8_E4M3"})
    dtypes = cm.safetensors_dtypes(tmp_path)
    fp8 = cm.model_shape(V4, dtypes)
    fp4 = cm.model_shape(V4)
    assert [g.dtype for g in fp8.groups if g.read == cm.PER_EXPERT] == ["fp8"]
    assert "safetensors header" in fp8.notes[0] and "assumed" in fp4.notes[0]
    run = cm.RunShape(4, 1, 256, 256)
    assert cm.step_cost(fp8, run).weight_bytes > 1.15 * cm.step_cost(fp4, run).weight_bytes


def test_every_gpu_figure_has_its_source_and_an_unknown_gpu_gets_none():
    table = json.loads(cm.HARDWARE_FILE.read_text())["gpus"]
    assert {SERVER, WORKSTATION, "NVIDIA H100 80GB HBM3", "NVIDIA H200"} <= set(table)
    for name, entry in table.items():
        for figure in ("memory_gb_s", "tflops", "link_gb_s", "power_w"):
            assert entry["sources"].get(figure), f"{name}: {figure} has no source"
    assert cm.gpu("NVIDIA GeForce GTX 480") is None
    measured = cm.gpu(SERVER, busbw_gb_s=21.5)
    assert measured.link_gb_s == 21.5 and "doctor" in measured.link_source


def test_the_original_deployments_run_scores_far_below_its_floor_on_either_edition():
    model = cm.model_shape(V4)
    for gpu in (SERVER, WORKSTATION):
        score = cm.score(model, cm.RunShape(4, 1, 256, 256), cm.gpu(gpu), 94.13)
        assert score.mbu < 0.05 and score.ratio > 20 and score.floor_share < 0.05
        assert score.basis == "step" and score.mfu < 0.01
        assert 3.3 < score.floor_tpot_ms < 4.0
        assert score.parts.collectives == 88 and 1.0 < score.parts.collectives_ms < 1.5


def test_the_floor_is_bandwidth_plus_the_collectives_latency_and_eager_launches():
    model, hw = cm.model_shape(V4), cm.gpu(SERVER)
    run = cm.RunShape(4, 1, 256, 256)
    cited = cm.score(model, run, hw, 10.0)
    assert cited.floor_tpot_ms == pytest.approx(cited.bandwidth_tpot_ms + cited.parts.collectives_ms)
    assert "13.9 us" not in cited.parts.line() and "(88 x 14 us)" in cited.parts.line()
    slow = cm.CollectiveLatency.measured({8192: 40e-6, 1 << 20: 120e-6}, source="a probe")
    measured = cm.score(model, run, hw, 10.0, latency=slow)
    assert measured.parts.collectives_ms > 2.5 * cited.parts.collectives_ms
    assert measured.parts.latency_source == "a probe"
    eager = cm.score(model, run, hw, 10.0, cuda_graphs=False)
    assert eager.parts.launches == 43 * cm.KERNELS_PER_LAYER and "no CUDA graphs" in eager.parts.line()
    assert cm.score(model, cm.RunShape(1, 1, 256, 256), hw, 10.0).parts.collectives == 0  # no TP, no collective
    eight = cm.score(model, cm.RunShape(8, 1, 256, 256), hw, 10.0)
    assert eight.parts.collective_each_us > 20  # 8 GPUs behind PCIe switches: about 24 us


def test_a_run_at_the_floor_divided_by_0_8_takes_80_percent_of_the_floor():
    model = cm.model_shape(V4)
    floor = cm.score(model, cm.RunShape(4, 1, 256, 256), cm.gpu(SERVER), 1.0).floor_tpot_ms
    assert cm.score(model, cm.RunShape(4, 1, 256, 256), cm.gpu(SERVER), floor / 0.8).floor_share == pytest.approx(0.8)


def test_speculation_with_a_known_acceptance_divides_the_floor_and_an_unknown_one_is_per_token():
    model, hw = cm.model_shape(V4), cm.gpu(SERVER)
    plain = cm.score(model, cm.RunShape(4, 1, 256, 256), hw, 5.0)
    unknown = cm.score(model, cm.RunShape(4, 1, 256, 256, draft_tokens=3), hw, 5.0)
    known = cm.score(model, cm.RunShape(4, 1, 256, 256, draft_tokens=3, accept_length=3.0), hw, 5.0)
    assert unknown.floor_tpot_ms == pytest.approx(plain.floor_tpot_ms) and unknown.basis.startswith("per token")
    assert known.basis == "step" and known.tokens_per_step == 4
    # A verify step of 4 tokens touches ~4x the experts of one: 3 accepted tokens gain ~1.5x, not 3x.
    assert known.bytes_per_gpu > 1.3 * plain.bytes_per_gpu
    assert plain.floor_tpot_ms / 3 < known.floor_tpot_ms < plain.floor_tpot_ms / 1.3


@pytest.mark.parametrize("run", public_runs(), ids=lambda r: f"{r['name']} C{r['concurrency']}")
def test_the_public_figures_score_between_the_original_deployment_and_the_floor(run):
    from docsgen.scored_figures import scored_run

    scored = scored_run(run)
    assert run["source"]
    share = scored.limit["floor_share"]
    if run["output_tok_s"] < 20:
        assert share < 0.10 and scored.limit["verdict"]["band"] == "far"
    else:  # per output token, the acceptance unknown: speculation can pass a plain step's floor, not double it
        assert 0.3 < share < 1.3 and scored.limit["verdict"]["acceptance_unknown"]


def test_the_cpu_rehearsal_reads_every_ranks_share_through_one_memory_bus():
    model = cm.model_shape(TINY_LLAMA)
    params = 2 * (4 * 64 * 64 + 3 * 64 * 256) + 512 * 64
    assert cm.step_cost(model, cm.RunShape(1, 1, 32, 32)).weight_bytes == pytest.approx(params * 4)
    host = cm.cpu(10.0)
    one, four = (cm.score(model, cm.RunShape(tp, 1, 32, 32), host, 20.0) for tp in (1, 4))
    assert one.figure == "cpu" and one.mfu is None
    assert four.floor_tpot_ms == pytest.approx(one.floor_tpot_ms, rel=0.01)


def test_the_sampler_reads_the_whole_vocabularys_fp32_logits_on_every_rank_and_is_its_own_part():
    model = cm.model_shape(V4)
    tp1, tp4 = (cm.step_cost(model, cm.RunShape(tp, 1, 256, 256)) for tp in (1, 4))
    assert tp1.sampler_bytes == tp4.sampler_bytes == pytest.approx(129280 * 4)  # gathered: not split over TP
    assert cm.step_cost(model, cm.RunShape(4, 8, 256, 256)).sampler_bytes == pytest.approx(8 * tp4.sampler_bytes)
    parts = cm.score(model, cm.RunShape(4, 1, 256, 256), cm.gpu(SERVER), 94.13).parts
    assert ", sampler 0.0003 ms" in parts.line()  # 0.5 MB at 1,597 GB/s
    assert parts.families["sampling"] == pytest.approx(parts.sampler_ms)
