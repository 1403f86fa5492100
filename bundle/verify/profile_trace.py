"""A torch profiler Chrome trace (what SGLang's `/start_profile` writes, .json or .json.gz) reduced to
one decode step's time by kernel family (bundle/verify/kernel_families.py), with the idle gaps between
kernels.

Steps are SGLang's own spans: ModelRunner wraps each forward in `record_function("step[DECODE bs=N]")`
(sglang/srt/utils/profile_utils.py, build_step_span_name). The sampler runs after that span closes
(`layers/sampler.py`'s forward, called by the worker once the logits are out), so a step's window runs
on to the end of the sampler call that follows it, when the trace has the Python frames to show it
(SGLang's default `with_stack`). A GPU kernel belongs to the step whose window holds the CPU call that
launched it (the trace links them by `correlation`), so kernels replayed from a CUDA graph count too;
its family is read from its name and the Python frames around that launch. Where the trace has no GPU
kernels (the CPU engine: torch's profiler with CPU activities only) the CPU ops are the work,
each counted by its self time (its duration less the ops inside it), and the table says so.

A step's idle time is its span less the union of its kernels' intervals: launch gaps, host work, the
wait on a collective's peer. On GPU the span runs from the step's first kernel to its last.
"""

from __future__ import annotations

import bisect
import gzip
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from bundle.verify import kernel_families
from bundle.verify.kernel_families import IDLE

GPU_WORK = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCHES = ("cuda_runtime", "cuda_driver")
CPU_NESTING = ("cpu_op", "user_annotation", "python_function", "cuda_runtime", "cuda_driver")
_STEP = re.compile(r"^step\[(?P<stage>[A-Z_]+)\b")
_SAMPLER = re.compile(r"sglang/srt/layers/sampler\.py\(\d+\): forward$")
TOP_KERNELS = 3  # named per family in the table


class TraceUnreadable(ValueError):
    """Not a torch profiler Chrome trace."""


@dataclass
class FamilyTime:
    family: str
    ms_per_step: float
    kernels_per_step: float
    libraries: dict[str, float] = field(default_factory=dict)  # library -> ms per step
    top: list[tuple[str, str, float]] = field(default_factory=list)  # (name, library, ms per step)


@dataclass
class StepProfile:
    """One trace's steps of one stage, averaged per step."""

    source: str  # the trace file's name
    activities: str  # "GPU" (CUDA kernels) or "CPU" (CPU ops: no GPU in this trace)
    stage: str  # DECODE, EXTEND, ...
    steps: int
    step_ms: float  # mean span of a step (GPU: first kernel's start to last kernel's end)
    families: list[FamilyTime]
    idle_ms: float  # mean per step: the span less the union of its kernels (or CPU ops)
    outside_steps: int = 0  # kernels whose launch fell in no step span

    def family(self, name: str) -> FamilyTime | None:
        return next((f for f in self.families if f.family == name), None)

    def libraries(self) -> set[str]:
        return {lib for f in self.families for lib in f.libraries}

    def as_dict(self) -> dict:
        return {"source": self.source, "activities": self.activities, "stage": self.stage, "steps": self.steps,
                "step_ms": round(self.step_ms, 4), "idle_ms": round(self.idle_ms, 4),
                "outside_steps": self.outside_steps,
                "families": [{"family": f.family, "ms_per_step": round(f.ms_per_step, 4),
                              "kernels_per_step": round(f.kernels_per_step, 2),
                              "libraries": {k: round(v, 4) for k, v in f.libraries.items()},
                              "top": [[n, lib, round(ms, 4)] for n, lib, ms in f.top]} for f in self.families]}


def load(path: Path) -> dict:
    """The trace's JSON (gzip or not); TraceUnreadable names the file when it is not a trace."""
    try:
        raw = path.read_bytes()
        data = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    except (OSError, ValueError, EOFError) as exc:
        raise TraceUnreadable(f"{path}: not a readable trace ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise TraceUnreadable(f"{path}: no traceEvents list (not a torch profiler Chrome trace)")
    return data


@dataclass
class _Event:
    name: str
    cat: str
    ts: float
    end: float
    thread: tuple
    correlation: int | None
    context: tuple[str, ...] = ()  # the enclosing events' names on its thread, innermost first
    self_us: float = 0.0  # a CPU op's duration less the ops directly inside it


def _events(trace: dict) -> list[_Event]:
    out = []
    for e in trace["traceEvents"]:
        if e.get("ph") != "X" or "dur" not in e or "ts" not in e:
            continue
        args = e.get("args") or {}
        ts = float(e["ts"])
        out.append(_Event(str(e.get("name", "")), str(e.get("cat", "")), ts, ts + float(e["dur"]),
                          (e.get("pid"), e.get("tid")), args.get("correlation")))
    return out


def _nest(events: list[_Event]) -> None:
    """Each CPU-side event's context (enclosing events on its thread) and each CPU op's self time."""
    by_thread: dict[tuple, list[_Event]] = defaultdict(list)
    for e in events:
        if e.cat in CPU_NESTING:
            by_thread[e.thread].append(e)
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e.ts, -e.end))
        stack: list[_Event] = []
        for e in evs:
            while stack and stack[-1].end <= e.ts:
                stack.pop()
            e.context = tuple(s.name for s in reversed(stack))
            if e.cat == "cpu_op":
                e.self_us = e.end - e.ts
                parent = next((s for s in reversed(stack) if s.cat == "cpu_op"), None)
                if parent is not None:
                    parent.self_us -= e.end - e.ts
            stack.append(e)


def _union_ms(intervals: list[tuple[float, float]]) -> float:
    busy, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        busy += b - max(a, end)
        end = b
    return busy / 1000.0


def reduce(trace: dict, *, source: str = "", stage: str | None = None) -> StepProfile:
    """The trace's steps of `stage` (default: DECODE where there are any, else the stage with the most
    steps) reduced per family. Raises TraceUnreadable when it holds no SGLang step span."""
    events = _events(trace)
    _nest(events)
    spans = [e for e in events if e.cat == "user_annotation" and _STEP.match(e.name)]
    if not spans:
        raise TraceUnreadable(f"{source or 'trace'}: no SGLang step span (record_function 'step[...]'): "
                              f"not a trace of an SGLang server's forward steps")
    stages = defaultdict(list)
    for s in spans:
        stages[_STEP.match(s.name)["stage"]].append(s)
    chosen = stage or ("DECODE" if "DECODE" in stages else max(stages, key=lambda k: len(stages[k])))
    steps = sorted(stages.get(chosen, []), key=lambda s: s.ts)
    if not steps:
        raise TraceUnreadable(f"{source or 'trace'}: no {chosen} step (stages here: {', '.join(sorted(stages))})")
    gpu = any(e.cat == "kernel" for e in events)
    windows = _windows(steps, events)
    starts = [w[0] for w in windows]

    def step_of(at: float, thread=None) -> int | None:
        i = bisect.bisect_right(starts, at) - 1
        if i >= 0 and at < windows[i][1] and (thread is None or steps[i].thread == thread):
            return i
        return None

    work: list[tuple[int, _Event, tuple[str, ...], float]] = []  # (step, event, its context, its ms)
    outside = 0
    if gpu:
        launches = {e.correlation: e for e in events if e.cat in LAUNCHES and e.correlation is not None}
        for e in events:
            if e.cat not in GPU_WORK:
                continue
            launch = launches.get(e.correlation)
            i = step_of(launch.ts) if launch is not None else None
            if i is None:
                outside += 1
                continue
            work.append((i, e, (launch.name, *launch.context), (e.end - e.ts) / 1000.0))
    else:
        threads = {s.thread for s in steps}
        for e in events:
            if e.cat == "cpu_op" and e.thread in threads:
                i = step_of(e.ts, e.thread)
                if i is not None:
                    work.append((i, e, e.context, max(0.0, e.self_us) / 1000.0))
    return _table(work, steps, windows, gpu=gpu, source=source, stage=chosen, outside=outside)


def _windows(steps: list[_Event], events: list[_Event]) -> list[tuple[float, float]]:
    """Each step's (start, end): its span, run on to the end of the sampler call that follows it before
    the next step starts (SGLang samples after the forward's span closes)."""
    ends = [s.end for s in steps]
    starts = [s.ts for s in steps]
    for e in events:
        if e.cat != "python_function" or not _SAMPLER.search(e.name):
            continue
        i = bisect.bisect_right(starts, e.ts) - 1
        if i < 0 or steps[i].thread != e.thread or e.ts < steps[i].end:
            continue  # before the first step, another thread's, or inside the span already
        if i + 1 < len(steps) and e.ts >= starts[i + 1]:
            continue
        ends[i] = max(ends[i], e.end)
    return list(zip(starts, ends))


def _table(work, steps, windows, *, gpu: bool, source: str, stage: str, outside: int) -> StepProfile:
    n = len(steps)
    per_family: dict[str, list[tuple[_Event, str]]] = defaultdict(list)
    per_step: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for i, e, context, ms in work:
        kind = kernel_families.classify(e.name, context)
        per_family[kind.family].append((e, kind.library, ms))
        per_step[i].append((e.ts, e.end))
    spans, idle = [], []
    for i, (start, end) in enumerate(windows):
        intervals = per_step.get(i, [])
        if gpu:
            span = ((max(b for _, b in intervals) - min(a for a, _ in intervals)) / 1000.0) if intervals else 0.0
        else:
            span = (end - start) / 1000.0
        spans.append(span)
        idle.append(max(0.0, span - _union_ms(intervals)))
    families = []
    for family in kernel_families.FAMILIES:
        items = per_family.get(family)
        if not items:
            continue
        libs: dict[str, float] = defaultdict(float)
        names: dict[tuple[str, str], float] = defaultdict(float)
        for e, lib, ms in items:
            libs[lib] += ms / n
            names[(_short(e.name), lib)] += ms / n
        top = sorted(((k[0], k[1], v) for k, v in names.items()), key=lambda t: -t[2])[:TOP_KERNELS]
        families.append(FamilyTime(family, sum(libs.values()), len(items) / n,
                                   dict(sorted(libs.items(), key=lambda kv: -kv[1])), top))
    families.sort(key=lambda f: -f.ms_per_step)
    return StepProfile(source=source, activities="GPU" if gpu else "CPU", stage=stage, steps=n,
                       step_ms=sum(spans) / n, families=families, idle_ms=sum(idle) / n, outside_steps=outside)


def _short(name: str, limit: int = 60) -> str:
    """A kernel's name without its template arguments and parameter list, cut to `limit`."""
    text = (name[5:] if name.startswith("void ") else name).replace("(anonymous namespace)::", "")
    depth, out = 0, []
    for ch in text:
        if ch in "<(":
            if depth == 0 and ch == "(" and out:
                break
            depth += 1
        elif ch in ">)":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    short = "".join(out).strip() or text
    return short if len(short) <= limit else short[: limit - 3] + "..."


def reduce_file(path: Path, *, stage: str | None = None) -> StepProfile:
    return reduce(load(path), source=path.name, stage=stage)


def lines(profile: StepProfile) -> list[str]:
    """The table as text lines: one row per family and one for the idle gaps, share of the step."""
    what = ("GPU kernels (CUDA)" if profile.activities == "GPU"
            else "CPU ops (torch's profiler, CPU activities only: no GPU in this trace)")
    out = [f"{profile.source}: {profile.steps} {profile.stage} steps, {profile.step_ms:.3f} ms a step; {what}",
           f"  {'family':<22} {'ms/step':>9} {'share':>6} {'n/step':>7}  libraries; top kernels"]
    total = profile.step_ms or 1.0
    for f in profile.families:
        libs = ", ".join(f"{lib} {ms / f.ms_per_step:.0%}" for lib, ms in f.libraries.items() if f.ms_per_step)
        top = "; ".join(f"{name} ({lib})" for name, lib, _ in f.top[:2])
        out.append(f"  {f.family:<22} {f.ms_per_step:>9.3f} {f.ms_per_step / total:>6.0%} "
                   f"{f.kernels_per_step:>7.1f}  {libs}; {top}")
    out.append(f"  {IDLE:<22} {profile.idle_ms:>9.3f} {profile.idle_ms / total:>6.0%} {'':>7}  "
               + ("between kernels, first to last of a step" if profile.activities == "GPU"
                  else "between CPU ops: Python and the scheduler's own work"))
    return out
