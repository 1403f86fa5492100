"""What SGLang's own benchmark (`python -m sglang.bench_serving`, 0.5.23) is given and what it writes.

Its `--output-file` gets one JSON line per run (sglang/benchmark/serving.py), appended, holding the
arguments, the metrics and `server_info`: the server's /server_info, API key included. Only the
metrics below are ever kept from it. With `--output-details` the line also lists every request's
error (an empty string for a success), which is how failed requests are counted: the line itself
only says how many completed. When no request succeeds bench_serving writes no line at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from bundle import log_lines

# The metrics a bench report keeps, as bench_serving names them.
METRICS = (
    "completed", "duration", "total_input_tokens", "total_output_tokens", "request_throughput",
    "input_throughput", "output_throughput", "total_throughput", "max_output_tokens_per_s",
    "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms",
    "mean_itl_ms", "median_itl_ms", "p99_itl_ms", "mean_e2e_latency_ms", "median_e2e_latency_ms",
    "concurrency", "max_concurrency", "accept_length",
)
ERROR_SAMPLES = 3  # distinct error messages kept per level
WARMUP_REQUESTS = 1  # sent before the measured ones; the launcher's first lines are theirs
DATASET_SHORT = "BUNDLE_DATASET_SHORT"  # bench_launcher.py's marker line
ERROR_CHARS = 300
SEED = 42  # bench_serving's --seed: the same prompts in every run (the records say it, likeness.py holds it)


@dataclass(frozen=True)
class Level:
    """One bench_serving call: C concurrent clients, prompts_per_concurrency x C prompts."""

    concurrency: int
    num_prompts: int
    input_len: int
    output_len: int
    range_ratio: float
    timeout_s: float


def arguments(level: Level, *, base_url: str, tokenizer: str, output_file: str,
              dataset_path: str | None, seed: int = SEED, model: str | None = None) -> list[str]:
    """bench_serving's command line for one level: the original method, made explicit."""
    args = [
        "--backend", "sglang",  # /generate, as the original run
        "--base-url", base_url,
        "--model", tokenizer,  # the original passed the model folder; it names the tokenizer too
        "--tokenizer", tokenizer,
        "--dataset-name", "random",
        "--random-input-len", str(level.input_len),
        "--random-output-len", str(level.output_len),
        "--random-range-ratio", str(level.range_ratio),
        "--num-prompts", str(level.num_prompts),
        "--max-concurrency", str(level.concurrency),
        "--seed", str(seed),
        "--output-file", output_file,
        "--output-details",  # per-request errors: failed requests are counted, not guessed
        "--warmup-requests", str(WARMUP_REQUESTS),
        "--disable-tqdm",
    ]
    if dataset_path:
        args += ["--dataset-path", dataset_path]
    if model:
        # The native /generate body has no model field; a router that routes by model (smg with
        # --enable-igw, pd) needs one: 400 missing_model otherwise. A lone SGLang server would refuse it.
        args += ["--extra-request-body", json.dumps({"model": model})]
    return args


def parse_lines(text: str) -> list[dict]:
    """Every JSON object line of an output file (bench_serving appends; damaged lines are skipped)."""
    from bundle.verify.runstore import parse_jsonl

    return parse_jsonl(text)


def summarize(result: dict, *, num_prompts: int) -> dict:
    """One bench_serving result line -> the report's level fields (metrics, failures). No server_info."""
    metrics = {key: result.get(key) for key in METRICS if key in result}
    errors = [e for e in result.get("errors") or [] if e]
    completed = int(result.get("completed") or 0)
    # With --output-details every request has an entry; without it, what did not complete failed.
    failed = len(errors) if "errors" in result else max(0, num_prompts - completed)
    samples = []
    for error in errors:
        text = str(error).strip()[:ERROR_CHARS]
        if text not in samples:
            samples.append(text)
        if len(samples) == ERROR_SAMPLES:
            break
    return {"metrics": metrics, "failed_requests": failed, "error_samples": samples}


def tally(observed: list[dict], *, num_prompts: int) -> dict:
    """What the launcher saw (one line per finished request, warm-up first) -> the level's counts:
    completed, failed and never sent, which always add up to num_prompts."""
    measured = observed[WARMUP_REQUESTS:][:num_prompts]
    failed = [o for o in measured if not o.get("ok")]
    samples = []
    for o in failed:
        text = str(o.get("error") or "").strip()[:ERROR_CHARS]
        if text and text not in samples:
            samples.append(text)
        if len(samples) == ERROR_SAMPLES:
            break
    return {"metrics": {"completed": len(measured) - len(failed)}, "failed_requests": len(failed),
            "unsent": num_prompts - len(measured), "error_samples": samples}


def dataset_short(output: str) -> tuple[int, int] | None:
    """(supplied, wanted) when the launcher refused a dataset too small for the prompts asked for."""
    for line in log_lines.lines(output):
        if line.startswith(DATASET_SHORT):
            fields = dict(part.split("=", 1) for part in line.split()[1:] if "=" in part)
            return int(fields.get("supplied", 0)), int(fields.get("wanted", 0))
    return None
