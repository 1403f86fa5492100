"""The image audit's predicted choices for a dspark config: SGLang 0.5.23's own ServerArgs post-init,
run inside the stand-in image with the platform reported as sm_120, on a 0731-like model folder (the
shipped DeepSeek-V4-Flash config.json plus SGLang's marks of a bundled DSpark draft, block size 5).
What SGLang resolves is what the rehearsal's simulator restates (bundle/rehearsal/simulator/resolve.py)."""

from __future__ import annotations

import json
import subprocess

import pytest

from bundle.rehearsal.simulator.resolve import resolve_like_sglang
from tests.conftest import REPO

pytestmark = pytest.mark.docker

SHIPPED = REPO / "bundle" / "images" / "audit" / "deepseek_v4_flash" / "config.json"


@pytest.mark.slow
# 20 s (2026-12-03, its audit image already built by the session's other audits).
@pytest.mark.timeout(1500)
def test_the_audit_predicts_dspark_with_the_drafts_block_size_from_sglangs_own_post_init(tmp_path, standin_chain):
    image = standin_chain["image"]
    folder = tmp_path / "DeepSeek-V4-Flash-0731"
    folder.mkdir()
    config = json.loads(SHIPPED.read_text()) | {"dspark_block_size": 5, "dspark_markov_rank": 1}
    (folder / "config.json").write_text(json.dumps(config))
    bundle_yaml = tmp_path / "bundle.yaml"
    bundle_yaml.write_text(f"model: {{path: {folder}}}\nlevers: {{speculative: dspark}}\n")
    # Only the ServerArgs section: SGLang's import is most of its minutes.
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "bundle"), "audit", "--image", image, "-c", str(bundle_yaml),
                           "--only", "predicted", "--json"], cwd=REPO, capture_output=True, text=True,
                          timeout=1400, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    predicted = json.loads(proc.stdout)["predicted"]
    for server in ("tp4/server", "dp/replica-0"):
        got = predicted[server]
        # _handle_dspark: the draft bundled in the checkpoint, one step, top-k 1, gamma from the draft's
        # config (5, not SGLang's default 7), verify window gamma + 1.
        assert got["speculative_algorithm"] == "DSPARK", got
        assert got["speculative_draft_model_path"] == "/model"
        assert (got["speculative_num_steps"], got["speculative_eagle_topk"], got["speculative_num_draft_tokens"]) \
            == (1, 1, 6)
        assert got["attention_backend"] == "dsv4" and got["moe_runner_backend"] == "flashinfer_mxfp4"
    # The rehearsal's simulator restates the same resolution.
    simulated, _ = resolve_like_sglang({"speculative_algorithm": "DSPARK", "model_path": "/model"}, config)
    assert {k: simulated[k] for k in ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
                                      "speculative_draft_model_path")} == \
        {k: predicted["tp4/server"][k] for k in ("speculative_num_steps", "speculative_eagle_topk",
                                                  "speculative_num_draft_tokens", "speculative_draft_model_path")}
