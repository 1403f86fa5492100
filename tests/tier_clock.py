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


# How many of the longest tests a record keeps (setup, call and teardown together): enough to see which
# test of a long module is its length, without a line per test of the whole tier.
LONGEST_TESTS_KEPT = 40


def cpu_ticks() -> tuple[int, int] | None:
    """(busy, total) jiffies of all cores since boot; None off Linux. Two readings give how busy the
    machine was between them: whether a tier waits on its containers (cores idle: room for another
    worker) or on the CPU (none)."""
    return _read(Path("/proc/stat"))


def _read(stat: Path) -> tuple[int, int] | None:
    """The kernel's `cpu` line of /proc/stat: idle and iowait are not busy."""
    try:
        fields = [int(v) for v in stat.read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


@dataclass
class TierClock:
    tier: str
    started: float = field(default_factory=time.monotonic)
    modules: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    per_test: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    # When each module's first report came, in seconds since the tier began: with the modules' lengths,
    # the tier's timeline (which module started late, which worker sat idle at the end).
    first_seen: dict[str, float] = field(default_factory=dict)
    cpu_at_start: tuple[int, int] | None = field(default_factory=cpu_ticks)
    tests: int = 0

    def add(self, nodeid: str, when: str, seconds: float) -> None:
        module = nodeid.split("::", 1)[0]
        self.modules[module] += seconds
        self.per_test[nodeid] += seconds
        self.first_seen.setdefault(module, round(time.monotonic() - self.started - seconds, 1))
        if when == "call":
            self.tests += 1

    def cpu_busy(self) -> float | None:
        now = cpu_ticks()
        if self.cpu_at_start is None or now is None or now[1] == self.cpu_at_start[1]:
            return None
        return round((now[0] - self.cpu_at_start[0]) / (now[1] - self.cpu_at_start[1]), 3)

    def record(self) -> dict:
        longest = sorted(self.per_test.items(), key=lambda kv: -kv[1])[:LONGEST_TESTS_KEPT]
        return {"phase": f"tier:{self.tier}", "seconds": round(time.monotonic() - self.started, 1),
                "tests": self.tests, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "cpu_busy": self.cpu_busy(),
                "modules": {path: round(s, 1) for path, s in sorted(self.modules.items(), key=lambda kv: -kv[1])},
                "started": dict(sorted(self.first_seen.items(), key=lambda kv: kv[1])),
                "longest_tests": {nodeid: round(s, 1) for nodeid, s in longest}}


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
