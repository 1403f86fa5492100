"""Backend names the servers get (from the levers, a role's extra_args, a role's env), checked
against what the pinned SGLang accepts, before anything starts.

Flags: every option of the pinned parser (snapshot in bundle/rules/parsers) whose flag names a
backend and that has a fixed set of choices: --moe-runner-backend, --attention-backend,
--decode-attention-backend, --dsv4-attn-backend ... A name outside the choices would make the
server exit at start, minutes into a launch.

Environment: SGLANG_SM120_FLASHMLA_BACKEND is read once at import by
sglang/kernels/ops/attention/flash_mla_sm120.py, which compares it with "flashinfer" and "triton"
and sends every other value, silently, down the torch path (its comment names that path "torch").
So only those three are taken; a typo such as "flashinfr" would otherwise cost the decode speed
without a word. tests/test_contract_parsers.py proves the set against the pinned source.
"""

from __future__ import annotations


from bundle.errors import did_you_mean
from bundle.rules import argspec

SM120_FLASHMLA_ENV = "SGLANG_SM120_FLASHMLA_BACKEND"
# The values flash_mla_sm120.py tells apart (flashinfer, triton) and the name of its fallback.
SM120_FLASHMLA_VALUES = ("flashinfer", "triton", "torch")
SM120_FLASHMLA_SOURCE = "sglang/kernels/ops/attention/flash_mla_sm120.py"


def backend_choices(spec: str = argspec.SERVER_SPEC) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Every spelling of every backend-naming option with fixed choices -> (canonical flag, choices)."""
    out = {}
    for option in argspec.load_spec(spec)["options"]:
        if not option["choices"] or not any("backend" in f for f in option["flags"]):
            continue
        if option["action"] == "flag":
            continue
        choices = tuple(str(c) for c in option["choices"])
        for flag in option["flags"]:
            out[flag] = (option["flags"][0], choices)
    return out


def _suggest(value: str, allowed) -> str:
    guess = did_you_mean(value, allowed)
    return f"{guess} " if guess else ""


def flag_problems(tokens) -> list[tuple[int, str]]:
    """(index of the value token, message) for each backend flag in `tokens` given an unknown name."""
    known = backend_choices()
    tokens = [str(t) for t in tokens]
    out = []
    for i, token in enumerate(tokens):
        flag, eq, inline = token.partition("=")
        if flag not in known:
            continue
        canonical, choices = known[flag]
        if eq:
            value, at = inline, i
        elif i + 1 < len(tokens):
            value, at = tokens[i + 1], i + 1
        else:
            continue  # a missing value is the parser check's to report
        if value not in choices:
            out.append((at, f"{value!r} is not a backend SGLang 0.5.23 accepts for {canonical}; "
                            f"{_suggest(value, choices)}allowed: {', '.join(choices)}"))
    return out


def env_problem(value: str) -> str | None:
    """Why `value` for SGLANG_SM120_FLASHMLA_BACKEND is refused, or None."""
    if value in SM120_FLASHMLA_VALUES:
        return None
    return (f"{value!r} is not a sparse-MLA backend of SGLang 0.5.23 ({SM120_FLASHMLA_SOURCE} knows "
            f"flashinfer and triton; any other value silently runs the slow torch path); "
            f"{_suggest(value, SM120_FLASHMLA_VALUES)}use one of {', '.join(SM120_FLASHMLA_VALUES)}, or "
            f"drop the variable and set levers.sparse_mla")
