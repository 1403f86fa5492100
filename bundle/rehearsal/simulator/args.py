"""The simulator's command line: exactly `python3 -m sglang.launch_server`'s.

The rehearsal keeps the compose `command:` of the real topologies and only swaps the image and the
entrypoint, so the simulator receives `python3 -m sglang.launch_server --model-path ...` (and
`--api-key KEY` appended by bundle-entrypoint). It parses that with SGLang's own parser when SGLang
imports (the rehearsal image has it): a misspelled flag then fails here exactly as on a GPU host,
and /server_info echoes every one of SGLang's fields. Without SGLang (a bare dev machine) it falls
back to FALLBACK_OPTIONS, the subset the bundle's compose files and driver use.
"""

from __future__ import annotations

import argparse
import logging
import os
from dataclasses import dataclass, field

LAUNCH_PREFIXES = (["-m", "sglang.launch_server"], ["sglang", "serve"])

# (flag, type, default) of the documented subset the fallback parser knows.
FALLBACK_OPTIONS = [
    ("--model-path", str, None), ("--tokenizer-path", str, None), ("--served-model-name", str, None),
    ("--host", str, "127.0.0.1"), ("--port", int, 30000), ("--tp-size", int, 1),
    ("--base-gpu-id", int, 0), ("--kv-cache-dtype", str, "auto"), ("--moe-runner-backend", str, "auto"),
    ("--attention-backend", str, None), ("--disaggregation-mode", str, "null"),
    ("--disaggregation-transfer-backend", str, "mooncake"), ("--disaggregation-bootstrap-port", int, 8998),
    ("--api-key", str, None), ("--admin-api-key", str, None), ("--context-length", int, None),
    ("--mem-fraction-static", float, None), ("--log-level", str, "info"),
    ("--cuda-graph-max-bs", int, None), ("--speculative-algorithm", str, None),
]
FALLBACK_FLAGS = ["--enable-metrics", "--disable-cuda-graph", "--disable-custom-all-reduce",
                  "--trust-remote-code", "--skip-server-warmup"]


@dataclass
class LaunchArgs:
    """What the simulator needs, plus every field as SGLang's parser produced it (for /server_info)."""

    fields: dict
    launch_command: str
    parser: str  # "sglang" or "fallback"
    ignored: list[str] = field(default_factory=list)  # flags the fallback parser did not know

    def get(self, name: str, default=None):
        value = self.fields.get(name)
        return default if value is None else value

    @property
    def model_path(self) -> str:
        return self.get("model_path", "/model")

    @property
    def tokenizer_path(self) -> str:
        return self.get("tokenizer_path", self.model_path)

    @property
    def served_model_name(self) -> str:
        return self.get("served_model_name", self.model_path)

    @property
    def disaggregation_mode(self) -> str:
        return str(self.get("disaggregation_mode", "null"))


def strip_launch_prefix(argv: list[str]) -> list[str]:
    """Drop `python3 -m sglang.launch_server` (or `sglang serve`) in front of the arguments."""
    args = list(argv)
    if args and args[0] == "--":
        args = args[1:]
    for prefix in LAUNCH_PREFIXES:
        for start in (0, 1):  # `-m sglang.launch_server`, or `python3 -m ...`
            if args[start:start + len(prefix)] == prefix and (
                    start == 0 or os.path.basename(args[0]).startswith("python")):
                return args[start + len(prefix):]
    return args


def _plain(value):
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_plain(v) for v in value]
    return str(value)


def _parse_with_sglang(args: list[str]) -> LaunchArgs:
    from sglang.srt.server_args import ServerArgs, prepare_server_args, record_fields

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    server_args = prepare_server_args(args)  # argparse errors exit 2, as the real server does
    root.handlers[:], root.level = handlers, level  # prepare_server_args resets logging
    values = {f.name: _plain(getattr(server_args, f.name, None)) for f in record_fields(ServerArgs)}
    return LaunchArgs(values, server_args.launch_command or " ".join(args), "sglang")


def _parse_fallback(args: list[str]) -> LaunchArgs:
    parser = argparse.ArgumentParser(prog="sglang serve (worker simulator, fallback parser)")
    for flag, kind, default in FALLBACK_OPTIONS:
        parser.add_argument(flag, type=kind, default=default)
    for flag in FALLBACK_FLAGS:
        parser.add_argument(flag, action="store_true")
    known, unknown = parser.parse_known_args(args)
    return LaunchArgs(vars(known), " ".join(args), "fallback", ignored=unknown)


def parse_launch_args(argv: list[str], *, use_sglang: bool | None = None) -> LaunchArgs:
    """Parse a launch_server command line; SGLang's parser unless SIM_ARG_PARSER=fallback."""
    args = strip_launch_prefix(argv)
    if use_sglang is None:
        use_sglang = os.environ.get("SIM_ARG_PARSER", "sglang") != "fallback"
    if use_sglang:
        try:
            return _parse_with_sglang(args)
        except ImportError as exc:
            logging.getLogger("simulator").warning(
                "SGLang's parser does not import (%s): using the fallback subset", exc)
    return _parse_fallback(args)
