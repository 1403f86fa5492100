"""Contract: the bundle's defaults and the backend names it accepts are the pinned SGLang's own,
read from the installed sglang 0.5.23 (its parser, its environment defaults, its source)."""

from __future__ import annotations

import argparse
import ast
import importlib.util
from pathlib import Path

import pytest

from bundle.config import levers
from bundle.config import loader
from bundle.config.loader import load_config
from bundle.rules import argspec, backends
from tests.conftest import missing, render_for, require_module

pytestmark = [pytest.mark.contract, pytest.mark.usefixtures("runs_dir")]



def _sglang_file(relative: str) -> Path:
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        missing("sglang is not installed (make install adds it)")
    return Path(list(spec.submodule_search_locations)[0]) / relative


@pytest.fixture(scope="module")
def server_args_cls():
    module = require_module("sglang.srt.server_args")
    return module.ServerArgs


def _parsed(server_args_cls, args):
    parser = argparse.ArgumentParser()
    server_args_cls.add_cli_args(parser)
    return parser.parse_args(["--model-path", "/model", *args])


def test_default_command_line_leaves_every_choice_to_sglang(server_args_cls):
    """With no bundle.yaml, what the levers put on the server's command line equals SGLang's own
    defaults, except where a lever says auto and SGLang decides (moe runner, kv dtype)."""
    dep = load_config(None)
    rendered = render_for(dep, "tp4")
    ours = _parsed(server_args_cls, rendered.server_args("server"))
    plain = _parsed(server_args_cls, [])
    assert ours.moe_runner_backend == plain.moe_runner_backend == "auto"
    assert ours.kv_cache_dtype == plain.kv_cache_dtype == "auto"
    assert ours.speculative_algorithm is plain.speculative_algorithm is None
    assert ours.cuda_graph_backend_decode == plain.cuda_graph_backend_decode
    for topology in ("tp4", "pd", "dp"):
        rendered = render_for(dep, topology)
        for service in rendered.commands:
            assert "marlin" not in " ".join(rendered.server_args(service) or []), (topology, service)


def test_sparse_mla_default_is_sglangs_environment_default():
    environ = require_module("sglang.srt.environ")
    assert load_config(None).levers.sparse_mla == environ.envs.SGLANG_SM120_FLASHMLA_BACKEND.get() == "flashinfer"


def test_sm120_backend_values_are_the_ones_sglangs_dispatch_tells_apart():
    """flash_mla_sm120.py compares the variable with string constants; every other value falls
    through to the torch path. The bundle accepts exactly those constants plus 'torch'."""
    source = _sglang_file("kernels/ops/attention/flash_mla_sm120.py")
    tree = ast.parse(source.read_text())
    compared = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) \
                and node.left.id == "_sm120_default_backend":
            compared |= {c.value for c in node.comparators if isinstance(c, ast.Constant)}
    assert compared == {"flashinfer", "triton"}
    assert set(backends.SM120_FLASHMLA_VALUES) == compared | {"torch"}
    assert "triton|torch" in source.read_text()  # SGLang's own name for the fallback


def test_deepseek_v4_override_resolves_auto_to_flashinfer_mxfp4_on_sm120():
    """The reason moe_runner defaults to auto: SGLang's DeepSeek-V4 override picks the tensor-core
    MXFP4 runner on sm_120 itself (read from the pinned source, which needs a GPU to run)."""
    tree = ast.parse(_sglang_file("srt/arg_groups/model_overrides/deepseek_v4.py").read_text())
    text = ast.unparse(tree)
    assert "overrides['moe_runner_backend'] = 'flashinfer_mxfp4'" in text
    assert "get_platform().is_sm120" in text and "cfg.moe_runner_backend == 'auto'" in text
    assert "overrides: Dict[str, Any] = {'attention_backend': 'dsv4'}" in text


def test_mtp_presets_are_what_sglang_chooses_for_deepseek(server_args_cls):
    hook = require_module("sglang.srt.arg_groups.speculative_hook")
    sa = server_args_cls.from_cli_args(_parsed(server_args_cls, ["--speculative-algorithm", "EAGLE"]))
    steps, topk, draft = hook._auto_choose_speculative_params(sa, "DeepseekV4ForCausalLM")
    ns = _parsed(server_args_cls, levers.MTP_ARGS)
    assert (ns.speculative_num_steps, ns.speculative_eagle_topk, ns.speculative_num_draft_tokens) == (steps, topk, draft)
    light = _parsed(server_args_cls, levers.MTP_LIGHT_ARGS)
    # deepseek_v4_hook asserts EAGLE with top-k 1; with top-k 1 SGLang makes draft tokens = steps + 1.
    for ns in (_parsed(server_args_cls, levers.MTP_ARGS), light):
        assert hook._resolve_speculative_algorithm_alias(ns.speculative_algorithm, None) == "EAGLE"
        assert ns.speculative_eagle_topk == 1 and ns.speculative_num_draft_tokens == ns.speculative_num_steps + 1


@pytest.mark.parametrize("lever, flag", [("moe_runner", "--moe-runner-backend"), ("kv_cache_dtype", "--kv-cache-dtype")])
def test_every_lever_value_the_schema_allows_is_a_choice_of_the_pinned_parser(lever, flag):
    allowed = loader.schema()["properties"]["levers"]["properties"][lever]["enum"]
    choices = {f: o["choices"] for o in argspec.load_spec(argspec.SERVER_SPEC)["options"] for f in o["flags"]}
    assert set(allowed) <= set(choices[flag])
