"""An image build's log condensed to progress a person can follow: one line per Dockerfile step
(`[step n/m]`, what it runs, the elapsed time), `cached` / `done in` as each ends, the bytes of the
context sent and of layers pulled, and a `still running` line with the step's last output whenever
a long step has been quiet for a while, in the style of `docker build --progress plain`, condensed.

Plain lines only, never a live display: the same text reads well on a terminal and in a CI log.
It understands BuildKit's plain progress (buildx, or the engine's BuildKit with --progress plain)
and the legacy builder's `Step n/m : ...` lines.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from typing import Callable

HEARTBEAT_S = 30.0  # a step quiet this long gets a "still running" line
_WIDTH = 90  # a step's command or output line is cut to this many characters

# BuildKit plain progress: "#7 [builder 3/9] RUN pip install ..." (stage name optional).
# The step number is padded to the total's width: "[ 3/10]", "[stage-1  3/10]".
_BK_STEP = re.compile(r"^#(\d+) \[(?:([\w.-]+)\s+)?\s*(\d+)/(\d+)\] (.+)$")
_BK_END = re.compile(r"^#(\d+) (?:DONE ([\d.]+)s|(CACHED)|ERROR:? ?(.*))$")
_BK_OUTPUT = re.compile(r"^#(\d+) [\d.]+ (.*)$")  # what a RUN prints, after its timestamp
_BK_EXPORT = re.compile(r"^#(\d+) exporting to (?:image|docker image format|oci image format)")
_BK_CONTEXT_VERTEX = re.compile(r"^#(\d+) \[internal\] load build context$")
_BK_CONTEXT = re.compile(r"^#(\d+) transferring context: ([\d.]+[kMG]?B) [\d.]+s done$")
_BK_PULL = re.compile(r"^#\d+ (sha256:[0-9a-f]{12})[0-9a-f]* ([\d.]+[kMG]?B) / ([\d.]+[kMG]?B) [\d.]+s done$")
# The legacy builder: "Step 3/9 : RUN pip install ...".
_LEGACY_STEP = re.compile(r"^Step (\d+)/(\d+) : (.+)$")


def _clock_text(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _WIDTH else text[:_WIDTH - 3] + "..."


@dataclass
class _Step:
    label: str  # "step 3/9" or "step builder 3/9", "export"
    what: str
    started: float
    last_output: str = ""
    announced: bool = False


class BuildProgress:
    """Feed it the build's log lines (`feed`), call `heartbeat` every few seconds (a thread does,
    see `beating`), and `finish` at the end; it calls `emit` with each condensed line."""

    def __init__(self, emit: Callable[[str], None], *, name: str, clock: Callable[[], float] = time.monotonic,
                 heartbeat_s: float = HEARTBEAT_S):
        self._emit_raw = emit
        self.name = name
        self._clock = clock
        self._heartbeat_s = heartbeat_s
        self._start = clock()
        self._last_emit = self._start
        self._steps: dict[str, _Step] = {}  # BuildKit vertex (or legacy step number) -> step
        self._pending: str | None = None  # a step seen starting, not announced yet (it may be CACHED)
        self._current: str | None = None  # the step whose output came last
        self._context_vertex: str | None = None  # BuildKit's "load build context"
        self._lock = threading.Lock()
        self.cached = 0
        self.done = 0

    def _emit(self, text: str) -> None:
        self._last_emit = self._clock()
        self._emit_raw(f"{self.name}: {text} ({_clock_text(self._last_emit - self._start)} elapsed)")

    def _announce_pending(self) -> None:
        if self._pending is not None:
            step = self._steps[self._pending]
            step.announced = True
            self._emit(f"[{step.label}] {step.what}")
            self._pending = None

    def feed(self, line: str) -> None:
        with self._lock:
            self._feed(line.rstrip())

    def _feed(self, line: str) -> None:
        if m := _BK_STEP.match(line):
            vertex, stage, n, total, what = m.groups()
            if vertex not in self._steps:
                self._announce_pending()
                label = f"step {stage + ' ' if stage else ''}{n}/{total}"
                self._steps[vertex] = _Step(label, _cut(what), self._clock())
                self._pending = vertex
            self._current = vertex
            return
        if m := _BK_EXPORT.match(line):
            vertex = m.group(1)
            if vertex not in self._steps:
                self._announce_pending()
                self._steps[vertex] = _Step("export", "writing the image", self._clock())
                self._pending = vertex
            self._current = vertex
            return
        if m := _BK_END.match(line):
            vertex, seconds, cached, error = m.groups()
            step = self._steps.get(vertex)
            if step is None:
                return  # an internal vertex (load build definition, metadata): not a step
            if cached and self._pending == vertex:
                self._pending = None
                self.cached += step.label.startswith("step")
                self._emit(f"[{step.label}] cached  {step.what}")
                return
            self._announce_pending()
            if error is not None:
                self._emit(f"[{step.label}] FAILED {step.what}: {_cut(error or step.last_output)}")
            elif seconds is not None:
                self.done += step.label.startswith("step")
                if float(seconds) >= 1.0:  # a quick step's start line says enough
                    self._emit(f"[{step.label}] done in {_clock_text(float(seconds))}")
            return
        if m := _BK_CONTEXT_VERTEX.match(line):
            self._context_vertex = m.group(1)
            return
        if (m := _BK_CONTEXT.match(line)) and m.group(1) == self._context_vertex:
            self._announce_pending()
            self._emit(f"build context sent: {m.group(2)}")
            return
        if m := _BK_PULL.match(line):
            self._announce_pending()
            self._emit(f"pulled layer {m.group(1)}: {m.group(3)}")
            return
        if m := _BK_OUTPUT.match(line):
            step = self._steps.get(m.group(1))
            if step is not None and m.group(2).strip():
                self._announce_pending()
                step.last_output = m.group(2)
                self._current = m.group(1)
            return
        if m := _LEGACY_STEP.match(line):
            n, total, what = m.groups()
            self._announce_pending()
            self.done += 1
            key = f"legacy-{n}"
            self._steps[key] = _Step(f"step {n}/{total}", _cut(what), self._clock(), announced=True)
            self._current = key
            self._emit(f"[step {n}/{total}] {_cut(what)}")
            return
        if line.strip() == "---> Using cache":
            self.cached, self.done = self.cached + 1, self.done - 1
            return
        if self._current is not None and line.strip() and not line.startswith("#"):
            # The legacy builder's step output (" ---> Running in ...", pip's lines).
            step = self._steps.get(self._current)
            if step is not None and not line.startswith(" --->"):
                step.last_output = line

    def heartbeat(self) -> None:
        """A `still running` line when nothing was said for a while: a long step never looks hung."""
        with self._lock:
            now = self._clock()
            if now - self._last_emit < self._heartbeat_s:
                return
            self._announce_pending()
            step = self._steps.get(self._current) if self._current else None
            if step is None:
                self._emit("still working")
                return
            tail = f": {_cut(step.last_output)}" if step.last_output else ""
            self._emit(f"[{step.label}] still running, {_clock_text(now - step.started)} in this step{tail}")

    def finish(self, ok: bool = True) -> None:
        with self._lock:
            self._announce_pending()
            if ok:
                self._emit(f"built: {self.done} steps run, {self.cached} cached")

    def beating(self, every_s: float = 5.0) -> "_Beat":
        """A context manager running `heartbeat` in a daemon thread every `every_s` seconds."""
        return _Beat(self, every_s)


class _Beat:
    def __init__(self, progress: BuildProgress, every_s: float):
        self._progress = progress
        self._every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            self._progress.heartbeat()

    def __enter__(self) -> BuildProgress:
        self._thread.start()
        return self._progress

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=1)
