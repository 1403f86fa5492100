"""The rehearsal modes: how a topology runs with no GPU. One entry per mode (a bundle.api.Mode), each
its wing's own (bundle/rehearsal/engine/, bundle/rehearsal/sim/); the registry stands above them and
below the services that take a mode.

An entry holds its compose overlay (compose/<overlay>, `{topology}` replaced), what it adds to the
rendered env, its overrides of the servers' arguments, the artifacts it needs before a launch (the
rehearsal image always; a trained model for the engine), whether it takes the simulator's --sim knobs,
whether tune may sweep with it, its description and what tables of its figures say. The entry points
(bundle/cli.py, tests/conftest.py, docsgen) install this module as the core's bundle.modes.Registry, with
the words the core's records and messages use (RECORD_KEY, FLAG, WORD, HINT, IMAGE_LABEL, IMAGE_VARIABLE,
MODEL_MARKER): no module outside this package names the modes. The command line parses `--rehearsal` once
(parse(): a mode's name, or BARE_FLAG, the typed value `--rehearsal` alone stores) into a Mode; every
service takes that value; a launch record stores its name (name_of()), read back by from_record(), the
True and False of older records too.

Adding a mode = its folder under bundle/rehearsal/ with its MODE, one line in MODES, and its overlay per topology (tests/test_rehearsal_modes.py makes a
third from an entry and an overlay, and renders it for every topology).
"""

from __future__ import annotations

from bundle.api import Mode
from bundle.errors import UsageError
from bundle.rehearsal import engine
from bundle.rehearsal import sim


MODES: dict[str, Mode] = {m.name: m for m in (
    engine.MODE,
    sim.MODE,
)}
NAMES = tuple(MODES)
BARE = "engine"  # `--rehearsal` alone, without --sim knobs
BARE_WITH_KNOBS = "sim"  # `--rehearsal` alone with --sim knobs: the mode that takes them

# The words the core uses for these modes (bundle/modes.py asks them here; defined once).
RECORD_KEY = "rehearsal"  # a launch record's, a bench record's, `status --json`'s key: records on disk keep it
FLAG = "--rehearsal"
WORD = "rehearsal"
HINT = "add --rehearsal to rehearse without GPUs"  # where a message says how to run with no GPU
IMAGE_LABEL = "rehearsal"  # io.sglang-bundle.image of docker/rehearsal.Dockerfile
IMAGE_VARIABLE = "REHEARSAL_IMAGE"  # the rendered env's name for the image the modes run in
# config.json key of the engine's trained model (engine/model.py writes it): never served on a GPU host.
MODEL_MARKER = "sglang_bundle_rehearsal_only"


def get(name: str) -> Mode:
    try:
        return MODES[name]
    except KeyError:
        raise UsageError(f"unknown rehearsal {name!r}",
                         hint=f"use --rehearsal {' or --rehearsal '.join(MODES)}") from None


class Bare:
    """`--rehearsal` given without a mode's name: the mode is chosen by what else was asked (bare())."""

    def __repr__(self) -> str:
        return "BARE_FLAG"


BARE_FLAG = Bare()  # the one value the command line stores for `--rehearsal` given alone


def bare(*, knobs: bool = False, tuning: bool = False) -> Mode:
    """The mode `--rehearsal` alone means: BARE; the mode that takes knobs when --sim gave some; when
    `tuning`, the first tunable one."""
    if tuning:
        return next(m for m in MODES.values() if m.tunable)
    return MODES[BARE_WITH_KNOBS if knobs else BARE]


def parse(value: str | Bare | None, *, knobs: bool = False, tuning: bool = False) -> Mode | None:
    """A mode from the command line: None (no rehearsal), a mode's name (unknown: a usage error), or
    BARE_FLAG (`--rehearsal` alone, see bare())."""
    if value is None:
        return None
    if isinstance(value, Bare):
        return bare(knobs=knobs, tuning=tuning)
    return get(value)


def from_record(value: str | bool | None) -> Mode | None:
    """The mode a launch record names (what name_of() stored): a mode's name, None; from an older
    driver, True (the simulator) or False (none)."""
    if value is None or value is False:
        return None
    if value is True:
        return MODES[BARE_WITH_KNOBS]
    return get(value)


def name_of(mode: Mode | None) -> str | None:
    """What a launch record stores."""
    return mode.name if mode else None
