"""The ways to run a topology with no GPU (a bundle.api.Mode each), as the core sees them: their registry,
handed in by the entry point that knows it (bundle/cli.py; the test suite's conftest; docsgen), as the
wings' config sections are (config/loader.py: install_sections). Their package stands above the core,
and no module below the verbs names it.

The core asks a Mode what it needs (its overlay, its env, its artifacts, what its figures are) and this
module for the rest: the mode a record names, and the words that the records' keys and the messages use,
which the modes' package defines once."""

from __future__ import annotations

from typing import Any, Protocol


class Registry(Protocol):
    """What the core asks of the modes' registry (a module)."""

    MODES: dict[str, Any]  # name -> bundle.api.Mode
    RECORD_KEY: str  # the key naming the mode in a launch record, a bench record and `status --json`
    FLAG: str  # the command line's flag that picks a mode
    WORD: str  # what the messages call a run in one of the modes
    HINT: str  # how a message tells the user to run with no GPU
    IMAGE_LABEL: str  # the io.sglang-bundle.image label of the image the modes run in
    IMAGE_VARIABLE: str  # the rendered env's name for that image
    MODEL_MARKER: str  # the config.json key of a model made for a mode: never served on a GPU host

    def from_record(self, value: Any) -> Any: ...


_registry: Registry | None = None


def install(registry: Registry) -> None:
    """Use this registry from now on; called once by each entry point."""
    global _registry
    _registry = registry


def registry() -> Registry:
    if _registry is None:  # a programming error of a new entry point, not a user's: say what it forgot
        raise RuntimeError("the no-GPU modes were never installed: call bundle.modes.install(...) first, as "
                           "bundle/cli.py does")
    return _registry


def from_record(value: Any) -> Any:
    """The Mode a record's value names (None: a GPU run), old records' values too."""
    return registry().from_record(value)


def record_value(mode: Any) -> str | None:
    """What a record stores for `mode` (None: a GPU run)."""
    return mode.name if mode else None


def record_key() -> str:
    return registry().RECORD_KEY


def flag() -> str:
    return registry().FLAG


def word() -> str:
    return registry().WORD


def note(name: str | None, where: str) -> str:
    """What a table, plot or report says of the figures of the mode named `name` (`where`: a key of
    Mode.notes); "" for a GPU run or a mode that says nothing there."""
    mode = registry().MODES.get(name) if name else None
    return mode.notes.get(where, "") if mode else ""
