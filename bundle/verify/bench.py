"""`bundle bench`: SGLang's own bench_serving, run inside the image against the front door service,
one concurrency level at a time, each in its own one-off container with its own time limit.

The original deployment lost its C=8 numbers to a timeout. Here a level that fails or runs out of
time is recorded as such, its container alone is killed, and every level measured before it is
kept. One JSON line per run goes to runs/<project>/bench.jsonl (the history later runs compare
with); the run's own folder keeps each level's output file (server_info removed) and log.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bundle import log_lines, modes
from bundle.verify import bench_serving
from bundle.stack import engine
from bundle.verify import comparable, metrics, runstore
from bundle.verify.limits import Limits, score_level
from bundle.stack import runstate
from bundle.verify.bench_serving import Level
from bundle.config.model import Deployment
from bundle.topology import TOOL_SERVICE, Topology
from bundle.durations import parse_duration

OUT_MOUNT = "/bench-out"  # this run's folder, inside the bench container
KEY_MOUNT = "/run/secrets/api_key"  # where compose puts the secret in the servers, the same here
TOKENIZER = "/model"  # the model folder, as the compose bench service mounts it
SHIPPED_DATASET = "bench-sharegpt.json"  # a ShareGPT file in the model folder serves offline
# bench_serving reads the key from OPENAI_API_KEY; it is set from the mounted file inside the
# container, so it is in no command line, no `docker inspect` and no log. bench_serving itself runs
# through the launcher (bench_launcher.py, mounted), which logs each request's outcome as it ends.
LAUNCHER = Path(__file__).resolve().with_name("bench_launcher.py")
LAUNCHER_MOUNT = "/opt/bundle-bench/launcher.py"
WRAPPER = ('if [ -s "$0" ]; then OPENAI_API_KEY="$(tr -d "\\r\\n" < "$0")"; export OPENAI_API_KEY; fi; '
           f'exec python3 {LAUNCHER_MOUNT} "$@"')
TAIL_LINES = 8  # of a failed level's output, in the report


@dataclass
class BenchPlan:
    topology: str
    levels: list[Level]
    base_url: str
    tokenizer: str
    dataset_path: str | None
    dataset_source: str
    label: str | None
    config: dict = field(default_factory=dict)
    model: str | None = None  # the served name, sent in each request's body where a router routes by it


def plan(dep: Deployment, topology: Topology, env: dict[str, str], *, concurrency: list[int] | None = None,
         input_len: int | None = None, output_len: int | None = None,
         prompts_per_concurrency: int | None = None, level_timeout: str | None = None,
         range_ratio: float | None = None, label: str | None = None) -> BenchPlan:
    """Config `bench:` overridden by the command line -> the levels to run and where to point them."""
    cfg = dep.bench
    conc = list(concurrency or cfg.concurrency)
    per = int(prompts_per_concurrency or cfg.prompts_per_concurrency)
    timeout_text = level_timeout or cfg.level_timeout
    timeout_s = parse_duration(timeout_text, what="bench level timeout")
    ratio = float(cfg.range_ratio if range_ratio is None else range_ratio)
    in_len = int(input_len or cfg.input_len)
    out_len = int(output_len or cfg.output_len)
    levels = [Level(concurrency=c, num_prompts=per * c, input_len=in_len, output_len=out_len,
                    range_ratio=ratio, timeout_s=timeout_s) for c in conc]
    # bench_serving runs in a container on the topology's network and reaches the front service there.
    base_url = f"http://{topology.front_service}:{env.get(topology.front_port_variable) or 30000}"
    dataset, source = cfg.dataset_path, "bench.dataset_path"
    if not dataset:
        shipped = Path(env.get("MODEL_HOST_PATH", "")) / SHIPPED_DATASET
        if env.get("MODEL_HOST_PATH") and shipped.is_file():
            dataset, source = f"{TOKENIZER}/{SHIPPED_DATASET}", f"the model folder's {SHIPPED_DATASET}"
        else:
            dataset, source = None, "ShareGPT from Hugging Face (bench_serving's default download)"
    config = {"input_len": in_len, "output_len": out_len, "concurrency": conc,
              "prompts_per_concurrency": per, "level_timeout": timeout_text, "range_ratio": ratio,
              "dataset": dataset or "sharegpt (downloaded)", "base_url": base_url, "backend": "sglang",
              "seed": bench_serving.SEED}
    return BenchPlan(topology=topology.name, levels=levels, base_url=base_url, tokenizer=TOKENIZER,
                     dataset_path=dataset, dataset_source=source, label=label, config=config,
                     model=env.get("SERVED_MODEL_NAME") if topology.has_router else None)


def provenance(env: dict[str, str], *, mode: bool) -> dict:
    """What ran the benchmark: image (id and digests), lock hash, NVIDIA driver and GPUs."""
    from bundle.doctor import nvidia_smi

    mode_image = env.get(modes.registry().IMAGE_VARIABLE) if mode else None
    image_ref = mode_image or env.get("BUNDLE_IMAGE")
    image = {"ref": image_ref, "id": None, "repo_digests": []}
    try:
        facts = engine.image_facts(image_ref) if image_ref else None
        if facts:
            image.update(id=facts.id, repo_digests=list(facts.repo_digests))
    except Exception as exc:  # noqa: BLE001 - provenance is best effort; the numbers still count
        image["error"] = type(exc).__name__
    try:
        gpus = nvidia_smi.query_gpus()
        driver = gpus[0].driver_version if gpus else None
        gpu_names = [g.name for g in gpus]
    except nvidia_smi.NvidiaSmiUnavailable as exc:
        driver = f"none ({modes.word()})" if mode else f"none ({exc})"
        gpu_names = []
    from bundle import __version__

    return {"image": image, "lock_hash": env.get("BUNDLE_LOCK_HASH"), "driver_version": driver,
            "gpus": gpu_names, "host": platform.node(), "bundle_version": __version__}


@dataclass(frozen=True)
class LevelProgress:
    """Where a running level stands, from the launcher's progress file (one line per finished request)."""
    concurrency: int
    done: int  # measured requests finished (completed or failed), of num_prompts
    failed: int
    num_prompts: int
    seconds: float

    def line(self) -> str:
        failed = f", {self.failed} failed" if self.failed else ""
        return (f"C={self.concurrency}: {self.done} of {self.num_prompts} requests done{failed} "
                f"({self.seconds:.0f} s elapsed)")


def read_progress(progress_file: Path, level: Level, seconds: float) -> LevelProgress:
    observed = bench_serving.parse_lines(progress_file.read_text()) if progress_file.is_file() else []
    counts = bench_serving.tally(observed, num_prompts=level.num_prompts)
    failed = counts["failed_requests"]
    return LevelProgress(level.concurrency, counts["metrics"]["completed"] + failed, failed,
                         level.num_prompts, seconds)


class _Watch:
    """Calls `on_progress` every `every_s` seconds while a level runs (a daemon thread)."""

    def __init__(self, on_progress: Callable[[LevelProgress], None] | None, progress_file: Path, level: Level,
                 every_s: float = 2.0):
        self._stop = threading.Event()
        self._args = (on_progress, progress_file, level, every_s)
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True) if on_progress else None

    def _run(self) -> None:
        on_progress, progress_file, level, every_s = self._args
        while not self._stop.wait(every_s):
            try:
                on_progress(read_progress(progress_file, level, time.monotonic() - self._started))
            except (OSError, ValueError):  # a line half written: the next tick reads it whole
                continue

    def __enter__(self):
        if self._thread:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=2)


def run_level(stack, level: Level, plan_: BenchPlan, *, run_dir: Path, project: str, stamp: str,
              api_key_file: str | None, redact: Callable[[str], str],
              on_line: Callable[[str], None] | None = None,
              stack_gone: Callable[[], str | None] = lambda: None,
              on_progress: Callable[[LevelProgress], None] | None = None) -> dict:
    """One bench_serving call in a one-off container; returns the level's report entry, in which
    completed + failed + unsent always equals the prompts asked for. `stack_gone()` says why the
    stack is no longer there, or None."""
    out_name = f"c{level.concurrency}.jsonl"
    args = bench_serving.arguments(level, base_url=plan_.base_url, tokenizer=plan_.tokenizer,
                                   output_file=f"{OUT_MOUNT}/{out_name}", dataset_path=plan_.dataset_path,
                                   model=plan_.model)
    progress_name = f"c{level.concurrency}.progress.jsonl"
    volumes = [(str(run_dir), OUT_MOUNT, "rw"), (str(LAUNCHER), LAUNCHER_MOUNT, "ro")]
    key_arg = "/dev/null"
    if api_key_file:
        volumes.append((str(api_key_file), KEY_MOUNT, "ro"))
        key_arg = KEY_MOUNT
    # Files the container writes under runs/ should belong to the user who runs the driver.
    user = None if os.getuid() == 0 else f"{os.getuid()}:{os.getgid()}"
    env = {"BUNDLE_BENCH_PROGRESS": f"{OUT_MOUNT}/{progress_name}"} | ({"HOME": "/tmp"} if user else {})
    t0 = time.monotonic()
    with _Watch(on_progress, run_dir / progress_name, level):
        result = stack.run_tool(TOOL_SERVICE, ["sh", "-c", WRAPPER, key_arg, *args],
                                name=f"{project}-bench-c{level.concurrency}-{stamp}", timeout=level.timeout_s,
                                volumes=volumes, env=env, user=user, on_line=on_line)
    seconds = round(time.monotonic() - t0, 1)
    output = redact(result.output)
    (run_dir / f"c{level.concurrency}.log").write_text(output + "\n")
    entry = {"concurrency": level.concurrency, "num_prompts": level.num_prompts, "seconds": seconds,
             "command": "python3 -m sglang.bench_serving " + shlex.join(args),
             "status": "ok", "reason": None, "metrics": None, "failed_requests": None, "unsent": 0,
             "error_samples": []}
    out_file, progress_file = run_dir / out_name, run_dir / progress_name
    lines = bench_serving.parse_lines(out_file.read_text()) if out_file.is_file() else []
    observed = bench_serving.parse_lines(progress_file.read_text()) if progress_file.is_file() else []
    tally = bench_serving.tally(observed, num_prompts=level.num_prompts)
    if lines:
        entry.update(bench_serving.summarize(lines[-1], num_prompts=level.num_prompts))
        _strip_server_info(out_file, lines)
    else:  # no result (cut short, crashed, or nothing succeeded): what the launcher saw is the count
        entry.update(tally)
    tail = "\n".join(log_lines.lines(output)[-TAIL_LINES:])
    short = bench_serving.dataset_short(output)
    gone = stack_gone()
    if short:
        entry.update(metrics={"completed": 0}, failed_requests=0, unsent=level.num_prompts,
                     status="failed", reason=f"the dataset supplies only {short[0]} of the {short[1]} prompts "
                     f"asked for (C={level.concurrency} x {level.num_prompts // level.concurrency}); nothing was "
                     f"sent. Point bench.dataset_path at a larger ShareGPT-format file, or ask for fewer "
                     f"(--prompts-per-concurrency)")
    elif result.timed_out:
        entry.update(tally if not lines else {}, status="timeout",
                     reason=f"no result within {level.timeout_s:.0f} s; only this level's container was killed "
                            f"({_counted(entry)}). Last output:\n{tail}")
    elif gone:
        entry.update(status="failed", reason=f"the stack went away during the run ({gone}); "
                                             f"{_counted(entry)}")
    elif not lines and observed and len(observed) <= bench_serving.WARMUP_REQUESTS and not observed[0].get("ok"):
        # bench_serving stops when its warm-up request fails: nothing measured was sent.
        error = observed[0].get("error") or "no error text"
        entry.update(status="failed", reason=f"the warm-up request failed ({error}); none of the "
                                             f"{level.num_prompts} requests was sent")
    elif not lines and entry["metrics"]["completed"] == 0 and observed:
        entry.update(status="failed", reason=f"all {level.num_prompts} requests failed: "
                                             f"{'; '.join(entry['error_samples']) or 'no error text'}")
    elif not lines:
        entry.update(status="failed", reason=f"bench_serving exited {result.exit_code} without a result "
                                             f"({_counted(entry)}). Last output:\n{tail}")
    elif entry["failed_requests"]:
        entry.update(status="failed", reason=f"{entry['failed_requests']} of {level.num_prompts} requests "
                                             f"failed: {'; '.join(entry['error_samples'])}")
    elif result.exit_code != 0:
        entry.update(status="failed", reason=f"bench_serving exited {result.exit_code}. Last output:\n{tail}")
    completed = (entry["metrics"] or {}).get("completed", 0)
    if completed + (entry["failed_requests"] or 0) + entry["unsent"] != level.num_prompts:
        # Every ending accounts for every request; a mismatch is bench_serving's own count disagreeing.
        entry.update(status="failed", reason=(entry["reason"] or "") + f" (accounting: {completed} completed + "
                     f"{entry['failed_requests']} failed + {entry['unsent']} unsent != {level.num_prompts})")
    return entry


def _counted(entry: dict) -> str:
    completed = (entry["metrics"] or {}).get("completed", 0)
    return (f"{completed} completed, {entry['failed_requests'] or 0} failed, {entry['unsent']} never sent, "
            f"of {entry['num_prompts']}")


def _strip_server_info(path: Path, lines: list[dict]) -> None:
    """bench_serving copies /server_info (API key included) into its output: keep it out of runs/."""
    for line in lines:
        if "server_info" in line:
            line["server_info"] = "(removed by the bundle: it holds the API key; see attestation.json)"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def run(stack, plan_: BenchPlan, *, project: str, mode: bool, env: dict[str, str], target: str = "compose",
        api_key_file: str | None, redact: Callable[[str], str],
        on_level: Callable[[Level], None] | None = None, on_line: Callable[[str], None] | None = None,
        run_dir: Path | None = None, stack_gone: Callable[[], str | None] = lambda: None,
        on_progress: Callable[[LevelProgress], None] | None = None,
        limits: Limits | None = None, keep_record: bool = True) -> tuple[dict, Path]:
    """Every level in order; returns the run's record (also appended to the history) and its folder.
    With `limits` each measured level is scored against the cost model (limits.py: its `limit` entry).
    `keep_record=False`: the caller keeps it (keep()) once it has added to it (a profile's verdict)."""
    run_dir = run_dir or runstate.new_run_dir(project, "bench")
    stamp = run_dir.name.split("-bench")[0].replace("-", "")
    record = {
        "kind": "bench", "run_id": run_dir.name, "label": plan_.label, "topology": plan_.topology,
        "project": project, modes.record_key(): mode, "target": target,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "finished": None,
        **provenance(env, mode=mode),
        "config": plan_.config | {"dataset_source": plan_.dataset_source}, "levels": [], "ok": False,
    }
    if limits is not None:
        record["limits"] = limits.describe()
    stop_reason = None
    for level in plan_.levels:
        if not stop_reason and record["levels"] and (gone := stack_gone()):
            # `bundle down` during the run: the next level's `compose run` would bring the project's
            # network back (and a container with it) after down removed them.
            stop_reason = f"skipped: the stack went away ({gone})"
        if stop_reason:
            record["levels"].append({"concurrency": level.concurrency, "num_prompts": level.num_prompts,
                                     "status": "skipped", "reason": stop_reason, "metrics": None,
                                     "failed_requests": None, "error_samples": [], "seconds": 0.0})
            continue
        if on_level:
            on_level(level)
        entry = run_level(stack, level, plan_, run_dir=run_dir, project=project, stamp=stamp,
                          api_key_file=api_key_file, redact=redact, on_line=on_line, stack_gone=stack_gone,
                          on_progress=on_progress)
        if limits is not None:
            entry["limit"] = score_level(limits, entry, record["config"])
        record["levels"].append(entry)
        if entry["status"] == "timeout":
            # Higher levels take longer still: they would only burn their own limits too.
            stop_reason = f"skipped: C={level.concurrency} ran out of time"
    record["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    record["ok"] = all(lv["status"] == "ok" for lv in record["levels"])
    if keep_record:
        keep(record, run_dir)
    return record, run_dir


def keep(record: dict, run_dir: Path) -> None:
    """A bench run's record appended to its project's history and written to its folder."""
    runstore.append_jsonl(runstate.project_dir(record["project"]) / runstore.BENCH_HISTORY, record)
    runstore.write_json(run_dir / "bench.json", record)


# ---- soak: a fixed duration at one concurrency ------------------------------------------------------
SOAK_WINDOW_S = 60.0  # latency drift: the first minute against the last
MIN_ROUND_S = 5.0  # no new round is started with less time than this left
SOAK_HEADROOM = 1.2  # rounds are sized for the time left at the last round's rate, plus this much
# bench_serving's own start (it imports torch and the tokenizer) is not load, so the soak's time counts
# from its first request. The first round may take this much longer than the soak to get going (a
# loaded 2-core host took over 50 s; a GPU host about 10): more is a failure, named as a timeout.
SOAK_START_ALLOWANCE_S = 300.0


def next_round_prompts(lines: list[dict], *, left_s: float, at_least: int, cap: int | None) -> int:
    """Prompts for the next round: enough, at the rate the last round served (its requests' end
    times), to fill the time left, so bench_serving's start-up is paid once per round, not per few
    requests; never fewer than a bench level's, never more than the dataset supplies (`cap`)."""
    times = sorted(o["t"] for o in lines if isinstance(o.get("t"), (int, float)))
    want = at_least
    if len(times) >= 2 and times[-1] > times[0]:
        rate = (len(times) - 1) / (times[-1] - times[0])
        want = max(at_least, int(rate * left_s * SOAK_HEADROOM) + 1)
    return min(want, cap) if cap else want


def first_sent(lines: list[dict]) -> float | None:
    """When the earliest of the launcher's requests was sent (its end stamp less its latency), or None."""
    sent = [o["t"] - (o.get("latency") or 0.0) for o in lines if isinstance(o.get("t"), (int, float))]
    return min(sent) if sent else None


def soak_summary(observed: list[dict], *, window_s: float = SOAK_WINDOW_S) -> dict:
    """Per-request lines (the launcher's: ok, error, t, latency, ttft, output_len) -> errors and the
    drift of latency, TTFT and TPOT from the first window of traffic to the last (measured from
    the first and the last request that finished, not from the soak's start: bench_serving's own
    start-up is not traffic). Traffic shorter than three windows uses a third of its span as the
    window, so first and last never overlap."""
    done = [o for o in observed if isinstance(o.get("t"), (int, float))]
    span = (max(o["t"] for o in done), min(o["t"] for o in done)) if done else (0.0, 0.0)
    started, finished = span[1], span[0]
    window = min(window_s, max(0.0, finished - started) / 3)
    ok = [o for o in done if o.get("ok")]
    failed = [o for o in done if not o.get("ok")]
    samples = []
    for o in failed:
        text = str(o.get("error") or "").strip()[:bench_serving.ERROR_CHARS]
        if text and text not in samples:
            samples.append(text)
        if len(samples) == bench_serving.ERROR_SAMPLES:
            break

    def stats(rows: list[dict]) -> dict:
        def mean(values):
            values = [v for v in values if v is not None]
            return round(sum(values) / len(values), 3) if values else None
        tpots = [(o["latency"] - o["ttft"]) / (o["output_len"] - 1) * 1000 for o in rows
                 if o.get("latency") is not None and o.get("ttft") is not None and (o.get("output_len") or 0) > 1]
        return {"requests": len(rows), "mean_latency_ms": mean([o.get("latency") and o["latency"] * 1000 for o in rows]),
                "mean_ttft_ms": mean([o.get("ttft") and o["ttft"] * 1000 for o in rows]), "mean_tpot_ms": mean(tpots)}

    first = stats([o for o in ok if o["t"] <= started + window])
    last = stats([o for o in ok if o["t"] >= finished - window])
    drift = {}
    for key in ("mean_latency_ms", "mean_ttft_ms", "mean_tpot_ms"):
        a, b = first.get(key), last.get(key)
        drift[key.replace("mean_", "").replace("_ms", "_pct")] = round((b - a) / a * 100, 1) if a and b is not None else None
    return {"window_s": round(window, 1), "traffic_s": round(finished - started, 1),
            "completed": len(ok), "failed": len(failed),
            "error_rate": round(len(failed) / len(done), 4) if done else None, "error_samples": samples,
            "first_window": first, "last_window": last, "drift": drift}


def run_soak(stack, plan_: BenchPlan, *, duration_s: float, project: str, mode: bool, env: dict[str, str],
             api_key_file: str | None, redact: Callable[[str], str],
             on_round: Callable[[int, float], None] | None = None,
             stack_gone: Callable[[], str | None] = lambda: None, clock=time.time) -> tuple[dict, Path]:
    """bench_serving at the plan's (single) concurrency, round after round, for `duration_s` counted
    from the first request sent; the last round is cut at the deadline (its unsent prompts are not
    errors). Returns the soak's record (also
    appended to the history, with kind "soak") and its folder."""
    (level,) = plan_.levels
    run_dir = runstate.new_run_dir(project, "soak")
    stamp = run_dir.name.split("-soak")[0].replace("-", "")
    record = {
        "kind": "soak", "run_id": run_dir.name, "label": plan_.label, "topology": plan_.topology,
        "project": project, modes.record_key(): mode, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "finished": None, **provenance(env, mode=mode),
        "config": plan_.config | {"dataset_source": plan_.dataset_source, "soak_s": duration_s,
                                  "concurrency": [level.concurrency]},
        "rounds": [], "soak": None, "ok": False,
    }
    start = clock()  # wall-clock seconds: the launcher stamps each request with time.time()
    traffic_from = None  # when the first request was sent: the soak's time counts from there
    observed: list[dict] = []
    stopped = None
    n = 0
    prompts, cap = level.num_prompts, None
    while (left := duration_s - (clock() - (traffic_from or start))) >= MIN_ROUND_S and stopped is None:
        n += 1
        if on_round:
            on_round(n, left)
        round_dir = run_dir / f"round-{n:03d}"
        round_dir.mkdir()
        this = Level(concurrency=level.concurrency, num_prompts=prompts, input_len=level.input_len,
                     output_len=level.output_len, range_ratio=level.range_ratio,
                     timeout_s=left if traffic_from else left + SOAK_START_ALLOWANCE_S)
        entry = run_level(stack, this, plan_, run_dir=round_dir, project=project, stamp=f"{stamp}r{n}",
                          api_key_file=api_key_file, redact=redact, stack_gone=stack_gone)
        log = round_dir / f"c{level.concurrency}.log"
        short = bench_serving.dataset_short(log.read_text()) if log.is_file() else None
        progress = round_dir / f"c{level.concurrency}.progress.jsonl"
        lines = bench_serving.parse_lines(progress.read_text()) if progress.is_file() else []
        measured = lines[bench_serving.WARMUP_REQUESTS:]
        observed += measured
        if traffic_from is None:
            traffic_from = first_sent(lines)
        if short and short[0] >= level.num_prompts and cap != short[0]:
            # More prompts than the dataset supplies were asked for: ask for what it has, nothing was sent.
            cap = prompts = short[0]
            entry.update(status="resized", reason=f"the dataset supplies {short[0]} prompts: rounds use that many")
        elif entry["status"] == "timeout":
            entry.update(status="cut", reason="cut at the end of the soak (expected for the last round)")
        record["rounds"].append({k: entry.get(k) for k in ("concurrency", "num_prompts", "seconds", "status",
                                                           "reason", "failed_requests", "unsent")})
        if entry["status"] == "failed":
            stopped = entry["reason"]
        elif entry["status"] == "ok":
            prompts = next_round_prompts(measured, left_s=duration_s - (clock() - start),
                                         at_least=level.num_prompts, cap=cap)
    record["soak"] = soak_summary(observed)
    record["soak"]["seconds"] = round(clock() - start, 1)
    record["soak"]["start_up_s"] = round(traffic_from - start, 1) if traffic_from else None
    record["soak"]["stopped"] = stopped
    record["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    record["ok"] = stopped is None and record["soak"]["failed"] == 0 and record["soak"]["completed"] > 0
    runstore.append_jsonl(runstate.project_dir(project) / runstore.BENCH_HISTORY, record)
    runstore.write_json(run_dir / "soak.json", record)
    return record, run_dir


# ---- regression gate -----------------------------------------------------------------------------
# The gated metrics are the catalogue's (bundle/verify/metrics.py): throughput, TTFT, TPOT.
GATED = tuple((m.key, m.higher_is_better, m.word) for m in metrics.GATED)
# Config keys that do not change what is measured.
_NOT_THE_METHOD = {"base_url", "level_timeout", "dataset_source"}


def _method(record: dict) -> dict:
    return {k: v for k, v in (record.get("config") or {}).items() if k not in _NOT_THE_METHOD}


def _image(record: dict) -> tuple:
    image = record.get("image") or {}
    return (image.get("id") or image.get("ref"), record.get("lock_hash"))


def gate_reference(history: list[dict], record: dict, against: str | None = None) -> dict | None:
    """The earlier run to gate `record` against: `against` (a run id, or its unique start), else the
    last run like it (comparable.py: topology, GPU or no-GPU mode, target, lengths) of the same
    config and image (id and lock hash) that measured something."""
    earlier = [r for r in history if r.get("kind", "bench") == "bench" and r.get("run_id") != record.get("run_id")
               and any(lv.get("metrics") for lv in r.get("levels", []))]
    if against:
        matches = [r for r in earlier if r.get("run_id") == against] or \
                  [r for r in earlier if str(r.get("run_id", "")).startswith(against)]
        return matches[-1] if len({r.get("run_id") for r in matches}) == 1 else None
    same = [r for r in earlier if comparable.unlike(record, r) is None
            and _method(r) == _method(record) and _image(r) == _image(record)]
    return same[-1] if same else None


@dataclass(frozen=True)
class Gated:
    """The regression gate's verdict on a run against an earlier one."""

    against: str | None  # the earlier run's id
    pct: float
    ok: bool  # something was compared, and nothing got worse by more than pct
    regressions: tuple[str, ...]
    compared: tuple[str, ...]

    def as_dict(self) -> dict:
        return {"against": self.against, "pct": self.pct, "ok": self.ok, "regressions": list(self.regressions),
                "compared": list(self.compared)}


def gate(record: dict, reference: dict, pct: float) -> Gated:
    """Which gated metric of which level is worse than `reference` by more than `pct` percent."""
    regressions, compared = [], []
    ref_levels = {lv.get("concurrency"): lv for lv in reference.get("levels", []) if lv.get("metrics")}
    for level in record.get("levels", []):
        then_level = ref_levels.get(level.get("concurrency"))
        if not level.get("metrics") or then_level is None:
            continue
        for metric, higher, name in GATED:
            now, then = level["metrics"].get(metric), then_level["metrics"].get(metric)
            if now is None or not then:
                continue
            change = (now - then) / then * 100
            worse = -change if higher else change
            line = f"C={level['concurrency']} {name} ({metric}): {then:.2f} -> {now:.2f} ({change:+.1f}%)"
            compared.append(line)
            if worse > pct:
                regressions.append(line + f", worse by more than {pct:g}%")
    return Gated(against=reference.get("run_id"), pct=pct, ok=bool(compared) and not regressions,
                 regressions=tuple(regressions), compared=tuple(compared))


@dataclass(frozen=True)
class LevelResult:
    """One level of a bench run as the record holds it, typed."""

    concurrency: int
    status: str  # ok, timeout, failed, skipped
    reason: str | None
    metrics: dict  # bench_serving's figures by the catalogue's keys (bundle/verify/metrics.py); {} if none
    limit: dict | None  # against the cost model's floor (limits.score_level), None if not scored

    @classmethod
    def of(cls, level: dict) -> LevelResult:
        return cls(int(level["concurrency"]), level["status"], level.get("reason"), dict(level.get("metrics") or {}),
                   level.get("limit"))

    def metric(self, key: str) -> float | None:
        if key not in metrics.BY_KEY:
            raise KeyError(f"{key!r} is not a bench metric (bundle/verify/metrics.py)")
        return self.metrics.get(key)


@dataclass(frozen=True)
class BenchResult:
    """A bench run's record (the line appended to bench.jsonl), with typed access to what callers read."""

    record: dict

    @property
    def run_id(self) -> str:
        return self.record["run_id"]

    @property
    def levels(self) -> tuple[LevelResult, ...]:
        return tuple(LevelResult.of(lv) for lv in self.record["levels"])

    @property
    def ok(self) -> bool:
        return bool(self.record.get("ok"))

    @property
    def bad_levels(self) -> tuple[LevelResult, ...]:
        return tuple(lv for lv in self.levels if lv.status != "ok")

    def as_dict(self) -> dict:
        return self.record
