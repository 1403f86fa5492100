"""The rehearsal modes: how a topology runs with no GPU. One entry per mode, like the topologies
(bundle/topology.py), on the service floor so it can name what each mode needs from the floors below
(the render's env values, the image and the model it builds).

An entry holds its compose overlay (compose/<overlay>, `{topology}` replaced), what it adds to the
rendered env, its overrides of the servers' arguments, the artifacts it needs before a launch (the
rehearsal image always; a trained model for the engine), whether it takes the simulator's --sim knobs,
whether tune may sweep with it, and its description. The command line parses `--rehearsal` once
(parse()) into a Mode; every service takes that value; a launch record stores its name.

Adding a mode = one entry in MODES + its overlay per topology (tests/test_rehearsal_modes.py makes a
third from an entry and an overlay, and renders it for every topology).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from bundle.errors import EXIT_USAGE, BundleError
from bundle.paths import compose_dir
from bundle.render import rehearsal as sim_render, rehearsal_engine
from bundle.topology import Topology


@dataclass(frozen=True)
class Mode:
    name: str
    summary: str  # what runs, a few words: "launching pd (rehearsal: simulated workers)"
    description: str  # one line for --help
    overlay: str  # its compose overlay under compose/, "{topology}" replaced by the topology's name
    env: Callable[[str, Mapping[str, str]], dict[str, str]]  # (rehearsal image tag, --sim knobs) -> env
    server_args: Callable[[Topology, dict[str, str]], dict[str, str]] | None = None  # render's overrides
    needs_model: bool = False  # a model made here (images/rehearsal_model.py) before it launches
    takes_knobs: bool = False  # the simulator's --sim KNOB=VALUE
    tunable: bool = True  # `bundle tune` may sweep with it (its speeds say something about the levers)

    def overlay_file(self, topology: Topology) -> Path:
        return compose_dir() / self.overlay.format(topology=topology.name)

    def env_values(self, knobs: Mapping[str, str] | None = None) -> dict[str, str]:
        """What it adds to the rendered env: the image's tag and the model folder (both known before
        anything is built, from hashes of their inputs), health waits, the simulator's knobs."""
        # Imported here: naming the image reads its inputs only, and must not load the Docker client.
        from bundle.images import rehearsal as rehearsal_image

        return self.env(rehearsal_image.image_tag(), dict(knobs or {}))

    def ensure_artifacts(self, report) -> str:
        """Build the rehearsal image if its inputs changed (and train the model it needs if missing);
        returns the image's tag."""
        from bundle.images import rehearsal as rehearsal_image

        tag = rehearsal_image.ensure_image(report=report)
        if self.needs_model:
            from bundle.images.rehearsal_model import ensure_model

            ensure_model(tag, report=report)
        return tag


def _engine_env(tag: str, knobs: Mapping[str, str]) -> dict[str, str]:
    from bundle.images.rehearsal_model import model_dir

    return rehearsal_engine.env_values(tag, model_dir(tag))


def _sim_env(tag: str, knobs: Mapping[str, str]) -> dict[str, str]:
    return sim_render.env_values(tag, knobs=dict(knobs))


MODES: dict[str, Mode] = {
    "engine": Mode("engine", "the real SGLang server on CPU",
                   "the real SGLang server on CPU with a small model made here (docs/rehearsal.md)",
                   overlay="rehearsal-engine-{topology}.yaml", env=_engine_env,
                   server_args=rehearsal_engine.server_arg_overrides, needs_model=True,
                   # The CPU engine's speed says nothing about a GPU host's levers.
                   tunable=False),
    "sim": Mode("sim", "simulated workers",
                "worker simulators behind the real router (speeds are the simulator's settings)",
                overlay="rehearsal-{topology}.yaml", env=_sim_env, takes_knobs=True),
}
NAMES = tuple(MODES)
BARE = "engine"  # `--rehearsal` alone, without --sim knobs
BARE_WITH_KNOBS = "sim"  # `--rehearsal` alone with --sim knobs: the mode that takes them


def get(name: str) -> Mode:
    try:
        return MODES[name]
    except KeyError:
        raise BundleError(f"unknown rehearsal {name!r}", exit_code=EXIT_USAGE,
                          hint=f"use --rehearsal {' or --rehearsal '.join(MODES)}") from None


def parse(value: str | bool | None, *, knobs: bool = False, tuning: bool = False) -> Mode | None:
    """A mode from the command line or a launch record: None or False (no rehearsal), a mode's name,
    BARE_FLAG (`--rehearsal` alone: BARE; the mode that takes knobs when --sim gave some, or when
    `tuning`, the first tunable one), or True (a launch record of an older driver: the simulator)."""
    if value is None or value is False:
        return None
    if value is True:
        return MODES[BARE_WITH_KNOBS]
    if value == BARE_FLAG:
        if tuning:
            return next(m for m in MODES.values() if m.tunable)
        return MODES[BARE_WITH_KNOBS if knobs else BARE]
    return get(value)


BARE_FLAG = "default"  # what argparse stores for `--rehearsal` given without a value


def name_of(mode: Mode | None) -> str | None:
    """What a launch record stores."""
    return mode.name if mode else None
