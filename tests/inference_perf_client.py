"""inference-perf 0.7.0, a benchmark client nobody here wrote (the one llm-d's guides use), pointed at a
front door: its config, its run (its own venv: it needs Python >= 3.12, `make install` makes
.venv-inference-perf), and what its reports say. Used by tests/e2e/test_engine_e2e.py (the pd stack it shares)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / os.environ.get("CLIENT_VENV", ".venv-inference-perf")
EXECUTABLE = VENV / "bin" / "inference-perf"


def fixed(tokens: int, count: int) -> dict:
    """A distribution of one value (bench_serving's range ratio 1.0)."""
    return {"type": "fixed", "min": tokens, "max": tokens, "mean": tokens, "std_dev": 0, "total_count": count}


def config(*, base_url: str, model: str, tokenizer: str, out: Path, stages: list[tuple[int, int]],
           input_len: int, output_len: int, api_key: str | None = None) -> dict:
    """Completions, streamed, EOS ignored; random prompts of `input_len` tokens from the model's own
    tokenizer folder (HF_HUB_OFFLINE=1: nothing fetched); a concurrent load stage per (requests, C);
    every request's details kept."""
    total = sum(n for n, _ in stages)
    return {
        "api": {"type": "completion", "streaming": True},
        "server": {"type": "sglang", "model_name": model, "base_url": base_url, "ignore_eos": True,
                   **({"api_key": api_key} if api_key else {})},
        "tokenizer": {"pretrained_model_name_or_path": tokenizer},
        "data": {"type": "random", "input_distribution": fixed(input_len, total),
                 "output_distribution": fixed(output_len, total)},
        "load": {"type": "concurrent", "stages": [{"num_requests": n, "concurrency_level": c} for n, c in stages]},
        "report": {"request_lifecycle": {"summary": True, "per_stage": True, "per_request": True}},
        "storage": {"local_storage": {"path": str(out)}},
    }


def run(cfg: dict, workdir: Path, *, timeout: float) -> subprocess.CompletedProcess:
    path = workdir / "inference-perf.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run([str(EXECUTABLE), "-c", str(path)], cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


def reports(out: Path) -> dict[str, object]:
    """Every JSON report it wrote, by file name."""
    return {p.name: json.loads(p.read_text()) for p in sorted(out.rglob("*.json"))}


def sglang_metric_names() -> dict[str, str]:
    """The Prometheus series its SGLang client reads (role -> name), from its installed source (parsed,
    not imported: it lives in another interpreter's venv)."""
    found = sorted(VENV.glob("lib/python3*/site-packages/inference_perf/client/modelserver/sglang_client.py"))
    if not found:
        raise FileNotFoundError(f"inference-perf's SGLang client under {VENV}")
    tree = ast.parse(found[0].read_text())
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and isinstance(node.value, ast.Call) and node.value.args:
            arg = node.value.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("sglang:"):
                names[node.arg] = arg.value
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and isinstance(value, ast.Call) and value.args and \
                        isinstance(value.args[0], ast.Constant) and str(value.args[0].value).startswith("sglang:"):
                    names[key.value] = value.args[0].value
    return names


def metric_filters() -> list[str]:
    """The label filters its SGLang client puts on every query (model_name='<served>')."""
    found = sorted(VENV.glob("lib/python3*/site-packages/inference_perf/client/modelserver/sglang_client.py"))
    text = found[0].read_text()
    return ["model_name"] if "model_name='{model_name}'" in text else []
