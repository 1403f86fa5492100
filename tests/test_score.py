"""`bundle score` (bundle/commands/score.py, bundle/service/score.py): a figure measured elsewhere scored
without a GPU against the bench's own floor and verdict; bad input named before anything is computed."""

from __future__ import annotations

import json

import pytest

from bundle.cli import main
from bundle.errors import InputError
from bundle.service import score as scorer

SERVER = "NVIDIA RTX PRO 6000 Blackwell Server Edition"


def test_the_seeds_run_reads_far_with_the_profile_free_causes_in_a_sensible_order(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # one line per verdict line
    assert main(["score", "--gpu", SERVER, "--tp", "4", "-C", "1", "--tpot-ms", "94.13", "--cuda-graphs",
                 "--label", "seeds"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.strip()]
    headline = next(line for line in lines if line.startswith("C=1:"))
    assert headline.startswith("C=1: far from the floor") and "(24.6x)" in headline
    assert "collectives 1.23 ms (88 x 14 us)" in out
    causes = [line.split(":")[0].strip() for line in lines if line.strip()[:3] in ("1. ", "2. ", "3. ", "4. ")]
    assert causes[0] == "1. fallback kernels"  # the seeds' own cause, first; CUDA graphs were on: no eager mode
    assert not any("eager" in c for c in causes)


def test_a_throughput_becomes_a_tpot_and_the_public_ep_run_is_scored_on_its_busiest_rank():
    scored = scorer.score(scorer.ScoreRequest(gpu=SERVER, tp=4, ep=4, concurrency=1, input_len=256, output_len=256,
                                              output_tok_s=115.6, speculative="dspark", power_limit_w=275))
    assert scored.tpot_ms == pytest.approx(1000 / 115.6) and "upper bound" in scored.tpot_from
    assert scored.limit["layout"] == "TP4/EP4" and scored.limit["experts_read"] == pytest.approx(2.79, abs=0.02)
    names = [c["name"] for c in scored.limit["verdict"]["causes"]]
    assert "power cap" in names and "speculative acceptance unknown" in names
    assert scored.limit["verdict"]["acceptance_unknown"]


def test_json_output_is_the_scored_figure(capsys):
    assert main(["score", "--gpu", SERVER, "--tp", "8", "-C", "8", "--tok-s", "24", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["layout"] == "TP8" and data["limit"]["verdict"]["band"] == "far"
    assert data["limit"]["parts"]["collectives"] == 88


@pytest.mark.parametrize("request_, words", [
    (dict(gpu="NVIDIA GeForce GTX 480"), "no figures for the GPU 'NVIDIA GeForce GTX 480'"),
    (dict(tp=3), "--tp 3: a power of two"),
    (dict(ep=2), "--ep 2: 1 (off) or the TP size"),
    (dict(tpot_ms=None), "exactly one of --tpot-ms and --tok-s"),
    (dict(tpot_ms=-1.0), "positive"),
    (dict(model_config="/nonexistent/config.json"), "/nonexistent/config.json: no such file"),
])
def test_bad_input_is_named_before_anything_is_computed(request_, words):
    base = dict(gpu=SERVER, tp=4, concurrency=1, input_len=256, output_len=256, tpot_ms=10.0)
    with pytest.raises(InputError, match=words.replace("(", r"\(").replace(")", r"\)")):
        scorer.score(scorer.ScoreRequest(**(base | request_)))


def test_a_topology_gives_the_decoding_servers_layout():
    layout = scorer.topology_layout("dp", None)
    assert layout.tp == 4 and layout.servers == 2 and layout.ep == 1
    assert scorer.ep_of(("--ep-size", "4")) == 4 and scorer.ep_of(("--ep=8",)) == 8 and scorer.ep_of(()) == 1


def test_a_config_or_attestation_that_is_not_one_is_named(tmp_path):
    (tmp_path / "config.json").write_text("[1, 2]")
    base = dict(gpu=SERVER, tp=4, concurrency=1, input_len=256, output_len=256, tpot_ms=10.0)
    with pytest.raises(InputError, match="not a model's config.json"):
        scorer.score(scorer.ScoreRequest(**base, model_config=str(tmp_path)))
    with pytest.raises(InputError, match="not one `bundle launch` wrote"):
        scorer.score(scorer.ScoreRequest(**base, attestation={"findings": "x", "records": [1]}))
