"""Runs SGLang's own bench_serving (`python -m sglang.bench_serving ARGS`) inside the bench container
and writes one JSON line per finished request to $BUNDLE_BENCH_PROGRESS as it happens.

bench_serving writes its result only at the very end, and writes nothing when no request succeeds
or when it crashes (a router removed mid-run makes its closing /server_info call fail): without
these lines a run cut short leaves every request unaccounted for. The wrapper only observes: each
request is still sent and timed by bench_serving's own request function.

A request the server itself aborted is counted failed. bench_serving's request function calls a
stream that ends without an error a success, even when its last chunk is SGLang's abort
(`meta_info.finish_reason.type == "abort"`, which is how a decode whose KV transfer failed ends the
request: HTTP 200, an empty text) or an `{"error": ...}` object. The wrapper reads the chunks as the
request function parses them (its module's `orjson`) and turns such a success into a failure carrying
the server's message. A stream that ends normally with an empty text (a tiny model's special tokens)
stays a success: only the server's own word makes a failure.

It also refuses, before sending anything, a run whose dataset cannot supply the prompts asked for
(bench_serving's random dataset silently makes fewer prompts than --num-prompts from a small file).

Standalone on purpose (the standard library and SGLang only): it is mounted into the image's
container, not installed there.
"""

from __future__ import annotations

import contextvars
import json
import os
import sys
import time

DATASET_SHORT = "BUNDLE_DATASET_SHORT"  # the marker line bench.py looks for
EXIT_DATASET_SHORT = 3


# The server's failure messages seen in the current request's stream. Each request runs in its own
# asyncio task, which has its own copy of the context: one list per request, never shared.
_STREAM_FAILURES: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("stream_failures", default=None)


def stream_failure(chunk) -> str | None:
    """The server's failure message if one parsed stream chunk reports one, else None."""
    if not isinstance(chunk, dict):
        return None
    if "error" in chunk:
        error = chunk["error"]
        return str(error.get("message") or error) if isinstance(error, dict) else str(error)
    reason = (chunk.get("meta_info") or {}).get("finish_reason")
    if isinstance(reason, dict) and reason.get("type") == "abort":
        return f"aborted by the server: {reason.get('message') or 'no message'}"
    return None


class _ChunkWatchingJson:
    """The request function's `orjson`, unchanged, except that each parsed chunk is looked at."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)

    def loads(self, data):
        chunk = self._real.loads(data)
        seen = _STREAM_FAILURES.get()
        failure = stream_failure(chunk) if seen is not None else None
        if failure:
            seen.append(failure)
        return chunk


def _record(path: str, entry: dict) -> None:
    # One write per line, flushed at once: a container killed mid-run keeps every line written.
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry) + "\n")


def _observed(request_func, path: str):
    async def observed(*args, **kwargs):
        failures: list[str] = []
        _STREAM_FAILURES.set(failures)
        output = await request_func(*args, **kwargs)
        if failures and getattr(output, "success", False):
            output.success, output.error = False, failures[-1]
        error = (getattr(output, "error", "") or "").strip()
        # t (when it ended), latency, ttft and output_len: a soak's drift from its first minute to
        # its last is computed from these (bench.soak_summary).
        _record(path, {"ok": bool(getattr(output, "success", False)), "error": error.split("\n")[-1].split("\r")[-1][:300]
                       if error else "", "t": time.time(), "latency": getattr(output, "latency", None),
                       "ttft": getattr(output, "ttft", None), "output_len": getattr(output, "output_len", None)})
        return output
    return observed


def _checked_benchmark(benchmark, wanted: int):
    async def checked(*args, **kwargs):
        requests = kwargs.get("input_requests", args[5] if len(args) > 5 else None)
        supplied = len(requests) if requests is not None else wanted
        if supplied < wanted:
            print(f"{DATASET_SHORT} supplied={supplied} wanted={wanted}", flush=True)
            sys.exit(EXIT_DATASET_SHORT)
        return await benchmark(*args, **kwargs)
    return checked


def install(serving, path: str) -> None:
    """Every request function of bench_serving's module observed, its chunks watched."""
    serving.orjson = _ChunkWatchingJson(serving.orjson)
    for name, func in list(serving.ASYNC_REQUEST_FUNCS.items()):
        serving.ASYNC_REQUEST_FUNCS[name] = _observed(func, path)


def main() -> None:
    from sglang.benchmark import serving

    path = os.environ["BUNDLE_BENCH_PROGRESS"]
    install(serving, path)
    argv = sys.argv[1:]
    wanted = int(argv[argv.index("--num-prompts") + 1]) if "--num-prompts" in argv else 0
    # run_benchmark looks `benchmark` and the request functions up in the module at call time.
    serving.benchmark = _checked_benchmark(serving.benchmark, wanted)
    sys.argv = ["sglang.benchmark.serving", *argv]
    serving.cli_main()


if __name__ == "__main__":
    main()
