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
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from bundle import paths
from bundle.errors import ConfigError

LOCK_HASH_LABEL = "io.sglang-bundle.lock-hash"
HASH_LENGTH = 12

# A base image pinned by tag and digest, e.g. nvidia/cuda:13.0.2-cudnn-devel-ubuntu24.04@sha256:<64 hex>.
_IMAGE_PIN = re.compile(r"^[a-z0-9][a-z0-9._/-]*:[A-Za-z0-9][A-Za-z0-9._-]*@sha256:[0-9a-f]{64}$")
# An exact version: no ranges, no wildcards (PEP 440 release, optional pre/post/local segment).
_EXACT_VERSION = re.compile(r"^[0-9]+(\.[0-9]+)*((a|b|rc|\.post|\.dev)[0-9]+)*(\+[a-z0-9.]+)?$")
_MAJOR_MINOR_PATCH = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$")
_PYTHON_VERSION = re.compile(r"^3\.[0-9]+$")
_CUDA_ARCH_LIST = re.compile(r"^[0-9]+\.[0-9]+a?( [0-9]+\.[0-9]+a?)*$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_REPO = re.compile(r"^[a-z0-9][a-z0-9._/:-]*[a-z0-9]$")

# Every Python package of the image stack, by its PyPI name: each must have an exact pin in [python].
PYTHON_PACKAGES = (
    "torch",
    "sglang",
    "sglang-kernel",
    "flashinfer-python",
    "tilelang",
    "nixl-cu13",
    "sglang-router",
    # The build backend of the kernel overlay and of SGLang built from a commit (installed in the
    # base layer, so both build with --no-build-isolation and nothing unpinned is fetched).
    "setuptools",
)
# Published on PyPI only for some flashinfer versions (none for 0.7.2): pinned when present.
OPTIONAL_PYTHON_PACKAGES = ("flashinfer-cubin", "flashinfer-jit-cache")

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


def default_lock_path() -> Path:
    return paths.docker_dir() / "lock.toml"


def requirements_dir(lock_path: Path) -> Path:
    return lock_path.parent / "requirements"


def load_lock(path: Path | None = None) -> Lock:
    """Read and validate the lock; raise one ConfigError listing every bad or missing pin."""
    path = Path(path) if path is not None else default_lock_path()
    source = str(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError([(f"the lock file does not exist; fix: restore it from git "
                            f"(`git checkout -- {path.name}`) or pass the right path")],
                          source=source) from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError([f"not valid TOML: {exc}; fix: {_FIX}"], source=source) from None

    problems = _validate(data)
    if problems:
        raise ConfigError(problems, source=source)

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
    """The lock without [image]: where an image is published (repo, digest) is not what it holds,
    and the digest is recorded after publishing, which must not change the hash it was built from."""
    return {k: v for k, v in data.items() if k != "image"}


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
        "base_image": base["image"],
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
    pins.update({name: str(v) for name, v in data["python"].items()})
    return pins


def _validate(data: dict) -> list[str]:
    problems: list[str] = []

    def need(table: str, key: str, pattern: re.Pattern | None, what: str, *, optional: bool = False):
        section = data.get(table)
        if not isinstance(section, dict):
            return None
        if key not in section:
            if not optional:
                problems.append(f"{table}.{key}: missing; expected {what}; fix: {_FIX}")
            return None
        value = section[key]
        if not isinstance(value, str):
            problems.append(f"{table}.{key}: must be a quoted string ({what}), got {value!r}; fix: {_FIX}")
            return None
        if pattern is not None and not pattern.match(value):
            problems.append(f"{table}.{key}: {value!r} is not {what}; fix: {_FIX}")
            return None
        return value

    for table in ("image", "base", "python", "sglang", "overlay"):
        if not isinstance(data.get(table), dict):
            problems.append(f"[{table}]: table missing; fix: {_FIX}")

    need("image", "repo", _REPO, "an image repository name such as sglang-bundle/sglang-sm120 or ghcr.io/org/sglang-sm120")
    digest = data.get("image", {}).get("published_digest", "") if isinstance(data.get("image"), dict) else ""
    if digest:
        need("image", "published_digest", _DIGEST, "'' (not published) or sha256:<64 hex>")

    need("base", "image", _IMAGE_PIN, "an image pinned as name:tag@sha256:<64 hex>")
    need("base", "cuda", _MAJOR_MINOR_PATCH, "a CUDA version such as 13.0.2")
    need("base", "apt_snapshot", re.compile(r"^[0-9]{8}T[0-9]{6}Z$"),
         "an Ubuntu snapshot id such as 20261101T000000Z")
    need("base", "python", _PYTHON_VERSION, "a Python minor version such as 3.12")
    need("base", "uv", _EXACT_VERSION, "an exact uv version such as 0.9.7")
    need("base", "cuda_arch_list", _CUDA_ARCH_LIST, "a TORCH_CUDA_ARCH_LIST such as '12.0'")

    for name in PYTHON_PACKAGES:
        need("python", name, _EXACT_VERSION, "an exact version (==), no range or wildcard")
    for name in OPTIONAL_PYTHON_PACKAGES:
        need("python", name, _EXACT_VERSION, "an exact version", optional=True)
    if isinstance(data.get("python"), dict):
        known = set(PYTHON_PACKAGES) | set(OPTIONAL_PYTHON_PACKAGES)
        for extra in sorted(set(data["python"]) - known):
            problems.append(f"python.{extra}: not a package of the image stack (known: "
                            f"{', '.join(sorted(known))}); fix: remove it or add it to bundle/lock.py")

    source = need("sglang", "source", re.compile(r"^(pypi|git)$"), "'pypi' or 'git'")
    need("sglang", "git_repo", re.compile(r"^https://\S+$"), "an https URL of the SGLang repository")
    if source == "git":
        need("sglang", "git_commit", _COMMIT, "a full 40-hex commit of SGLang main (source = 'git')")

    need("overlay", "version", _EXACT_VERSION, "the kernel overlay's version such as 0.0.0")
    need("overlay", "path", re.compile(r"^[A-Za-z0-9._/-]+$"), "a folder relative to the project root")
    return problems
