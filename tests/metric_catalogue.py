"""What the pinned versions really emit, read offline from what is installed (never from a list
typed here): SGLang's metric names from its source (the Counter/Gauge/Histogram/Summary calls in
observability/, parsed with `ast`), smg's from its Rust binary's strings, and the names a PromQL
expression selects (promql-parser's AST, not a regular expression)."""

from __future__ import annotations

import ast
import importlib.util
import re
from functools import lru_cache
from pathlib import Path

from docsgen.monitoring import metric_names

SGLANG_METRIC_FILES = ("metrics_collector.py", "http_request_metrics.py")
# Series Prometheus itself adds to every scrape target.
PROMETHEUS_SYNTHETIC = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}
# DCGM exporter's default counters (etc/default-counters.csv of dcgm-exporter 4.x): the GPU panels'
# names. The exporter is not installed here (GPU hosts only), so these are declared, not read.
DCGM_DEFAULT_COUNTERS = {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE",
                         "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_MEM_COPY_UTIL",
                         "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_XID_ERRORS"}
_KINDS = {"Counter", "Gauge", "Histogram", "Summary"}


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise LookupError(f"{name} is not installed")
    return Path(spec.origin).parent


@lru_cache(maxsize=1)
def sglang_metrics() -> dict[str, str]:
    """{name as defined: kind} for every metric SGLang's observability modules define."""
    folder = _package_dir("sglang") / "srt" / "observability"
    found: dict[str, str] = {}
    for file_name in SGLANG_METRIC_FILES:
        tree = ast.parse((folder / file_name).read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            kind = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if kind not in _KINDS:
                continue
            name = next((k.value for k in node.keywords if k.arg == "name"), None)
            if name is None and node.args:
                name = node.args[0]
            if isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value.startswith("sglang:"):
                found[name.value] = kind
    return found


def exposed_names(defined: dict[str, str]) -> set[str]:
    """The series names prometheus_client exposes for each definition (a counter gains _total,
    a histogram _bucket/_sum/_count)."""
    names = set()
    for name, kind in defined.items():
        if kind == "Counter":
            names.add(name if name.endswith("_total") else name + "_total")
        elif kind in ("Histogram", "Summary"):
            names |= {name + "_sum", name + "_count"} | ({name + "_bucket"} if kind == "Histogram" else set())
        else:
            names.add(name)
    return names


@lru_cache(maxsize=1)
def smg_binary() -> bytes:
    folder = _package_dir("smg")
    (binary,) = sorted(folder.glob("smg_rs*.so"))
    return binary.read_bytes()


_NAME_CHAR = re.compile(rb"[a-z0-9_]")
_UNIT_SUFFIXES = ("_total", "_seconds", "_bytes", "_ratio")


def smg_emits(name: str) -> bool:
    """smg's metric names are Rust string literals, laid end to end in the binary without a
    separator: `name` is one if it occurs there followed by a non-name byte or by the next smg_
    literal, or, ending in a unit suffix (_total, _seconds, ...), followed by anything (the next
    literal may be a label name). Histogram suffixes are added by the exporter."""
    base = re.sub(r"_(bucket|sum|count)$", "", name)
    data = smg_binary()
    for candidate in {name, base}:
        needle = candidate.encode()
        start = data.find(needle)
        while start != -1:
            end = start + len(needle)
            if (end >= len(data) or not _NAME_CHAR.match(data[end:end + 1]) or data[end:end + 4] == b"smg_"
                    or candidate.endswith(_UNIT_SUFFIXES)):
                return True
            start = data.find(needle, start + 1)
    return False


def selected_names(expr: str) -> set[str]:
    """Every metric name a PromQL expression selects: the documentation site's own reader."""
    return set(metric_names(expr))


def emitted(name: str) -> bool:
    """Emitted by the pinned SGLang or smg, by Prometheus itself, or one of DCGM's defaults."""
    if name.startswith("sglang:"):
        return name in exposed_names(sglang_metrics())
    if name.startswith("smg_"):
        return smg_emits(name)
    return name in PROMETHEUS_SYNTHETIC or name in DCGM_DEFAULT_COUNTERS
