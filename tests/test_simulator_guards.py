"""The simulator knobs the smoke guards are tested with: the same token at every step, a failing
long-prompt path, and SGLang's resolution of `auto` in /server_info."""

from __future__ import annotations

import pytest

import requests

from bundle.rehearsal.simulator.answers import plan_output
from bundle.rehearsal.simulator.knobs import LONG_PROMPT_TOKENS, Knobs
from bundle.rehearsal.simulator.model import SimulatedModel
from bundle.rehearsal.simulator.resolve import resolve_like_sglang
from tests.sim_process import MODEL, simulator

DSV4 = {"architectures": ["DeepseekV4ForCausalLM"]}


def test_repeat_token_plans_the_answers_last_word_at_every_step():
    model = SimulatedModel(str(MODEL))
    plan = plan_output(prompt_text="What is the capital of France?", prompt_ids=[1, 2], max_new_tokens=12,
                       ignore_eos=False, temperature=0, seed=None, wrong=False, knob_seed=0,
                       encode=model.encode, filler_ids=model.filler_ids, repeat_token=True,
                       word_ids=model.word_ids)
    assert len(plan.ids) == 12 and len(set(plan.ids)) == 1 and plan.finish_reason == "length"
    assert model.decode(plan.ids[:2]) == "Paris Paris"


def test_knobs_for_the_guards_come_from_env(monkeypatch):
    monkeypatch.setenv("SIM_REPEAT_TOKEN", "1")
    monkeypatch.setenv("SIM_LONG_PROMPT_FAIL", "true")
    knobs = Knobs.from_env()
    assert knobs.repeat_token is True and knobs.long_prompt_fail is True


def test_auto_resolves_as_sglang_does_for_deepseek_v4_on_sm120():
    info, changed = resolve_like_sglang({"moe_runner_backend": "auto", "kv_cache_dtype": "auto",
                                         "attention_backend": None, "speculative_algorithm": "NEXTN",
                                         "speculative_num_steps": None}, DSV4)
    assert info["moe_runner_backend"] == "flashinfer_mxfp4" and info["kv_cache_dtype"] == "fp8_e4m3"
    assert info["attention_backend"] == "dsv4" and info["page_size"] == 256
    assert (info["speculative_algorithm"], info["speculative_num_steps"], info["speculative_eagle_topk"],
            info["speculative_num_draft_tokens"]) == ("EAGLE", 3, 1, 4)
    assert changed["moe_runner_backend"] == ["auto", "flashinfer_mxfp4"]


def test_explicit_choices_are_kept_and_other_models_are_not_resolved():
    info, _ = resolve_like_sglang({"moe_runner_backend": "marlin", "kv_cache_dtype": "bf16",
                                   "speculative_algorithm": "EAGLE", "speculative_num_steps": 1,
                                   "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 7}, DSV4)
    assert info["moe_runner_backend"] == "marlin" and info["kv_cache_dtype"] == "bf16"
    assert info["speculative_num_draft_tokens"] == 2  # SGLang: steps + 1 with top-k 1
    assert resolve_like_sglang({"moe_runner_backend": "auto"}, {"architectures": ["LlamaForCausalLM"]}) == \
        ({"moe_runner_backend": "auto"}, {})


def _chat(base, content, max_tokens=24):
    return requests.post(base + "/v1/chat/completions", timeout=30, json={
        "model": "dsv4", "messages": [{"role": "user", "content": content}], "temperature": 0,
        "max_tokens": max_tokens})


# Slow tier: a simulator process of its own, and waits on purpose (the fast tier's 90 s budget).
@pytest.mark.slow
def test_a_simulator_told_to_repeat_answers_the_same_token_every_step(tmp_path):
    with simulator(tmp_path, env={"SIM_REPEAT_TOKEN": "1"}) as (base, _, _):
        reply = _chat(base, "What is the capital of France?").json()
    words = reply["choices"][0]["message"]["content"].split()
    assert len(words) == 24 and set(words) == {"Paris"}


# Slow tier: a simulator process of its own, and waits on purpose (the fast tier's 90 s budget).
@pytest.mark.slow
def test_a_failing_long_prompt_path_fails_only_long_prompts(tmp_path):
    long_prompt = " ".join(["word"] * (LONG_PROMPT_TOKENS + 10)) + " What is the capital of France?"
    with simulator(tmp_path, env={"SIM_LONG_PROMPT_FAIL": "1"}) as (base, _, log):
        short = _chat(base, "What is the capital of France?")
        long = _chat(base, long_prompt)
    assert short.status_code == 200 and "Paris" in short.json()["choices"][0]["message"]["content"]
    assert long.status_code == 500 and "SIM_LONG_PROMPT_FAIL" in long.json()["message"]
    assert "long-prompt path" in log.read_text()
