"""The closed form of cost_model.py held to the census of SGLang's own DeepSeek-V4 model (recorded in
tests/data/census/, made by bundle/verify/census_probe.py inside the rehearsal image; the Docker tier
reruns it: tests/e2e/test_census_e2e.py): within 3% per weight class and per rank layout, TP 1/2/4/8 with
EP off and on. A class dropped from the closed form, or its dtype changed, fails here (shown on plants)."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import pytest

from bundle.verify import census, cost_model

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "tests" / "data" / "census" / "deepseek_v4_flash.json"


@pytest.fixture(scope="module")
def recorded() -> dict:
    return census.load(RECORDED)


@pytest.fixture(scope="module")
def model() -> cost_model.ModelShape:
    return cost_model.model_shape(cost_model.load_config(ROOT / census.AUDIT_CONFIG.parent))


def test_the_census_counted_every_layout_from_the_config_in_use(recorded):
    config = (ROOT / census.AUDIT_CONFIG).read_bytes()
    assert recorded["config_sha256"] == hashlib.sha256(config).hexdigest()
    assert recorded["sglang"] == "0.5.23" and recorded["capability"] == "12.0"
    counted = {(e["tp"], e["ep"]) for e in recorded["layouts"] if "error" not in e}
    assert counted == {(layout.tp, layout.ep) for layout in census.LAYOUTS}
    for entry in recorded["layouts"]:
        assert not set(entry["classes"]) - {*(g.name for g in cost_model.model_shape({"model_type": "deepseek_v4"})
                                               .groups), *census.INDEXED_TABLES, "embedding"}, entry["classes"].keys()
        assert "other" not in entry["classes"]  # every tensor the model holds has a class


def test_the_closed_form_holds_within_3_percent_per_class_and_layout(recorded, model):
    deltas = census.compare(recorded, model)
    assert len({d.layout for d in deltas}) == len(census.LAYOUTS)
    bad = [d.line() for d in deltas if not d.ok]
    assert not bad, "\n".join(bad)


def test_the_census_shows_what_the_old_model_left_out(recorded):
    tp4 = next(e for e in recorded["layouts"] if (e["tp"], e["ep"]) == (4, 1))["classes"]
    tp1 = next(e for e in recorded["layouts"] if (e["tp"], e["ep"]) == (1, 1))["classes"]
    # wo_a BF16 (dequantized at load: SGLANG_OPT_FP8_WO_A_GEMM off), the compressors BF16 and replicated,
    # the mixers FP32 and replicated, the indexer's wq_b replicated
    assert set(tp4["attention wo_a"]["dtypes"]) == {"bfloat16"}
    assert "bfloat16" in tp4["attention compressor"]["dtypes"]
    assert set(tp4["hyper-connection mixers"]["dtypes"]) == {"float32"}
    for name in ("attention compressor", "indexer compressor", "indexer wq_b", "hyper-connection mixers"):
        assert tp4[name]["bytes"] == tp1[name]["bytes"], name
    assert 0.55e9 < tp4["attention compressor"]["bytes"] + tp4["indexer compressor"]["bytes"] < 0.7e9


@pytest.mark.parametrize("plant", ["a dropped class", "a class's dtype changed", "a replicated class split"])
def test_a_planted_omission_in_the_closed_form_fails_the_comparison(recorded, model, plant):
    groups = list(model.groups)
    i = next(i for i, g in enumerate(groups) if g.name == "attention compressor")
    if plant == "a dropped class":
        del groups[i]
    elif plant == "a class's dtype changed":  # the compressors counted as FP8, as if quantized
        groups[i] = replace(groups[i], bytes_at_tp1=groups[i].bytes_at_tp1 / 2, dtype="fp8")
    else:
        groups[i] = replace(groups[i], split=cost_model.SPLIT)
    planted = replace(model, groups=tuple(groups))
    bad = [d for d in census.compare(recorded, planted) if not d.ok]
    assert bad and all(d.weight_class == "attention compressor" for d in bad)
    if plant == "a replicated class split":
        assert {d.layout for d in bad} == {layout.name() for layout in census.LAYOUTS if layout.tp > 1}
