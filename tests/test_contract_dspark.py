"""Contract: the bundle's DSpark rules are the pinned SGLang 0.5.23's, read from its installed source.

SGLang's DSpark modules import its kernels (tvm_ffi, transformers), which this machine's venv lacks, so
the rules are read from the files themselves: the detection of a bundled draft is SGLang's own function,
compiled from its source and run against the bundle's restatements; constants and messages are read
with `ast`. A new pin that changes any of them fails here first."""

from __future__ import annotations

import argparse
import ast
import importlib.util
from pathlib import Path

import pytest

from bundle.config.loader import load_config
from bundle.rules import argspec, checkpoint
from bundle.rehearsal.simulator import resolve
from tests.conftest import missing, render_for, require_module, write_config

pytestmark = [pytest.mark.contract, pytest.mark.usefixtures("runs_dir")]

DSPARK_CONFIG = "srt/speculative/dspark_components/dspark_config.py"
SPECULATIVE_HOOK = "srt/arg_groups/speculative_hook.py"
DSV4_HOOK = "srt/arg_groups/deepseek_v4_hook.py"
DEFERRED_COMMIT = "srt/speculative/dspark_components/dspark_deferred_commit.py"
SPEC_FIELDS = "srt/arg_groups/fields/spec.py"


def _source(relative: str) -> str:
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        missing("sglang is not installed (make install adds it)")
    return (Path(list(spec.submodule_search_locations)[0]) / relative).read_text()


def _module_constant(relative: str, name: str):
    for node in ast.walk(ast.parse(_source(relative))):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{name} not found in sglang/{relative}")


def _sglang_functions(relative: str, *names: str) -> dict:
    """SGLang's own functions, compiled from its source without importing its module."""
    tree = ast.parse(_source(relative))
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    assert {d.name for d in defs} == set(names)
    namespace = {"Any": object}
    exec(compile(ast.Module(body=defs, type_ignores=[]), relative, "exec"), namespace)  # noqa: S102
    return namespace


CONFIGS = [
    {"model_type": "deepseek_v4", "architectures": ["DeepseekV4ForCausalLM"]},
    *({"model_type": "deepseek_v4", key: value} for key, value in
      (("dspark_block_size", 7), ("dspark_markov_rank", 1), ("dspark_noise_token_id", 3),
       ("dspark_target_layer_ids", [1, 2]))),
    {"model_type": "deepseek_v4", "dspark_block_size": None},
    {"model_type": "deepseek_v4", "dspark_config": {"block_size": 7}},  # a draft's own config, not a bundle
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: ",".join(sorted(c)))
def test_a_bundled_draft_is_found_as_sglangs_own_checkpoint_bundles_dspark_draft_finds_it(config):
    sglang = _sglang_functions(DSPARK_CONFIG, "checkpoint_bundles_dspark_draft", "_cfg_get")
    expected = sglang["checkpoint_bundles_dspark_draft"](config)
    assert checkpoint.bundles_dspark_draft(config) is expected
    simulated = any(config.get(k) is not None for k in resolve.DSPARK_DRAFT_KEYS)
    assert simulated is expected


def test_the_draft_subfolder_and_the_default_block_size_are_sglangs():
    assert _module_constant(SPECULATIVE_HOOK, "_DSPARK_DRAFT_SUBFOLDER") == checkpoint.DSPARK_SUBFOLDER \
        == resolve.DSPARK_SUBFOLDER == "dspark"
    assert _module_constant(DSPARK_CONFIG, "DEFAULT_DSPARK_GAMMA") == checkpoint.DSPARK_DEFAULT_BLOCK_SIZE \
        == resolve.DSPARK_DEFAULT_BLOCK_SIZE


def test_dspark_levers_default_to_sglangs_own_choice_none_for_every_dspark_flag():
    """SGLang: every DSpark option defaults to None (the block size from the draft's config, no
    calibration); the bundle's levers.dspark keys default to null and then pass no flag."""
    tree = ast.parse(_source(SPEC_FIELDS))
    defaults = {n.target.id: ast.literal_eval(n.value) for n in ast.walk(tree)
                if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.value is not None
                and n.target.id.startswith("speculative_dspark_") and isinstance(n.value, ast.Constant)}
    for field in ("speculative_dspark_block_size", "speculative_dspark_sps_table_path",
                  "speculative_dspark_confidence_sts_path"):
        assert defaults[field] is None, field
    dspark = load_config(None).levers.dspark
    assert (dspark.block_size, dspark.sps_table, dspark.confidence_sts) == (None, None, None)
    # "Omit to auto-infer gamma from the draft checkpoint block_size": SGLang documents the choice.
    assert "Omit to auto-infer gamma" in _source(SPEC_FIELDS)


def test_the_deepseek_v4_hook_allows_dspark():
    """deepseek_v4_hook asserts the algorithm is one of a tuple: DSPARK must be in it (and EAGLE, mtp's)."""
    allowed = set()
    for node in ast.walk(ast.parse(_source(DSV4_HOOK))):
        if isinstance(node, ast.Compare) and any(isinstance(op, ast.In) for op in node.ops):
            for comp in node.comparators:
                if isinstance(comp, ast.Tuple) and all(isinstance(e, ast.Constant) for e in comp.elts):
                    values = {e.value for e in comp.elts}
                    if "DSPARK" in values and "EAGLE" in values and len(values) == 2:
                        allowed = values
    assert allowed == {"EAGLE", "DSPARK"}


def test_the_pd_and_dp_attention_refusals_stand_on_the_pinned_sources_own_limits():
    """The bundle refuses DSpark in pd and with DP-attention (sglang #33083). What the pinned source
    says about both: its DSpark PD path is DeepSeek-V4.1's, the deferred draft-KV commit refuses PD
    and attention DP, and DP-attention needs flags the bundle never sets."""
    hook = _source(DSV4_HOOK)
    assert "DeepSeek-V4.1 DSpark PD requires" in hook
    commit = _source(DEFERRED_COMMIT)
    assert '"PD disaggregation transfers KV between steps"' in commit
    assert '"attention DP runs idle draft forwards"' in commit
    speculative = _source(SPECULATIVE_HOOK)
    assert "DSpark with dp attention requires --enable-dp-lm-head." in speculative
    assert "DSpark dense speculative decoding requires setting" in speculative  # no draft: stops at start


@pytest.fixture(scope="module")
def real_parser():
    module = require_module("sglang.srt.server_args")
    parser = argparse.ArgumentParser()
    module.ServerArgs.add_cli_args(parser)
    return parser


@pytest.mark.parametrize("levers", ["{speculative: dspark}",
                                    "{speculative: dspark, dspark: {block_size: 3, sps_table: dspark/sps.json, "
                                    "confidence_sts: dspark/sts.json}}"])
@pytest.mark.parametrize("topology", ["tp4", "dp"])
def test_every_dspark_command_line_parses_under_the_real_parser_and_its_snapshot(tmp_path, real_parser, levers,
                                                                                 topology):
    folder = tmp_path / "model"
    (folder / "dspark").mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "deepseek_v4", "dspark_block_size": 7}')
    for name in ("sps.json", "sts.json"):
        (folder / "dspark" / name).write_text("{}")
    dep = load_config(write_config(tmp_path, f"model: {{path: {folder}}}\nlevers: {levers}\n"))
    rendered = render_for(dep, topology)
    for service in rendered.commands:
        args = rendered.server_args(service)
        if args is None:
            continue
        assert argspec.check_arguments(argspec.SERVER_SPEC, args) is None
        ns = real_parser.parse_args(args)
        assert ns.speculative_algorithm == "DSPARK"
        assert ns.speculative_dspark_block_size == dep.levers.dspark.block_size
        if dep.levers.dspark.sps_table:
            assert ns.speculative_dspark_sps_table_path == "/model/dspark/sps.json"
            assert ns.speculative_dspark_confidence_sts_path == "/model/dspark/sts.json"
