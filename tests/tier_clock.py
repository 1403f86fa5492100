"""The tier clock: how long a test tier took, module by module, recorded and held to the recorded table.

CI's 90 minutes are the budget every later change spends, so each tier of `make test` measures itself
(wall time, and each module's time on its worker: under `--dist loadfile` a module runs on one worker,
so the sum of its tests' setup, call and teardown is its share of that worker) and:

- appends one JSON line to the file named by BUNDLE_CI_RECORD, when set (`benchmarks/ci_phases.py`
  sets it around a whole `.ci/run`, with the other phases' lines, and renders the table docs/testing.md
  keeps);
- compares the tier's wall time with the recorded figure in benchmarks/ci_baseline.json and prints one
  line: the figure against the record, and a warning naming the modules that grew most when the tier is
  over the record by more than the margin. It never fails the run: a slow neighbour on a shared machine
  is not a red test, but a change that adds minutes is seen in the run that adds them.

The tier's name comes from BUNDLE_TIER (the Makefile sets `fast` and `docker`); without it nothing is
compared or recorded.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

BASELINE = Path(__file__).resolve().parents[1] / "benchmarks" / "ci_baseline.json"


@dataclass
class TierClock:
    tier: str
    started: float = field(default_factory=time.monotonic)
    modules: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    tests: int = 0

    def add(self, nodeid: str, when: str, seconds: float) -> None:
        self.modules[nodeid.split("::", 1)[0]] += seconds
        if when == "call":
            self.tests += 1

    def record(self) -> dict:
        return {"phase": f"tier:{self.tier}", "seconds": round(time.monotonic() - self.started, 1),
                "tests": self.tests, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "modules": {path: round(s, 1) for path, s in sorted(self.modules.items(), key=lambda kv: -kv[1])}}


def load_baseline(path: Path = BASELINE) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def compare(record: dict, baseline: dict) -> list[str]:
    """The lines to print for a tier's record against the recorded table: one always (the figure and
    the record), and a warning with the modules that grew most when the tier is over by the margin."""
    tier = record["phase"].split(":", 1)[1]
    recorded = baseline.get("tiers", {}).get(tier)
    took = record["seconds"]
    if not recorded:
        return [f"tier clock: the {tier} tier took {took / 60:.1f} min ({record['tests']} tests); "
                f"no recorded figure for it in {BASELINE.name}"]
    margin = float(baseline.get("margin", 0.25))
    over = took / recorded["seconds"] - 1
    lines = [f"tier clock: the {tier} tier took {took / 60:.1f} min ({record['tests']} tests) against "
             f"{recorded['seconds'] / 60:.1f} min recorded ({recorded.get('measured', 'undated')}, "
             f"{recorded.get('tests', '?')} tests)"]
    if over > margin:
        before = recorded.get("modules", {})
        grown = sorted(((s - before.get(path, 0.0), path) for path, s in record["modules"].items()), reverse=True)
        named = ", ".join(f"{path} +{delta:.0f} s" for delta, path in grown[:5] if delta > 0)
        lines.append(f"WARNING: the {tier} tier is {over:.0%} over its recorded time (margin {margin:.0%}, "
                     f"benchmarks/{BASELINE.name}); grown most: {named or 'no single module'}. "
                     "Refresh the table with `python benchmarks/ci_phases.py` if the growth is meant.")
    return lines


def append_record(record: dict) -> None:
    path = os.environ.get("BUNDLE_CI_RECORD")
    if path:
        with open(path, "a") as out:
            out.write(json.dumps(record) + "\n")
