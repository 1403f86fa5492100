"""The CPU engine rehearsal: the compose file's own SGLang command line on the pinned SGLang server on CPU,
serving a small model made here (docs/rehearsal.md).

server.py  what it changes in the rendered env and the servers' arguments
model.py   the model it serves, trained once per rehearsal image and kept in the engine

MODE is its one entry in bundle/rehearsal/registry.py.
"""

from __future__ import annotations

from collections.abc import Mapping

from bundle.api import Mode
from bundle.rehearsal.engine import server
from bundle.rehearsal.shared import artifacts


def _env(tag: str, knobs: Mapping[str, str]) -> dict[str, str]:
    from bundle.rehearsal.engine.model import model_dir

    return server.env_values(tag, model_dir(tag))


def _ensure_model(tag: str, *, report) -> object:
    from bundle.rehearsal.engine.model import ensure_model

    return ensure_model(tag, report=report)


MODE = Mode("engine", "the real SGLang server on CPU",
            "the real SGLang server on CPU with a small model made here (docs/rehearsal.md)",
            overlay="rehearsal-engine-{topology}.yaml", env=_env,
            image_tag=artifacts.image_tag, ensure_image=artifacts.ensure_image,
            server_args=server.server_arg_overrides, ensure_model=_ensure_model,
            # The CPU engine's speed says nothing about a GPU host's levers.
            tunable=False,
            notes={"kind": "a CPU engine rehearsal",
                   "table": " (CPU engine rehearsal: real SGLang on CPU, a 1 M-parameter model; not a GPU measurement)",
                   "table short": " (CPU engine rehearsal)",
                   "plot": "CPU engine rehearsal (real SGLang on CPU, not a GPU measurement): "})
