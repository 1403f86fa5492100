"""The MTP draft (what levers.speculative mtp / mtp-light run) in the census and in the closed form: the
census of SGLang's own `DeepseekV4ForCausalLMNextN` per rank layout (recorded in tests/data/census/, made by
census_probe.py --draft mtp inside the rehearsal image; the Docker tier reruns it), the closed form's
draft_shape held to it within 3% per class and layout, and a speculative step reading the draft's bytes
once per draft pass. A class dropped from the draft's closed form fails here (shown on plants)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from bundle.verify import census, cost_model, limits
from tests.test_census import RECORDED

ROOT = Path(__file__).resolve().parents[1]
DRAFT_RECORDED = ROOT / "tests" / "data" / "census" / "deepseek_v4_flash_mtp_draft.json"


@pytest.fixture(scope="module")
def recorded() -> dict:
    return census.load(DRAFT_RECORDED)


@pytest.fixture(scope="module")
def model() -> cost_model.ModelShape:
    return cost_model.model_shape(cost_model.load_config(ROOT / census.AUDIT_CONFIG.parent))


def entry_at(census_data: dict, tp: int, ep: int = 1) -> dict:
    return next(e for e in census_data["layouts"] if (e["tp"], e["ep"]) == (tp, ep))


def test_the_draft_census_is_sglangs_nextn_draft_for_every_layout_of_the_model_census(recorded):
    target = census.load(RECORDED)
    assert recorded["draft"] == "mtp" and recorded["sglang"] == target["sglang"]
    assert recorded["config_sha256"] == target["config_sha256"]
    assert [(e["tp"], e["ep"]) for e in recorded["layouts"]] == [(e["tp"], e["ep"]) for e in target["layouts"]]
    for entry in recorded["layouts"]:
        assert "error" not in entry and entry["architecture"] == "DeepseekV4ForCausalLMNextN"
        assert entry["moe_layers"] == 1 and "other" not in entry["classes"]
        # window only (compress ratio 0): no compressor, no indexer
        assert not [name for name in entry["classes"] if "compressor" in name or "indexer" in name]
        shared = {name for name, c in entry["classes"].items() if c.get("shared_with_target")}
        assert shared == set(cost_model.DRAFT_SHARED)


def test_the_drafts_closed_form_holds_within_3_percent_per_class_and_layout(recorded, model):
    deltas = census.compare(recorded, model.draft)
    assert len({d.layout for d in deltas}) == len(census.LAYOUTS)
    bad = [d.line() for d in deltas if not d.ok]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("plant", ["draft e_proj + h_proj", "routed experts", "attention wo_a"])
def test_a_class_dropped_from_the_drafts_closed_form_fails_the_comparison(recorded, model, plant):
    planted = replace(model.draft, groups=tuple(g for g in model.draft.groups if g.name != plant))
    bad = [d for d in census.compare(recorded, planted) if not d.ok]
    assert bad and {d.weight_class for d in bad} == {plant}
    assert {d.layout for d in bad} == {layout.name() for layout in census.LAYOUTS}


def test_a_speculative_step_reads_the_drafts_every_step_classes_once_per_draft_pass(recorded, model):
    tp4 = entry_at(recorded, 4)["classes"]
    every_pass = sum(c["bytes"] for c in tp4.values() if c["read"] == "every step")  # the head among them
    plain = cost_model.step_cost(model, cost_model.RunShape(4, 1, 256, 256))
    for steps in (1, 3):  # mtp-light, mtp
        step = cost_model.step_cost(model, cost_model.RunShape(4, 1, 256, 256, draft_tokens=steps))
        assert step.draft_bytes >= steps * every_pass
        assert step.bytes_per_gpu >= plain.bytes_per_gpu + step.draft_bytes


def test_dspark_drafts_its_block_in_one_pass_and_mtp_in_one_a_token(model):
    mtp = cost_model.step_cost(model, cost_model.RunShape(4, 1, 256, 256, draft_tokens=3))
    block = cost_model.step_cost(model, cost_model.RunShape(4, 1, 256, 256, draft_tokens=7, draft_passes=1))
    assert block.draft_bytes < mtp.draft_bytes / 2
    assert limits._draft_passes(None, "dspark") == 1 and limits._draft_passes(None, "mtp") is None
    resolved = {"records": [{"role": "decode", "fields": {"speculative_algorithm": "DSPARK"}}]}
    assert limits._draft_passes(resolved, "none") == 1


def test_the_floor_per_accepted_token_carries_the_draft(model):
    hw = cost_model.gpu("NVIDIA RTX PRO 6000 Blackwell Server Edition")
    run = cost_model.RunShape(4, 1, 256, 256, draft_tokens=3, accept_length=3.0)
    with_draft = cost_model.score(model, run, hw, 5.0)
    without = cost_model.score(replace(model, draft=None, draft_layer_fraction=0.0), run, hw, 5.0)
    assert with_draft.bytes_per_gpu > without.bytes_per_gpu and with_draft.floor_tpot_ms > without.floor_tpot_ms
