"""Reading outside text (bundle/log_lines.py): no log line can break the readiness wait.

The data is real: `docker logs --timestamps` of a container that printed tqdm's own bars (one of them
~70 KB before its newline, which Docker's 16 KB log buffer flushed as several stamped pieces), ANSI
colours, a form feed and a last line without its newline (tests/data/logs/capture_progress_log.py).
On landed main 17abb57 the wait died on such a log: `splitlines()` cut a bar at its "\\r", and the
bar's first word ("Multi-thread") was kept as a timestamp.
"""

from __future__ import annotations

import ast
from datetime import datetime, timezone
from pathlib import Path

import pytest

from bundle import log_lines
from bundle.log_lines import LineSplitter, parse_stamp
from bundle.stack import milestones

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "logs"
CAPTURED = (DATA / "progress-bar.timestamps.log").read_bytes().decode()


def test_the_captured_log_is_what_broke_the_wait():
    """The data holds what the issue describes: stamped pieces inside one line, "\\r" rewrites, a line
    without its newline, and splitlines() turning a bar's words into a line of its own."""
    assert "\r" in CAPTURED and "\x0c" in CAPTURED and "\x1b[" in CAPTURED
    assert not CAPTURED.endswith("\n")
    naive_firsts = [raw.partition(" ")[0] for raw in CAPTURED.splitlines()]
    assert any(word.startswith("Multi-thread") for word in naive_firsts)
    assert any(parse_stamp(word) is None for word in naive_firsts)


def test_every_line_of_the_real_log_is_read_with_its_stamp_and_its_last_state():
    read = log_lines.stamped_lines(CAPTURED)
    assert len(read) == CAPTURED.count("\n") + 1  # "\n" only: nine lines, not 760
    assert all(line.stamp is not None for line in read)
    assert [line.complete for line in read] == [True] * (len(read) - 1) + [False]
    bars = [line.text for line in read if "|" in line.text and "it/s" in line.text]
    assert any(text.startswith("Multi-thread loading shards: 100%") for text in bars)
    assert any("700/700" in text for text in bars)  # the 70 KB bar's final state, across its pieces
    assert any("\x0c" in line.text for line in read)  # a form feed is text, not a line break
    stamps = [line.stamp for line in read]
    assert stamps == sorted(stamps)


def test_milestones_and_fatal_lines_read_from_the_real_log():
    table = milestones.SERVER_MILESTONES
    reached = max(milestones.reached(line.text, table) for line in log_lines.stamped_lines(CAPTURED))
    assert table[reached][0] == "serving"
    colour = next(line.text for line in log_lines.stamped_lines(CAPTURED) if "Load weight end" in line.text)
    assert milestones.clean(colour).startswith("[2026-12-05 10:11:40] Load weight end")


class _GrowingLog:
    """`docker logs --timestamps [--since]` over the captured log as it was being written: each
    call shows more of it, cut anywhere (inside a bar, inside a stamp), and `since` keeps the
    entries at or after it as the daemon does (whole microseconds, bound included)."""

    def __init__(self, text: str, step: int):
        self.text, self.step, self.shown = text, step, 0

    def logs(self, _name, *, timestamps: bool, since: datetime | None = None) -> str:
        assert timestamps
        self.shown = min(len(self.text), self.shown + self.step)
        visible = self.text[:self.shown]
        if since is None:
            return visible
        kept = []
        for raw in visible.split("\n"):
            stamp = parse_stamp(raw.partition(" ")[0])
            if stamp is None or stamp.instant >= since:
                kept.append(raw)
        return "\n".join(kept)


@pytest.mark.parametrize("step", [1, 97, 4096, 16384])
def test_a_readiness_wait_polling_a_log_mid_bar_reaches_the_last_milestone(step):
    """Polls that land anywhere in the log (inside a bar, inside a flushed 16 KB piece, inside a
    stamp) never raise, never move `since` to a non-stamp, and the wait sees the server serving."""
    from types import SimpleNamespace

    from bundle.stack.docker import Stack
    from bundle.stack.ready import LogProgress

    stack = Stack.__new__(Stack)
    growing = _GrowingLog(CAPTURED, step if step > 1 else 997)
    stack._docker = SimpleNamespace(container=growing)
    progress = LogProgress(stack)
    while growing.shown < len(CAPTURED):
        progress.update("p-decode-1", "decode")
        assert all(isinstance(s, log_lines.Stamp) for s in progress._since.values())
    progress.update("p-decode-1", "decode")
    assert progress.milestone("decode") == "serving"


def test_a_stamp_is_taken_only_when_it_parses_as_one():
    assert parse_stamp("Multi-thread") is None
    assert parse_stamp("Mul") is None
    assert parse_stamp("2026-13-05T10:11:12.123456789Z") is None  # shaped like one, not one
    nano = parse_stamp("2026-12-05T10:11:12.123456789Z")
    short = parse_stamp("2026-12-05T10:11:12.1234561Z")
    assert nano is not None and short is not None and short < nano  # numeric, not string, order
    offset = parse_stamp("2026-12-05T11:11:12+01:00")
    assert offset is not None and offset.as_datetime() == datetime(2026, 12, 5, 10, 11, 12, tzinfo=timezone.utc)


def test_a_line_without_a_stamp_is_text_and_says_so_under_debug(monkeypatch, capsys):
    monkeypatch.setenv("BUNDLE_DEBUG", "1")
    read = log_lines.stamped_lines("Multi-thread loading shards: 3%\n")
    assert read[0].stamp is None and read[0].text == "Multi-thread loading shards: 3%"
    assert "without a timestamp" in capsys.readouterr().err


def test_only_newline_ends_a_line():
    text = "a\x0bb\x0cc\x1cd\x1de\x1ef\x85g\u2028h\n" + "bar 1%\rbar 50%\rbar 100%\r\n" + "tail"
    assert log_lines.lines(text) == ["a\x0bb\x0cc\x1cd\x1de\x1ef\x85g\u2028h", "bar 100%", "tail"]


def test_a_multiplexed_line_keeps_its_prefix_at_its_last_state():
    line = "pd-decode-1  | \rLoading 1/3\rLoading 3/3"
    assert log_lines.prefixed_last_state(line) == "pd-decode-1  | Loading 3/3"
    assert log_lines.last_state(line) == "Loading 3/3"


def test_lines_come_whole_whatever_the_chunks():
    data = "première ligne\nbar 1%\rbar 100%\nfin sans retour".encode()
    for size in (1, 2, 3, 7, len(data)):
        splitter = LineSplitter()
        out = []
        for start in range(0, len(data), size):
            out += splitter.feed(data[start:start + size])
        out += splitter.flush()
        assert out == ["première ligne", "bar 100%", "fin sans retour"], size


# Modules that read container or process output: every line of it goes through bundle.log_lines.
READERS = ("bundle/stack", "bundle/slurm", "bundle/verify", "bundle/service", "bundle/commands/logs.py")


def splitlines_calls(root: Path) -> list[str]:
    found = []
    for reader in READERS:
        base = root / reader
        for path in ([base] if base.is_file() else sorted(base.rglob("*.py"))):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                        and node.func.attr == "splitlines":
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_no_reader_of_outside_output_splits_it_with_splitlines():
    assert splitlines_calls(ROOT) == []


def test_the_splitlines_check_fails_on_a_planted_reader(tmp_path):
    for reader in READERS:
        target = tmp_path / reader
        if reader.endswith(".py"):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("")
        else:
            target.mkdir(parents=True, exist_ok=True)
    (tmp_path / "bundle/stack/planted.py").write_text(
        "def read(text):\n    return [l.partition(' ') for l in text.splitlines()]\n")
    assert splitlines_calls(tmp_path) == ["bundle/stack/planted.py:2"]


def test_the_server_arguments_dump_is_no_warm_up_milestone():
    """SGLang prints its arguments (`skip_server_warmup=False`) before it loads weights: that line is no
    milestone, so the wait still shows "loading weights" when the load begins."""
    table = milestones.SERVER_MILESTONES
    dump = "[2026-12-06 01:35:10] server_args=ServerArgs(model_path='/model', skip_server_warmup=False, ...)"
    assert milestones.reached(dump, table) == -1
    assert table[milestones.reached("[x] Running warmup decode", table)][0] == "warming up"
    assert table[milestones.reached("[x] Start of pd disaggregation warmup ...", table)][0] == "warming up"
