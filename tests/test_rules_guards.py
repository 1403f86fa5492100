"""Guards in `bundle validate` for the failures users report on this stack: a backend name the
pinned SGLang does not know, a DeepSeek-V4.1 checkpoint, prefill and decode with different
speculative settings. Each message names the file, the key path and the fix."""

from __future__ import annotations

import json

import pytest

from bundle.config.loader import load_config
from bundle.rules.checkpoint import unsupported_checkpoint
from tests.conftest import checked, write_config

pytestmark = pytest.mark.usefixtures("runs_dir")


def _errors(tmp_path, text: str, topology: str = "pd", **kwargs) -> list[str]:
    return checked(load_config(write_config(tmp_path, text)), topology, **kwargs).errors


def _model(tmp_path, config: dict):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_unknown_sparse_mla_backend_in_a_worker_env_is_refused(tmp_path):
    errors = _errors(tmp_path, "pd:\n  decode:\n    env:\n      SGLANG_SM120_FLASHMLA_BACKEND: b12x\n")
    assert len(errors) == 1
    assert "bundle.yaml:4: pd.decode.env.SGLANG_SM120_FLASHMLA_BACKEND: 'b12x'" in errors[0]
    assert "silently runs the slow torch path" in errors[0] and "flashinfer, triton, torch" in errors[0]


def test_a_misspelt_sparse_mla_backend_gets_a_suggestion(tmp_path):
    errors = _errors(tmp_path, "tp4:\n  env:\n    SGLANG_SM120_FLASHMLA_BACKEND: flashinfr\n", "tp4")
    assert "did you mean 'flashinfer'?" in errors[0]


def test_known_sparse_mla_backends_pass(tmp_path):
    assert _errors(tmp_path, "tp4:\n  env:\n    SGLANG_SM120_FLASHMLA_BACKEND: triton\n", "tp4") == []


@pytest.mark.parametrize("tokens, index, flag", [
    ('["--attention-backend", "flashmla_sm120"]', 1, "--attention-backend"),
    ('["--mem-fraction-static", "0.8", "--speculative-moe-runner-backend=marlinn"]', 2,
     "--speculative-moe-runner-backend"),
    ('["--dsv4-attn-backend", "mega"]', 1, "--dsv4-attn-backend"),
])
def test_unknown_backend_flag_in_extra_args_is_refused_with_its_choices(tmp_path, tokens, index, flag):
    errors = _errors(tmp_path, f"pd:\n  prefill:\n    extra_args: {tokens}\n")
    assert len(errors) == 1, errors
    assert f"pd.prefill.extra_args[{index}]:" in errors[0]
    assert f"is not a backend SGLang 0.5.23 accepts for {flag}; " in errors[0] and "allowed: " in errors[0]


def test_dp_replicas_sharing_extra_args_report_once(tmp_path):
    errors = _errors(tmp_path, 'dp:\n  extra_args: ["--attention-backend", "nope"]\n', "dp")
    assert [e.split(": ")[1] for e in errors] == ["dp.extra_args[1]"]


def test_deepseek_v41_checkpoint_is_refused_by_validate_naming_v41(tmp_path):
    folder = _model(tmp_path, {"architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v41"})
    dep = load_config(write_config(tmp_path, f"model:\n  path: {folder}\n"))
    found = checked(dep, "tp4")  # validate: a missing model is only a warning, V4.1 is an error
    assert len(found.errors) == 1
    assert "model.path:" in found.errors[0] and "DeepSeek-V4.1 checkpoint (model_type is deepseek_v41)" in found.errors[0]
    assert "this bundle serves DeepSeek-V4-Flash" in found.errors[0]


@pytest.mark.parametrize("config, evidence", [
    ({"architectures": ["DeepseekV41ForCausalLM"], "model_type": "deepseek_v4"}, "architectures names DeepseekV41ForCausalLM"),
    ({"model_type": "deepseek_v4", "compress_ratios": [0, 1, 2, 4]}, "compress_ratios has ratio 1/2 layers"),
    ({"model_type": "deepseek_v4", "index_topk": 1152}, "index_topk is 1152"),
    ({"model_type": "x", "text_config": {"model_type": "deepseek_v41_text"}}, "text_config.model_type is deepseek_v41_text"),
])
def test_v41_layouts_are_recognised(tmp_path, config, evidence):
    assert evidence in unsupported_checkpoint(_model(tmp_path, config) / "config.json")


def test_deepseek_v4_flash_config_is_accepted(tmp_path):
    config = {"architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4", "index_topk": 512,
              "compress_ratios": [0, 0, 4, 128, 4, 128]}
    assert unsupported_checkpoint(_model(tmp_path, config) / "config.json") is None


def test_prefill_and_decode_with_different_speculative_settings_are_refused(tmp_path):
    errors = _errors(tmp_path, "levers:\n  speculative: mtp\npd:\n  decode:\n"
                               "    extra_args: ['--speculative-accept-threshold-single', '0.5']\n")
    assert len(errors) == 1
    assert "pd.decode.extra_args: prefill and decode must carry identical speculative settings" in errors[0]
    assert "accept_threshold_single: prefill unset, decode 0.5" in errors[0] and "sglang #30461" in errors[0]


def test_speculative_draft_only_on_prefill_blames_prefill(tmp_path):
    errors = _errors(tmp_path, "pd:\n  prefill:\n    extra_args: ['--speculative-draft-model-path', '/model']\n")
    assert "pd.prefill.extra_args: prefill and decode must carry identical" in errors[0]


@pytest.mark.parametrize("preset", ["mtp", "mtp-light"])
def test_presets_give_both_pd_servers_the_same_settings(tmp_path, preset):
    assert _errors(tmp_path, f"levers:\n  speculative: {preset}\n") == []


def test_kv_cache_dtype_deepseek_v4_refuses_is_refused(tmp_path):
    errors = _errors(tmp_path, "levers:\n  kv_cache_dtype: fp8_e5m2\n", "tp4")
    assert "levers.kv_cache_dtype: fp8_e5m2 is refused by SGLang 0.5.23 for DeepSeek-V4" in errors[0]
