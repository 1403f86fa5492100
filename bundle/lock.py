"""The one lock of every pin (docker/lock.toml) and the hash that names images and caches.

`load_lock()` validates every pin before anything starts and returns a `Lock`:
- `Lock.hash`: 12 hex chars of sha256 over what the image holds: the lock's pins (the `[image]`
  table excluded, see `_hashed_view`) and the hashed requirement locks docker/requirements/*.txt.
  The runtime image carries it as the label `io.sglang-bundle.lock-hash`; the JIT cache volumes
  are named from it, so a new stack never reuses a stale cache.
- `Lock.image_ref`: `<repo>:lock-<hash>`, the final runtime image of this lock.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from bundle import paths
from bundle.config import schema_check
from bundle.config.source import parse_toml
from bundle.errors import ConfigError

LOCK_HASH_LABEL = "io.sglang-bundle.lock-hash"
HASH_LENGTH = 12

_FIX = "edit docker/lock.toml (see docs/images.md, 'The lock'), then `make lock`"


@dataclass(frozen=True)
class Lock:
    path: Path
    data: dict = field(repr=False)
    hash: str
    pins: dict[str, str]
    image_repo: str
    published_digest: str | None
    requirement_locks: tuple[Path, ...] = ()

    @property
    def image_tag(self) -> str:
        return f"lock-{self.hash}"

    @property
    def image_ref(self) -> str:
        return f"{self.image_repo}:{self.image_tag}"

    @property
    def sglang_source(self) -> str:
        return self.data["sglang"]["source"]

    def table(self, name: str) -> dict:
        return dict(self.data.get(name, {}))


SCHEMA_PATH = Path(__file__).resolve().with_name("lock.schema.json")


@lru_cache(maxsize=1)
def _schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


def default_lock_path() -> Path:
    return paths.docker_dir() / "lock.toml"


def requirements_dir(lock_path: Path) -> Path:
    return lock_path.parent / "requirements"


def load_lock(path: Path | None = None) -> Lock:
    """Read and validate the lock; raise one ConfigError listing every bad or missing pin.
    Read once per process: a second call for the same unchanged file returns the same Lock."""
    path = Path(path) if path is not None else default_lock_path()
    return _read_lock(path, _version(path))


def _version(path: Path) -> tuple | None:
    """(mtime, size) of the lock and of each hashed requirement lock: what the Lock is made of."""
    try:
        files = [path, *sorted(requirements_dir(path).glob("*.txt"))]
        return tuple((f.name, f.stat().st_mtime_ns, f.stat().st_size) for f in files)
    except OSError:
        return None  # missing or unreadable: _read_lock says so


@lru_cache(maxsize=8)
def _read_lock(path: Path, version: tuple | None) -> Lock:
    """`version` is part of the cache key: an edited lock (or requirement lock) is read again."""
    source = str(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError([(f"the lock file does not exist; fix: restore it from git "
                            f"(`git checkout -- {path.name}`) or pass the right path")],
                          source=source) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError([f"{source}: not UTF-8 text (byte {exc.start}); fix: {_FIX}"], source=source) from None
    parsed = parse_toml(text, source)
    problems = schema_check.problems(parsed.data, _schema(), parsed, fix=_FIX)
    if problems:
        raise ConfigError(problems, source=source)
    data = parsed.data

    req_locks = tuple(sorted(requirements_dir(path).glob("*.txt")))
    return Lock(
        path=path,
        data=data,
        hash=compute_hash(data, req_locks),
        pins=_flat_pins(data),
        image_repo=data["image"]["repo"],
        published_digest=data["image"].get("published_digest") or None,
        requirement_locks=req_locks,
    )


def _hashed_view(data: dict) -> dict:
    """The lock without [image], [model], [model_0731], [standin] and [monitoring]: where an image is
    published (repo, digest) is not what it holds, and the digest is recorded after publishing, which must
    not change the hash it was built from; the checkpoints are not in the image either, nor the stand-in
    base of a build without a GPU, nor the monitoring profile's images (the lock file pins them all; the
    hash names what the GPU image holds)."""
    return {k: v for k, v in data.items() if k not in ("image", "model", "model_0731", "standin", "monitoring")}


def compute_hash(data: dict, requirement_locks: tuple[Path, ...] | list[Path]) -> str:
    digest = hashlib.sha256()
    digest.update(json.dumps(_hashed_view(data), sort_keys=True, separators=(",", ":")).encode())
    for req in sorted(requirement_locks, key=lambda p: p.name):
        digest.update(b"\0" + req.name.encode() + b"\0")
        # Line endings are normalised so a checkout on another OS hashes the same.
        digest.update(req.read_bytes().replace(b"\r\n", b"\n"))
    return digest.hexdigest()[:HASH_LENGTH]


def _flat_pins(data: dict) -> dict[str, str]:
    """One flat view for reports and checks: Python packages by PyPI name, plus the base pins."""
    base, overlay, sglang = data["base"], data["overlay"], data["sglang"]
    pins = {
        "cuda": base["cuda"],
        "apt_snapshot": base["apt_snapshot"],
        "python": base["python"],
        "uv": base["uv"],
        "cuda_arch_list": base["cuda_arch_list"],
        "overlay": overlay["version"],
        "sglang_source": sglang["source"],
    }
    if sglang["source"] == "git":
        pins["sglang_git_commit"] = sglang["git_commit"]
    pins.update({f"cuda_{name}": str(v) for name, v in data["cuda"].items()})
    pins.update({name: str(v) for name, v in data["python"].items()})
    return pins
