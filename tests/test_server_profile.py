"""`bundle bench --profile`: what it asks of SGLang's profiler is what the pinned SGLang takes (its
ProfileReq's fields, the step spans and trace names its scheduler writes, read from its source), and
the level it profiles is checked before anything runs. The whole path runs in
tests/e2e/test_engine_e2e.py (pd on the CPU engine)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from bundle.errors import UsageError
from bundle.service import bench as bench_service
from bundle.verify import server_profile
from bundle.verify.bench import BenchPlan
from bundle.verify.bench_serving import Level
from tests.conftest import missing


def _sglang_file(relative: str) -> Path:
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        missing("sglang is not installed (make install adds it)")
    return Path(list(spec.submodule_search_locations)[0]) / relative


def _fields(source: Path, cls: str) -> set[str]:
    tree = ast.parse(source.read_text())
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls)
    return {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}


def test_the_start_request_is_a_profile_req_of_the_pinned_sglang():
    fields = _fields(_sglang_file("srt/managers/io_struct.py"), "ProfileReq")
    body = server_profile.request_body("bundle-x", steps=3, activities=["CPU"])
    assert set(body) <= fields, set(body) - fields
    assert body["profile_by_stage"] is True and body["num_steps"] == 3 and body["output_dir"].endswith("/bundle-x")


def test_the_names_the_collector_and_the_parser_rely_on_are_sglangs():
    manager = _sglang_file("srt/managers/scheduler_components/profiler_manager.py").read_text()
    assert '".trace.json.gz"' in manager and 'f"TP-{get_parallel().tp_rank}"' in manager
    assert 'stage_suffix = f"-{stage.name}"' in manager  # -DECODE / -EXTEND: one file per stage
    spans = _sglang_file("srt/utils/profile_utils.py").read_text()
    assert 'f"step[{stage} bs={bs}' in spans  # ModelRunner's step span (profile_trace._STEP)
    assert '"/start_profile"' in _sglang_file("srt/entrypoints/http_server.py").read_text()


def _plan(*concurrency: int) -> BenchPlan:
    levels = [Level(concurrency=c, num_prompts=c, input_len=16, output_len=8, range_ratio=1.0, timeout_s=60)
              for c in concurrency]
    return BenchPlan("pd", levels, "http://router:30000", "tok", None, "x", None)


def test_profile_names_a_level_of_the_run_or_the_highest():
    assert bench_service._profiled_level(_plan(1, 8), None) is None
    assert bench_service._profiled_level(_plan(1, 8), bench_service.PROFILE_HIGHEST).concurrency == 8
    assert bench_service._profiled_level(_plan(1, 8), 1).concurrency == 1
    with pytest.raises(UsageError, match=r"--profile 4: no level of concurrency 4 in this run \(levels: 1, 8\)"):
        bench_service._profiled_level(_plan(1, 8), 4)


def test_profile_is_refused_for_a_soak():
    with pytest.raises(UsageError, match="not a soak"):
        bench_service.check(bench_service.BenchRequest(soak="5m", profile=1))


def test_the_command_line_takes_profile_alone_or_with_a_level():
    import argparse

    from bundle.commands import bench as bench_command

    parser = argparse.ArgumentParser()
    bench_command.add_arguments(parser)
    assert bench_command.request_of(parser.parse_args(["--profile"])).profile == bench_service.PROFILE_HIGHEST
    assert bench_command.request_of(parser.parse_args(["--profile", "8"])).profile == 8
    assert bench_command.request_of(parser.parse_args([])).profile is None
