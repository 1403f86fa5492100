"""The simulator's knobs: read from SIM_* environment variables, changeable at run time through
the admin endpoint (POST /sim/faults), so a test can let a worker become healthy and then fail it."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields

# SGLang's sm_120 sparse-MLA switches from its decode kernel to its prefill path above this many
# query tokens (SM120_DECODE_MAX_TOKENS in sglang/kernels/ops/attention/flash_mla_sm120.py).
LONG_PROMPT_TOKENS = 64


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    try:
        return float(raw) if raw else default
    except ValueError:
        raise SystemExit(f"worker simulator: {name}={raw!r} is not a number") from None


def _env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    return default if not raw else raw in ("1", "true", "yes", "on")


@dataclass
class Knobs:
    """Everything a rehearsal can tune. Times in seconds / milliseconds as named."""

    load_seconds: float = 2.0  # SIM_LOAD_SECONDS: /health is 503 this long after start ("weights")
    ttft_ms: float = 50.0  # SIM_TTFT_MS: time to first token (prefill time)
    tpot_ms: float = 10.0  # SIM_TPOT_MS: time per output token after the first
    wrong_answers: bool = False  # SIM_WRONG_ANSWERS: answer known questions wrongly
    failure_rate: float = 0.0  # SIM_FAILURE_RATE: share of generations answered with HTTP 500
    hang: bool = False  # SIM_HANG: generations and /health stop answering
    crash_after_requests: int = 0  # SIM_CRASH_AFTER_REQUESTS: exit(1) on the Nth generation (0: never)
    seed: int = 0  # SIM_SEED: seeds the failure draws and sampled (temperature > 0) outputs
    # SIM_REPEAT_TOKEN: every output step emits the same token (the answer's last word, repeated up
    # to max_tokens): the degenerate output reported on sm_120 (vLLM #52938), for smoke to catch.
    repeat_token: bool = False
    # SIM_LONG_PROMPT_FAIL: prompts over LONG_PROMPT_TOKENS tokens fail with HTTP 500 where the prompt
    # is prefilled (tp4's server, pd's prefill): SGLang's other sm_120 path above 64 tokens, which
    # had no kernel instance for DeepSeek-V4's TP4 shape (flashinfer #5135).
    long_prompt_fail: bool = False
    # SIM_KV_WAIT_SECS: how long decode waits for prefill's KV before failing the request; SGLang's
    # own SGLANG_DISAGGREGATION_WAITING_TIMEOUT (the compose files set it) is the default.
    kv_wait_secs: float = 300.0
    # SGLANG_TEST_DISAGG_FAILURE_PROB: SGLang's own fault injection (disaggregation/utils.py): on
    # decode, the share of KV transfers whose poll reports Failed; the request is aborted with 500.
    disagg_failure_prob: float = 0.0
    kv_gb_s: float = 20.0  # SIM_KV_GB_S: the KV transfer speed prefill (the sender) reports (cuda_ipc-like; ~1 is TCP's)
    # SIM_LOAD_BAR_UPDATES: during the load, SGLang's "Multi-thread loading shards" tqdm bar rewritten
    # this many times with "\r" before its newline (0: none). The default writes ~40 KB on one line,
    # more than Docker's 16 KB log buffer, so every rehearsal's readiness wait reads the stamped pieces
    # a GPU host's dozens of shards produce (a bar's first word once ended launch in a traceback).
    load_bar_updates: int = 400

    @classmethod
    def from_env(cls) -> Knobs:
        return cls(
            load_seconds=_env_float("SIM_LOAD_SECONDS", cls.load_seconds),
            ttft_ms=_env_float("SIM_TTFT_MS", cls.ttft_ms),
            tpot_ms=_env_float("SIM_TPOT_MS", cls.tpot_ms),
            wrong_answers=_env_bool("SIM_WRONG_ANSWERS"),
            failure_rate=_env_float("SIM_FAILURE_RATE", 0.0),
            hang=_env_bool("SIM_HANG"),
            crash_after_requests=int(_env_float("SIM_CRASH_AFTER_REQUESTS", 0)),
            seed=int(_env_float("SIM_SEED", 0)),
            repeat_token=_env_bool("SIM_REPEAT_TOKEN"),
            long_prompt_fail=_env_bool("SIM_LONG_PROMPT_FAIL"),
            kv_wait_secs=_env_float(
                "SIM_KV_WAIT_SECS", _env_float("SGLANG_DISAGGREGATION_WAITING_TIMEOUT", 300.0)),
            kv_gb_s=_env_float("SIM_KV_GB_S", 20.0),
            load_bar_updates=int(_env_float("SIM_LOAD_BAR_UPDATES", cls.load_bar_updates)),
            disagg_failure_prob=_env_float("SGLANG_TEST_DISAGG_FAILURE_PROB", 0.0),
        )

    def update(self, changes: dict) -> None:
        """Apply {knob: value} from the admin endpoint; unknown knobs or bad values raise ValueError."""
        known = {f.name: f.type for f in fields(self)}
        for name, value in changes.items():
            if name not in known:
                raise ValueError(f"unknown knob {name!r}; known: {sorted(known)}")
            current = getattr(self, name)
            if isinstance(current, bool):
                if not isinstance(value, bool):
                    raise ValueError(f"{name} takes true or false")  # noqa: TRY004 (one error type: HTTP 400)
            elif isinstance(current, (int, float)):
                if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                    raise ValueError(f"{name} takes a number >= 0")
                value = type(current)(value)
            setattr(self, name, value)

    def as_dict(self) -> dict:
        return asdict(self)
