"""The census of SGLang's own DeepSeek-V4 model, rerun inside the rehearsal image (real SGLang 0.5.23 and its
whole closure, no GPU): what it counts now is the file recorded in tests/data/census/, class by class and
layout by layout, so the fast tier's comparison with the closed form (tests/test_census.py) holds against
the SGLang the image carries."""

from __future__ import annotations

import pytest

from bundle.verify import census
from tests.test_census import RECORDED
from tests.test_census_draft import DRAFT_RECORDED

pytestmark = pytest.mark.docker


@pytest.mark.slow
# The census of seven layouts in the rehearsal image: 280 s when recorded, 109 s for this test (2026-12-06, shared 2-core machine).
@pytest.mark.timeout(1800)
def test_the_census_rerun_in_the_image_is_the_recorded_one(rehearsal_image, tmp_path):
    now = census.run_in_image(rehearsal_image, census.config_in_use(None), tmp_path)
    then = census.load(RECORDED)
    assert now["made"]["exit"] == 0, [e.get("error") for e in now["layouts"]]
    assert now["sglang"] == then["sglang"] and now["config_sha256"] == then["config_sha256"]
    assert [(e["tp"], e["ep"]) for e in now["layouts"]] == [(e["tp"], e["ep"]) for e in then["layouts"]]
    for a, b in zip(now["layouts"], then["layouts"]):
        assert {k: (c["bytes"], c["dtypes"]) for k, c in a["classes"].items()} == \
            {k: (c["bytes"], c["dtypes"]) for k, c in b["classes"].items()}, (a["tp"], a["ep"])
        assert a["local_experts"] == b["local_experts"]


@pytest.mark.slow
# The MTP draft's census of seven layouts in the rehearsal image: 20 s of imports, then 0.1 s a layout (2026-12-06).
@pytest.mark.timeout(1800)
def test_the_drafts_census_rerun_in_the_image_is_the_recorded_one(rehearsal_image, tmp_path):
    now = census.run_in_image(rehearsal_image, census.config_in_use(None), tmp_path, draft="mtp")
    then = census.load(DRAFT_RECORDED)
    assert now["made"]["exit"] == 0, [e.get("error") for e in now["layouts"]]
    assert now["draft"] == then["draft"] == "mtp" and now["config_sha256"] == then["config_sha256"]
    assert [(e["tp"], e["ep"]) for e in now["layouts"]] == [(e["tp"], e["ep"]) for e in then["layouts"]]
    for a, b in zip(now["layouts"], then["layouts"]):
        assert a["architecture"] == b["architecture"] == "DeepseekV4ForCausalLMNextN"
        assert {k: (c["bytes"], c["dtypes"]) for k, c in a["classes"].items()} == \
            {k: (c["bytes"], c["dtypes"]) for k, c in b["classes"].items()}, (a["tp"], a["ep"])
