"""docs/reading-a-bench.md against the code: its scored tables are generated at build time from the offline
scorer and the cost model (docsgen/scored_figures.py), the page holds their markers, and the verdict it
shows for the seeds' run is the one `bundle score` prints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bundle.service import score as scorer
from bundle.verify import verdict
from docsgen import scored_figures

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "reading-a-bench.md").read_text()
SERVER = scored_figures.SERVER


def rows(markdown: str, header_start: str) -> list[list[str]]:
    """The body rows of the first table whose header line starts with `header_start`."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    out = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        out.append([cell.strip() for cell in line.strip("|").split("|")])
    return out


def test_the_page_holds_every_generated_table_and_the_build_fills_them():
    markers = re.findall(r"^<!-- generated: ([a-z-]+) -->$", PAGE, re.M)
    assert sorted(markers) == sorted(scored_figures.TABLES)
    built = scored_figures.expand(PAGE)
    assert "<!-- generated:" not in built
    with pytest.raises(ValueError, match="public-figures"):
        scored_figures.expand("<!-- generated: no-such-table -->")


def test_every_public_figure_is_tabled_with_its_configuration_and_the_seeds_read_far():
    built = scored_figures.expand(PAGE)
    table = rows(built, "| run | TP | EP |")
    runs = scored_figures.public_runs()
    assert len(table) == len(runs)
    for run, row in zip(runs, table):
        assert row[0] == run["name"] and int(row[1]) == run["tp"] and int(row[2]) == run["ep"]
        assert int(row[3]) == run["concurrency"] and row[4].startswith(run["speculative"])
        assert run["source"] in built
    assert all(r[4].endswith("(acceptance unknown)") for r in table if not r[4].startswith("none"))
    scores = rows(built, "| run | floor ms |")  # the second table: a row a run, in the same order
    assert [r[0] for r in scores] == [f"{run['name']} C={run['concurrency']}" for run in runs]
    seeds = scores[0]
    assert seeds[-1].startswith("far: fallback kernels")
    assert float(seeds[2].rstrip("%")) < 10  # the floor's speed share


def test_the_verdict_the_page_shows_for_the_seeds_is_the_one_bundle_score_prints():
    from tests.test_verdict import SEEDS_ATTESTATION

    scored = scorer.score(scorer.ScoreRequest(gpu=SERVER, tp=4, concurrency=1, input_len=256, output_len=256,
                                              tpot_ms=94.13, attestation=SEEDS_ATTESTATION))
    lines = scored.lines()
    block = PAGE[PAGE.index("## The verdict"):PAGE.index("| band |")]
    assert lines[0] in block and lines[1] in block
    for line in lines[2:]:
        shown = line.split(" ... ")[0] if " ... " in line else line
        assert any(b.strip().startswith(shown.strip()[:60]) for b in block.splitlines()), line
    assert verdict.band(scored.limit["floor_share"]) == "far"


def test_the_bytes_by_class_table_adds_up_and_matches_the_independent_count():
    built = scored_figures.expand(PAGE)
    table = rows(built, "| weight class |")
    total = table[-1]
    tp4 = float(total[5].strip("*"))
    tp8 = float(total[6].strip("*"))
    ep4 = float(total[7].strip("*"))
    # the issue's independent count of SGLang's model: about 4.14 GB at TP4, 2.72 at TP8, 4.88 on EP4's busiest rank
    assert (tp4, tp8, ep4) == pytest.approx((4.14, 2.72, 4.88), abs=0.02)
    body = [r for r in table if not r[0].startswith("**")]
    assert sum(float(r[5]) for r in body) == pytest.approx(tp4, abs=0.02)
