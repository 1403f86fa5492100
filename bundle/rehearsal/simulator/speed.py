"""Simulated speeds and refusals chosen by the server's own parsed arguments (rehearsal only).

`bundle tune` launches one candidate after another with different SGLang flags; on the rehearsal
every candidate would run at the same SIM_TPOT_MS. These two knobs let a test give each candidate
its own (SIMULATED) speed, and make one candidate fail, by what SGLang's parser made of its command
line, so ranking and failure handling are exercised end to end:

- SIM_SPEED_RULES: `FIELD=VALUE:EFFECT[,EFFECT][;...]`, EFFECT `tpot*F`, `ttft*F`, `tpot=MS` or
  `ttft=MS`; FIELD is a ServerArgs field (`moe_runner_backend`, `speculative_algorithm`,
  `kv_cache_dtype`, `cuda_graph_max_bs`, `disable_custom_all_reduce` ...), matched against the value
  as parsed and as SGLang resolves it (`auto` -> `flashinfer_mxfp4`). Every rule that matches
  applies, in order. E.g. `speculative_algorithm=EAGLE:tpot*0.5;moe_runner_backend=triton:tpot*2`.
- SIM_REFUSE_ARGS: `FIELD=VALUE[;...]`: a server whose arguments match exits 1 at start, as a
  server that crashes on a setting its parser accepted.
- SIM_HANG_ARGS: `FIELD=VALUE[;...]`: a server whose arguments match hangs from the start (SIM_HANG:
  /health and generations stop answering), as a server stuck in NCCL set-up.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

EFFECT_METRICS = {"tpot": "tpot_ms", "ttft": "ttft_ms"}


@dataclass(frozen=True)
class Rule:
    field: str
    value: str
    effects: tuple[tuple[str, str, float], ...]  # (knob attribute, "*" or "=", number)

    def text(self) -> str:
        return f"{self.field}={self.value}"


def _shown(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "none" if value is None else str(value)


def _condition(text: str, knob: str) -> tuple[str, str]:
    field, sep, value = text.strip().partition("=")
    if not sep or not field.strip() or not value.strip():
        raise SystemExit(f"worker simulator: {knob}: {text!r} is not FIELD=VALUE "
                         f"(e.g. moe_runner_backend=triton)")
    return field.strip(), value.strip()


def parse_rules(text: str, knob: str = "SIM_SPEED_RULES") -> list[Rule]:
    rules = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        cond, sep, effects_text = part.partition(":")
        if not sep:
            raise SystemExit(f"worker simulator: {knob}: {part!r} has no ':EFFECT' (e.g. {cond}:tpot*0.5)")
        field, value = _condition(cond, knob)
        effects = []
        for effect in filter(None, (e.strip() for e in effects_text.split(","))):
            op = "*" if "*" in effect else "="
            name, _, number = effect.partition(op)
            try:
                amount = float(number)
            except ValueError:
                amount = -1.0
            if name.strip() not in EFFECT_METRICS or amount < 0:
                raise SystemExit(f"worker simulator: {knob}: effect {effect!r} is not tpot*F, ttft*F, "
                                 f"tpot=MS or ttft=MS")
            effects.append((EFFECT_METRICS[name.strip()], op, amount))
        if not effects:
            raise SystemExit(f"worker simulator: {knob}: {part!r} has no effect")
        rules.append(Rule(field, value, tuple(effects)))
    return rules


def _matches(field: str, value: str, fields: dict, resolved: dict) -> bool:
    return any(field in src and _shown(src[field]).lower() == value.lower() for src in (fields, resolved))


def apply_speed_rules(knobs, fields: dict, resolved: dict, text: str | None = None) -> list[str]:
    """Change knobs.tpot_ms / ttft_ms by every matching rule; returns one line per rule applied."""
    text = os.environ.get("SIM_SPEED_RULES", "") if text is None else text
    applied = []
    for rule in parse_rules(text):
        if not _matches(rule.field, rule.value, fields, resolved):
            continue
        for attr, op, amount in rule.effects:
            before = getattr(knobs, attr)
            setattr(knobs, attr, before * amount if op == "*" else amount)
            applied.append(f"{rule.text()}: {attr} {before:g} -> {getattr(knobs, attr):g} (SIMULATED)")
    return applied


def refused(fields: dict, resolved: dict, text: str | None = None) -> str | None:
    """The first SIM_REFUSE_ARGS condition (or those of `text`) the arguments match, or None."""
    text = os.environ.get("SIM_REFUSE_ARGS", "") if text is None else text
    for part in filter(None, (p.strip() for p in text.split(";"))):
        field, value = _condition(part, "SIM_REFUSE_ARGS")
        if _matches(field, value, fields, resolved):
            return f"{field}={value}"
    return None
