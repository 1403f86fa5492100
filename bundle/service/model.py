"""ModelRequest -> the checkpoint pinned in the lock (docker/lock.toml [model], [model_0731]): its manifest
pinned from the Hub (pin), the pinned revision downloaded into the model folder (fetch), a folder
identified and compared with its checkpoint's manifest (identify, then compare)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bundle.errors import InputError
from bundle.images import model
from bundle.images.model import CHECKPOINT_TABLES, DEFAULT_CHECKPOINT  # noqa: F401  (the checkpoints, for the verb)
from bundle.lock import Lock, load_lock
from bundle.rules import checkpoint
from bundle.service.prepare import load


@dataclass(frozen=True)
class ModelRequest:
    checkpoint: str = model.DEFAULT_CHECKPOINT  # for pin and fetch; a folder compared names its own
    path: Path | None = None  # the model folder (None: model.path of the config)
    config: str | None = None  # the bundle.yaml whose model.path is meant (None: the usual search)
    revision: str | None = None  # pin: the commit (None: the Hub's main)
    image: str | None = None  # whose huggingface_hub reaches the Hub (None: the lock's image)
    sha256: bool = False  # compare: also hash every shard


@dataclass(frozen=True)
class Checkpoint:
    """The lock's entry for one checkpoint, and the folder it is fetched into or compared with."""

    lock: Lock
    which: str  # original | 0731
    table: str  # its table in the lock
    pin: model.ModelPin
    image: str
    folder: Path | None  # None for pin


@dataclass(frozen=True)
class Pinned:
    checkpoint: Checkpoint
    revision: str
    files: int  # entries written to the manifest


@dataclass(frozen=True)
class Identified:
    checkpoint: Checkpoint
    info: checkpoint.CheckpointInfo | None  # None: no readable config.json

    @property
    def refused(self) -> str | None:
        """Why this checkpoint cannot be served here, else None."""
        return self.info.refused if self.info is not None else None


@dataclass(frozen=True)
class Compared:
    checkpoint: Checkpoint
    differences: list[model.Difference]  # each file that differs from the manifest


def _checkpoint(request: ModelRequest, *, folder: bool, identify: bool = False) -> Checkpoint:
    lock = load_lock()
    where = Path(request.path or load(request.config).model_path).expanduser() if folder else None
    which = model.checkpoint_of(where) if identify else request.checkpoint
    table = model.CHECKPOINT_TABLES[which]
    pin = model.model_pin(lock, which)
    if pin is None:
        raise InputError(f"{lock.path}: no [{table}] table",
                         hint=f'add [{table}] with repo = "deepseek-ai/{model.CHECKPOINT_NAMES[which]}", '
                              f'revision = "" and [{table}.files], then `bundle model pin --checkpoint {which}`')
    return Checkpoint(lock, which, table, pin, request.image or lock.image_ref, where)


def pin(request: ModelRequest) -> Pinned:
    """The repo's files at the revision read from the Hub, written into the lock."""
    found = _checkpoint(request, folder=False)
    revision, manifest = model.pin(found.image, found.pin, request.revision)
    model.write_pin(found.lock, revision, manifest, found.which)
    return Pinned(found, revision, len(manifest))


def fetch(request: ModelRequest, report: Callable[[str], None]) -> Compared:
    """The pinned revision downloaded into the folder (progress on `report`), then compared."""
    found = _checkpoint(request, folder=True)
    return Compared(found, model.fetch(found.image, found.pin, found.folder, report=report))


def identify(request: ModelRequest) -> Identified:
    """Which checkpoint the folder holds (from its config.json and files), and the lock's entry for it."""
    found = _checkpoint(request, folder=True, identify=True)
    return Identified(found, checkpoint.identify(found.folder))


def compare(request: ModelRequest, identified: Identified) -> Compared:
    """The folder against its checkpoint's manifest: sizes, and every shard's sha256 when asked."""
    found = identified.checkpoint
    if not found.pin.pinned:
        raise InputError(f"{found.lock.path}: {found.table}.revision is not pinned for {found.pin.repo}: "
                         "nothing to check against",
                         hint=f"run `bundle model pin --checkpoint {found.which}` on a host that reaches the Hub")
    return Compared(found, model.check_folder(found.folder, found.pin, shards_sha256=request.sha256))
