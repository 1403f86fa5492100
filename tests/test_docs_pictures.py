"""The guides' pictures are drawn when the site is built (docsgen/pictures.py): the topologies from the
registry and the configuration, the image chain from the layer registry `bundle build` walks, a
sequence of steps from the page's own text. Each follows its source; a bad picture block fails the
build."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from bundle import topology as registry
from bundle.config.loader import load_config
from bundle.images.build import LAYERS
from docsgen import dashboard_picture, image_chain_picture, pictures, steps_picture, topology_picture
from tests.conftest import write_config


def _texts(svg: str) -> list[str]:
    return re.findall(r"<text[^>]*>([^<]*)</text>", svg)


def test_the_topologies_picture_draws_every_topology_of_the_registry_with_its_servers_and_gpus():
    html = pictures.render("topologies")
    dep = load_config(None)
    assert html.count("<figure>") == len(registry.TOPOLOGIES)
    for name, figure in zip(registry.TOPOLOGIES, html.split("<figure>")[1:]):
        topology = registry.get(name)
        texts = _texts(figure)
        assert name in texts and topology.summary[:20] in " ".join(texts)
        for role in dep.roles(topology):
            assert f"{role.name}: TP {role.tp_size}" in texts
        assert ("router (smg)" in " ".join(texts)) == topology.has_router
        assert any(t.startswith("KV cache") for t in texts) == topology.disaggregated
    pd = html.split("<figure>")[1 + list(registry.TOPOLOGIES).index("pd")]
    assert f"KV cache, prefill to decode: {dep.section('pd').transfer_backend}" in _texts(pd)


def test_a_changed_configuration_redraws_the_topology(tmp_path):
    config = write_config(tmp_path, "pd:\n  prefill: {gpus: [0, 1], tp_size: 2}\n  decode: {gpus: [2, 3], tp_size: 2}\n"
                                    "  router: {policy: cache_aware}\nnetwork: {front_port: 31000}\n")
    dep = load_config(config)
    texts = _texts(topology_picture.picture(registry.get("pd"), dep))
    assert {"prefill: TP 2", "decode: TP 2", "port 31000", "policy: cache_aware"} <= set(texts)
    assert "one host, 8 GPUs (4 idle)" in texts  # dp still spans all eight


def test_the_image_chain_follows_the_layer_registry():
    texts = _texts(image_chain_picture.picture())
    assert [t.split(". ", 1)[1] for t in texts if re.match(r"\d\. ", t)] == [layer.name for layer in reversed(LAYERS)]
    planted = (*LAYERS, replace(LAYERS[-1], name="planted", holds="a layer planted by the test"))
    texts = _texts(image_chain_picture.picture(planted))
    assert f"{len(planted)}. planted" in texts and "a layer planted by the test" in texts


def test_steps_come_from_the_page_text_and_a_bad_block_is_refused():
    svg = steps_picture.picture("validate: the config\nup: compose up", "What launch does", "steps-launch")
    assert ["1. validate", "the config", "2. up", "compose up"] == _texts(svg)
    assert 'aria-label="What launch does"' in svg
    with pytest.raises(ValueError, match="name: what happens"):
        steps_picture.parse("validate the config")
    with pytest.raises(ValueError, match="unknown picture"):
        pictures.render("planted")


@pytest.mark.slow
def test_a_bad_picture_block_fails_the_strict_build(tmp_path):
    from tests.docs_site_build import build_site, copy_checkout

    copy = copy_checkout(tmp_path / "checkout")
    page = copy / "docs/testing.md"
    page.write_text(page.read_text() + "\n```picture\nplanted\n```\n")
    with pytest.raises(AssertionError, match="picture block 'planted': unknown picture 'planted'"):
        build_site(copy, tmp_path / "site")


def test_the_dashboard_picture_is_the_provisioned_dashboards_layout():
    from bundle.monitoring.dashboards import ROWS, dashboard
    from docsgen import dashboard_picture

    svg = dashboard_picture.picture()
    texts = _texts(svg)
    for row_title, panels in ROWS:
        assert row_title in texts
        assert all(any(t.startswith(p.title[:20]) for t in texts) for p in panels)
    assert "sglang:kv_transfer_speed_gb_s_bucket" in svg and "smg_worker_health" in svg
    model = dashboard()
    model["panels"].append({"type": "timeseries", "title": "Planted panel", "gridPos": {"x": 0, "y": 70, "w": 8, "h": 8},
                            "targets": [{"expr": "rate(planted_metric_total[5m])"}]})
    planted = dashboard_picture.picture(model)
    assert "Planted panel" in _texts(planted) and "planted_metric_total" in planted


def test_the_bench_picture_is_bundle_benchs_own_plot_of_the_figures_in_the_block():
    from docsgen import bench_picture

    source = "bench tp4 256/256 original deployment\n1: output_throughput=10.22 mean_tpot_ms=94.13\n8: output_throughput=24"
    record = bench_picture.record(source)
    assert record["levels"] == [{"concurrency": 1, "metrics": {"output_throughput": 10.22, "mean_tpot_ms": 94.13}},
                                {"concurrency": 8, "metrics": {"output_throughput": 24.0}}]
    svg = pictures.render(source)
    assert svg.startswith('<div class="pictures"><figure><div class="picture-box"><svg') and \
        "output throughput (tok/s)" in svg
    # The title says which run (a quoted run has no start time: an empty one left "256 out, ").
    assert "bench tp4: 256 in / 256 out, original deployment</text>" in svg.replace("\n", "")
    captioned = pictures.render(source + "\ncaption: the original deployment's `tp4` run")
    assert captioned.endswith("</svg>\n</div><figcaption>the original deployment&#x27;s <code>tp4</code> run"
                              "</figcaption></figure></div>")
    with pytest.raises(ValueError, match="C: metric=value"):
        bench_picture.record("bench tp4 256/256 x\neight: output_throughput=1")


def test_a_picture_keeps_its_smallest_text_legible():
    """Scaled to a phone's column the dashboard's 10 px names were 4.9 px: each picture gets a min-width
    that keeps its smallest text at LEGIBLE_PX (wider than the column, it scrolls in its box)."""
    svg = '<svg viewBox="0 0 1000 100" width="750pt"><text font-size="6">x</text><text font-size="12">y</text></svg>'
    # 750 pt = 1000 px for 1000 units: the 6-unit text is 6 px; 8 px needs 8/6 of the width.
    assert 'style="min-width: 1333px"' in pictures.legible(svg)
    assert 'style="min-width: 160px"' in pictures.legible('<svg viewBox="0 0 400 50" width="400"><text font-size="20"/></svg>')


def test_the_dashboard_cuts_no_label():
    """Every panel's title and every metric name whole (7 of 49 ended in "..." when each had one line:
    `sglang:request_time_per_output_toke...`); a long one goes on, indented, on the next line."""
    from bundle.monitoring.dashboards import dashboard
    from docsgen.monitoring import metric_names

    texts = [t.strip() for t in _texts(dashboard_picture.picture())]
    assert not [t for t in texts if t.endswith(("\u2026", "..."))]
    joined = "".join(texts)
    model = dashboard()
    names = {n for p in model["panels"] for t in p.get("targets", []) for n in metric_names(t["expr"])}
    titles = {p["title"].replace(" ", "") for p in model["panels"]}
    assert "sglang:request_time_per_output_token_seconds_bucket" in names
    assert [n for n in names if n not in joined] == []
    assert [t for t in titles if t not in joined.replace(" ", "")] == []
