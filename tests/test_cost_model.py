"""The cost model of one decode step (bundle/verify/cost_model.py): DeepSeek-V4-Flash's bytes per token
from SGLang's own config defaults, the floors it gives on the GPUs this project serves, and the original
deployment's run and the public figures scored with it."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from bundle.verify import cost_model as cm

DATA = Path(__file__).parent / "data" / "bench"
SERVER = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
WORKSTATION = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
V4 = {"model_type": "deepseek_v4", "architectures": ["DeepseekV4ForCausalLM"]}
# The engine rehearsal's model (docker/engine/train_model.py): a tiny Llama in float32.
TINY_LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
              "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
              "vocab_size": 512, "torch_dtype": "float32"}


def public_runs() -> list[dict]:
    return json.loads((DATA / "public_figures.json").read_text())["runs"]


def tpot_of(run: dict) -> float:
    return run.get("tpot_ms") or 1000.0 * run["concurrency"] / run["output_tok_s"]


def test_deepseek_v4_flash_is_about_13b_active_and_reads_about_10_7_gb_a_token_at_tp1():
    model = cm.model_shape(V4)
    assert 12.5e9 < model.active_params() < 13.5e9  # the model card's "about 13B active"
    cost = cm.step_cost(model, cm.RunShape(tp=1, concurrency=1, input_len=256, output_len=256))
    assert 10.0e9 < cost.weight_bytes < 11.5e9
    assert cost.kv_bytes < 0.01 * cost.weight_bytes  # a 384-token context is nothing beside the weights


def test_tensor_parallel_splits_the_bytes_but_not_the_replicated_projections():
    model = cm.model_shape(V4)
    one, four = (cm.step_cost(model, cm.RunShape(tp, 1, 256, 256)) for tp in (1, 4))
    replicated = sum(g.params * cm.BYTES[g.dtype] for g in model.groups if g.replicated)
    assert four.weight_bytes == pytest.approx((one.weight_bytes - replicated) / 4 + replicated)
    assert four.collectives == 2 * 43 + 1 and one.collectives == 0 and one.link_bytes_per_gpu == 0


def test_concurrency_touches_more_experts_and_a_longer_context_reads_more_cache():
    assert cm.distinct_experts(256, 6, 1) == pytest.approx(6)
    assert cm.distinct_experts(256, 6, 8) == pytest.approx(44.3, abs=0.1)
    model = cm.model_shape(V4)
    c1, c8 = (cm.step_cost(model, cm.RunShape(4, c, 256, 256)) for c in (1, 8))
    assert 2.5 < c8.weight_bytes / c1.weight_bytes < 3.5
    short, long = (cm.step_cost(model, cm.RunShape(4, 1, n, 256)) for n in (256, 32768))
    # 128x the context, ~10x the cache read: the sparse attention reads at most top-k compressed entries,
    # only the indexer's keys grow with the context.
    assert 5 * short.kv_bytes < long.kv_bytes < 20 * short.kv_bytes


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
    assert [g.dtype for g in fp8.groups if g.per_expert] == ["fp8"]
    assert "safetensors header" in fp8.notes[0] and "assumed" in fp4.notes[0]
    run = cm.RunShape(4, 1, 256, 256)
    assert cm.step_cost(fp8, run).weight_bytes > 1.2 * cm.step_cost(fp4, run).weight_bytes


def test_every_gpu_figure_has_its_source_and_an_unknown_gpu_gets_none():
    table = json.loads(cm.HARDWARE_FILE.read_text())["gpus"]
    assert {SERVER, WORKSTATION, "NVIDIA H100 80GB HBM3", "NVIDIA H200"} <= set(table)
    for name, entry in table.items():
        for figure in ("memory_gb_s", "tflops", "link_gb_s", "power_w"):
            assert entry["sources"].get(figure), f"{name}: {figure} has no source"
    assert cm.gpu("NVIDIA GeForce GTX 480") is None
    measured = cm.gpu(SERVER, busbw_gb_s=21.5)
    assert measured.link_gb_s == 21.5 and "doctor" in measured.link_source


def test_the_original_deployments_run_scores_under_10_percent_mbu_on_either_edition():
    model = cm.model_shape(V4)
    for gpu in (SERVER, WORKSTATION):
        score = cm.score(model, cm.RunShape(4, 1, 256, 256), cm.gpu(gpu), 94.13)
        assert score.mbu < 0.10 and score.ratio > 10
        assert score.basis == "step" and score.mfu < 0.01
        assert 1.5 < score.floor_tpot_ms < 2.0


def test_a_run_at_the_floor_divided_by_0_8_scores_80_percent():
    model = cm.model_shape(V4)
    floor = cm.score(model, cm.RunShape(4, 1, 256, 256), cm.gpu(SERVER), 1.0).floor_tpot_ms
    assert cm.score(model, cm.RunShape(4, 1, 256, 256), cm.gpu(SERVER), floor / 0.8).mbu == pytest.approx(0.8)


def test_speculation_with_a_known_acceptance_divides_the_floor_and_an_unknown_one_is_per_token():
    model, hw = cm.model_shape(V4), cm.gpu(SERVER)
    plain = cm.score(model, cm.RunShape(4, 1, 256, 256), hw, 5.0)
    unknown = cm.score(model, cm.RunShape(4, 1, 256, 256, draft_tokens=3), hw, 5.0)
    known = cm.score(model, cm.RunShape(4, 1, 256, 256, draft_tokens=3, accept_length=3.0), hw, 5.0)
    assert unknown.floor_tpot_ms == pytest.approx(plain.floor_tpot_ms) and unknown.basis.startswith("per token")
    assert known.basis == "step" and known.tokens_per_step == 4
    # A verify step of 4 tokens touches ~4x the experts of one: 3 accepted tokens gain ~1.5x, not 3x.
    assert known.bytes_per_gpu > 1.5 * plain.bytes_per_gpu
    assert plain.floor_tpot_ms / 3 < known.floor_tpot_ms < plain.floor_tpot_ms / 1.3


@pytest.mark.parametrize("run", public_runs(), ids=lambda r: f"{r['name']} C{r['concurrency']}")
def test_the_public_figures_score_between_the_original_deployment_and_the_limit(run):
    model = cm.model_shape(V4)
    score = cm.score(model, cm.RunShape(run["tp"], run["concurrency"], 256, 256, draft_tokens=run["draft_tokens"]),
                     cm.gpu(SERVER), tpot_of(run))
    assert run["source"]
    if run["output_tok_s"] < 20:
        assert score.mbu < 0.10
    else:
        assert 0.15 < score.mbu < 1.0  # per-token (effective) MBU: no public run is past the floor


def test_the_cpu_rehearsal_reads_every_ranks_share_through_one_memory_bus():
    model = cm.model_shape(TINY_LLAMA)
    params = 2 * (4 * 64 * 64 + 3 * 64 * 256) + 512 * 64
    assert cm.step_cost(model, cm.RunShape(1, 1, 32, 32)).weight_bytes == pytest.approx(params * 4)
    host = cm.cpu(10.0)
    one, four = (cm.score(model, cm.RunShape(tp, 1, 32, 32), host, 20.0) for tp in (1, 4))
    assert one.figure == "cpu" and one.mfu is None
    assert four.floor_tpot_ms == pytest.approx(one.floor_tpot_ms, rel=0.01)
