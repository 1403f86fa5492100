"""The run store: reports are data first, JSON and JSON lines under runs/.

- smoke: one JSON report per run, in that run's folder.
- bench: one JSON line per run appended to runs/<project>/bench.jsonl (the history the next run is
  compared with).
"""

from __future__ import annotations

import json
from pathlib import Path

from bundle.verify import comparable

BENCH_HISTORY = "bench.jsonl"


def write_json(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    return path


def append_jsonl(path: Path, record: dict) -> Path:
    """Append one line; the line is built first, so a crash never leaves half a record."""
    line = json.dumps(record, sort_keys=False) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+b") as fh:
        # An earlier write cut short left no newline: start on a fresh line, or this record would
        # be glued to the damaged one and lost with it.
        fh.seek(0, 2)
        if fh.tell() > 0:
            fh.seek(-1, 2)
            if fh.read(1) != b"\n":
                line = "\n" + line
        fh.write(line.encode())
    return path


def parse_jsonl(text: str) -> list[dict]:
    """Every JSON object line; a damaged line (an interrupted write) is skipped, not fatal."""
    records = []
    for line in text.split("\n"):  # "\n" only: a JSON string may hold \u2028, which splitlines() cuts at
        line = line.strip()
        if not line:
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            records.append(value)
    return records


def read_jsonl(path: Path) -> list[dict]:
    return parse_jsonl(path.read_text()) if path.is_file() else []


def previous_bench(history: list[dict], record: dict) -> dict | None:
    """The latest earlier run like `record` (topology, GPU or no-GPU mode, target, lengths) that
    measured at least one level: the only kind a percentage may be taken against."""
    return comparable.latest_alike(history, record)
