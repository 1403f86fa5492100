"""What the simulated model says: known questions get their answer (or a wrong one, on request),
anything else a deterministic run of filler words. Greedy requests (temperature 0) always give the
same tokens for the same prompt; sampled ones vary unless a seed is given, as with a real model."""

from __future__ import annotations

import hashlib
import random
import re

# (pattern on the prompt, right answer, wrong answer). Data, not logic: add rows as smoke tests grow.
KNOWN_QUESTIONS = [
    (r"capital\s+of\s+France", "The capital of France is Paris.", "The capital of France is Lyon."),
    (r"capital\s+of\s+Germany", "The capital of Germany is Berlin.", "The capital of Germany is Paris."),
    (r"capital\s+of\s+Italy", "The capital of Italy is Rome.", "The capital of Italy is Madrid."),
    (r"capital\s+of\s+Japan", "The capital of Japan is Tokyo.", "The capital of Japan is Rome."),
    (r"capital\s+of\s+Spain", "The capital of Spain is Madrid.", "The capital of Spain is Berlin."),
]


def known_answer(prompt: str, wrong: bool) -> str | None:
    for pattern, right_answer, wrong_answer in KNOWN_QUESTIONS:
        if re.search(pattern, prompt, flags=re.IGNORECASE):
            return wrong_answer if wrong else right_answer
    return None


def _rng(prompt_ids: list[int], temperature: float, seed: int | None, knob_seed: int) -> random.Random:
    if temperature > 0 and seed is None:
        return random.Random()  # sampled without a seed: not reproducible, like a real model
    digest = hashlib.sha256(repr((prompt_ids, seed if temperature > 0 else None, knob_seed)).encode())
    return random.Random(int.from_bytes(digest.digest()[:8], "big"))


class OutputPlan:
    """The token ids a request will produce and why it stops ('stop' at EOS, or 'length')."""

    def __init__(self, ids: list[int], finish_reason: str):
        self.ids = ids
        self.finish_reason = finish_reason


REPEATED_TOKENS_WITHOUT_LIMIT = 16  # how long a degenerate answer runs when the request sets no limit


def plan_output(*, prompt_text: str, prompt_ids: list[int], max_new_tokens: int | None,
                ignore_eos: bool, temperature: float, seed: int | None, wrong: bool,
                knob_seed: int, encode, filler_ids: list[int], repeat_token: bool = False,
                word_ids=None) -> OutputPlan:
    """Decide every output token up front; the server then only paces them. `repeat_token`: the
    degenerate model that emits one token at every step until the length limit (`word_ids`, the
    ids that are whole words, choose which: the answer's last word, so the expected text is there)."""
    rng = _rng(prompt_ids, temperature, seed, knob_seed)
    answer = known_answer(prompt_text, wrong)
    natural = encode(answer) if answer else [rng.choice(filler_ids) for _ in range(8 + rng.randrange(24))]
    limit = max_new_tokens if max_new_tokens is not None else len(natural)
    if repeat_token:
        words = [t for t in natural if word_ids is None or t in word_ids] or natural
        count = max_new_tokens if max_new_tokens is not None else REPEATED_TOKENS_WITHOUT_LIMIT
        return OutputPlan([words[-1]] * count, "length")
    if ignore_eos:
        # bench_serving sets ignore_eos: produce exactly max_new_tokens, the answer first.
        ids = (natural + [rng.choice(filler_ids) for _ in range(max(0, limit - len(natural)))])[:limit]
        return OutputPlan(ids, "length")
    if len(natural) <= limit:
        return OutputPlan(natural, "stop")
    return OutputPlan(natural[:limit], "length")
