"""A bench plot drawn by `bundle bench`'s own plotting code (bundle.verify.plot.plot_bench), as SVG,
from measured figures written in the page's source:

    bench tp4 256/256 original deployment (TP4, Triton fallbacks)
    1: output_throughput=10.22 mean_tpot_ms=94.13
    8: output_throughput=24

The first line: the topology, input/output lengths, the run's label; then one line per concurrency
level with bench_serving's metric names."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path


def record(source: str) -> dict:
    head, *levels = source.strip().splitlines()
    match = re.fullmatch(r"bench (\S+) (\d+)/(\d+) (.+)", head.strip())
    if not match or not levels:
        raise ValueError("a bench picture is 'bench TOPOLOGY IN/OUT LABEL', then 'C: metric=value ...' lines")
    topology, input_len, output_len, label = match.groups()
    parsed = []
    for line in levels:
        concurrency, sep, pairs = line.partition(":")
        metrics = dict(pair.split("=", 1) for pair in pairs.split())
        if not sep or not concurrency.strip().isdigit() or not metrics:
            raise ValueError(f"a level is 'C: metric=value ...', not {line!r}")
        parsed.append({"concurrency": int(concurrency), "metrics": {k: float(v) for k, v in metrics.items()}})
    # The plot's title ends with when the run started; a run quoted here has no such time (an empty one
    # left the title ending in a comma): its label says which run it is.
    return {"topology": topology, "label": label, "started": label, "levels": parsed,
            "config": {"input_len": int(input_len), "output_len": int(output_len)}}


def picture(source: str) -> str:
    import matplotlib

    from bundle.verify.plot import plot_bench

    matplotlib.rcParams["svg.hashsalt"] = "docs"  # the same ids in every build
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: readable, found by search, smaller
    with tempfile.TemporaryDirectory() as folder:
        path = plot_bench(record(source), Path(folder) / "bench.svg")
        if path is None:
            raise RuntimeError("matplotlib is missing (the dev install's `plot` extra)")
        svg = path.read_text()
    return svg[svg.index("<svg"):]
