"""docs/reading-a-bench.md against the cost model: the hand computation of DeepSeek-V4-Flash's bytes per
token agrees with the model within 10%, and the floors and public figures' MBU it tables are the model's."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from bundle.verify import cost_model as cm

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "reading-a-bench.md").read_text()
V4 = {"model_type": "deepseek_v4"}
EDITIONS = {"Server": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
            "Workstation": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"}


def rows(header_start: str) -> list[list[str]]:
    """The body rows of the first table whose header line starts with `header_start`."""
    lines = PAGE.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    out = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        out.append([cell.strip() for cell in line.strip("|").split("|")])
    return out


def number(text: str) -> float:
    return float(re.search(r"[\d,]+(?:\.\d+)?", text).group().replace(",", ""))


def test_the_hand_computed_bytes_per_token_agree_with_the_model_within_10_percent():
    written = float(re.search(r"Total: ([\d.]+) GB per token", PAGE).group(1)) * 1e9
    model = cm.step_cost(cm.model_shape(V4), cm.RunShape(1, 1, 256, 256)).weight_bytes
    assert abs(model - written) / written < 0.10
    hand = sum(number(r[2].split("=")[1]) for r in rows("| weights |") if "=" in r[2]) * 1e9
    assert hand == pytest.approx(written, rel=0.001)  # the table's rows add up to its total
    params = sum(number(r[1]) for r in rows("| weights |") if not r[0].startswith("**"))
    assert params == pytest.approx(cm.model_shape(V4).active_params(), rel=1e-6)


def test_the_floors_table_is_the_models():
    model = cm.model_shape(V4)
    replicas = {"tp4": 1, "pd (decode TP4)": 1, "dp (2 x TP4)": 2}
    table = rows("| topology | C |")
    assert len(table) == 6
    for topology, c, gb, floor_s, _, floor_w, _ in table:
        per = math.ceil(int(c) / replicas[topology])
        for edition, written in (("Server", floor_s), ("Workstation", floor_w)):
            score = cm.score(model, cm.RunShape(4, per, 256, 256), cm.gpu(EDITIONS[edition]), 1.0)
            assert score.floor_tpot_ms == pytest.approx(number(written), abs=0.006)
        assert score.bytes_per_gpu / 1e9 == pytest.approx(number(gb), abs=0.006)


def test_every_public_figure_is_in_the_page_with_the_models_mbu():
    runs = json.loads((ROOT / "tests/data/bench/public_figures.json").read_text())["runs"]
    table = rows("| run | TP | C |")
    assert len(table) == len(runs)
    model = cm.model_shape(V4)
    for run, row in zip(runs, table):
        assert row[0] == run["name"] and int(row[1]) == run["tp"] and int(row[2]) == run["concurrency"]
        tpot = run.get("tpot_ms") or 1000.0 * run["concurrency"] / run["output_tok_s"]
        for edition, cell in (("Server", row[5]), ("Workstation", row[6])):
            score = cm.score(model, cm.RunShape(run["tp"], run["concurrency"], 256, 256,
                                                draft_tokens=run["draft_tokens"]), cm.gpu(EDITIONS[edition]), tpot)
            assert score.mbu * 100 == pytest.approx(number(cell), abs=0.06)


def test_the_ranges_the_prose_quotes_are_the_tables():
    """The prose quotes the public figures' MBU as ranges: the near band's "sit at A-B%" (the runs at 45%
    and more in either edition) and "reach A-B% of the floor" (every run but the original deployment).
    Each range is the table's lowest cell rounded down to its highest rounded up."""
    table = rows("| run | TP | C |")
    cells = [number(cell) for row in table[1:] for cell in row[5:7]]
    near = [mbu for mbu in cells if mbu >= 45]

    def quoted(pattern: str) -> tuple[int, int]:
        low, high = re.search(pattern, PAGE).groups()
        return int(low), int(high)

    assert quoted(r"runs on these GPUs sit at (\d+)-(\d+)%") == (math.floor(min(near)), math.ceil(max(near)))
    assert quoted(r"neighbours on the same GPUs reach (\d+)-(\d+)% of the floor") == (
        math.floor(min(cells)), math.ceil(max(cells)))
