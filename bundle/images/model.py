"""The checkpoint in the lock (docker/lock.toml [model]): repo id, revision and a manifest of its
files, and the model folder checked against it.

The manifest maps each file of the repo at that revision to `sha256:<hex>` (small files: config,
tokenizer, index, generation config) or `size:<bytes> sha256:<hex>` (weight shards: the size is
checked every time, the sha256 on request, since hashing ~150 GB takes minutes).

`pin` and `fetch` use huggingface_hub from the image itself (the lock pins its version), in a
container with the model folder mounted, so the host needs nothing beyond Docker. They need a host
that reaches the Hugging Face Hub; neither has run on the development machine, which cannot.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from bundle.errors import EnvironmentProblem, Failed, InputError
from bundle.lock import Lock
from bundle.rules import checkpoint

# Small files hashed in full; everything else (the shards) by size, and by sha256 on request.
SMALL = re.compile(r"(^|/)(config\.json|generation_config\.json|tokenizer[^/]*|special_tokens_map\.json|"
                   r"[^/]*\.index\.json|[^/]*\.py|[^/]*\.tiktoken|[^/]*\.model|chat_template[^/]*)$")
SMALL_LIMIT = 64 << 20  # a "small" file bigger than this is treated as a shard
_ENTRY = re.compile(r"^(?:sha256:(?P<sha>[0-9a-f]{64})|size:(?P<size>\d+)(?: sha256:(?P<shard_sha>[0-9a-f]{64}))?)$")


@dataclass(frozen=True)
class ModelPin:
    repo: str
    revision: str
    files: dict[str, str]

    @property
    def pinned(self) -> bool:
        return bool(self.revision) and bool(self.files)


# The checkpoints a lock can pin, each in its own table of docker/lock.toml with the same manifest
# machinery: [model] is the default (the original DeepSeek-V4-Flash: no GPU-host benchmark of 0731
# with DSpark has been run for this bundle yet), [model_0731] the release that ships a DSpark draft.
CHECKPOINT_TABLES = {"original": "model", "0731": "model_0731"}
DEFAULT_CHECKPOINT = "original"
CHECKPOINT_NAMES = {"original": checkpoint.ORIGINAL, "0731": checkpoint.V0731}


def model_pin(lock: Lock, which: str = DEFAULT_CHECKPOINT) -> ModelPin | None:
    """The pin of one checkpoint (`original` or `0731`), or None when the lock has no table for it."""
    model = lock.data.get(CHECKPOINT_TABLES[which])
    if not model:
        return None
    return ModelPin(model["repo"], model.get("revision", ""), dict(model.get("files") or {}))


def checkpoint_of(folder: Path) -> str:
    """`0731` when the folder holds a checkpoint with a DSpark draft, else `original` (the default)."""
    info = checkpoint.identify(folder)
    return "0731" if info is not None and info.has_draft else DEFAULT_CHECKPOINT


def pin_for_folder(lock: Lock, folder: Path) -> ModelPin | None:
    """The pin of the checkpoint `folder` holds (its config.json says which), to check it against."""
    return model_pin(lock, checkpoint_of(folder))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 24), b""):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class Difference:
    path: str
    what: str  # "missing", "size 123 != 456", "sha256 differs"


def check_folder(folder: Path, pin: ModelPin, *, shards_sha256: bool = False) -> list[Difference]:
    """Every way `folder` differs from the manifest: files missing, a size or a sha256 that differs.
    Files in the folder the manifest does not list are not differences (caches, READMEs)."""
    out = []
    for rel, entry in sorted(pin.files.items()):
        m = _ENTRY.match(entry)
        path = folder / rel
        if m is None:
            out.append(Difference(rel, f"manifest entry {entry!r} is malformed"))
        elif not path.is_file():
            out.append(Difference(rel, "missing"))
        elif m.group("sha"):
            if _sha256(path) != m.group("sha"):
                out.append(Difference(rel, "sha256 differs"))
        else:
            size = path.stat().st_size
            if size != int(m.group("size")):
                out.append(Difference(rel, f"size {size} != {m.group('size')}"))
            elif shards_sha256 and m.group("shard_sha") and _sha256(path) != m.group("shard_sha"):
                out.append(Difference(rel, "sha256 differs"))
    return out


def differences_text(differences: list[Difference], pin: ModelPin, *, shown: int = 5) -> str:
    """One line for a message: how many files differ from the pinned checkpoint, the first few named."""
    listed = "; ".join(f"{d.path}: {d.what}" for d in differences[:shown])
    more = f"; and {len(differences) - shown} more" if len(differences) > shown else ""
    return (f"{len(differences)} file(s) differ from {pin.repo}@{pin.revision[:12]} "
            f"(docker/lock.toml): {listed}{more}")


def manifest_from(files: list[dict], small_hashes: dict[str, str]) -> dict[str, str]:
    """The manifest from the Hub's file list ([{path, size, lfs_sha256}]) and the sha256 of the
    small files (downloaded and hashed: the Hub gives only git blob ids for those)."""
    out = {}
    for f in sorted(files, key=lambda f: f["path"]):
        if f["path"] in small_hashes:
            out[f["path"]] = f"sha256:{small_hashes[f['path']]}"
        elif f.get("lfs_sha256"):
            out[f["path"]] = f"size:{f['size']} sha256:{f['lfs_sha256']}"
        elif f.get("size") is not None:
            out[f["path"]] = f"size:{f['size']}"
    return out


def is_small(path: str, size: int | None) -> bool:
    return bool(SMALL.search(path)) and (size or 0) <= SMALL_LIMIT


# ---- in a container of the image: huggingface_hub as the lock pins it ----

PIN_SCRIPT = r"""
import hashlib, json, os, sys, tempfile
from huggingface_hub import HfApi, hf_hub_download
repo, revision, small_re, limit = sys.argv[1], sys.argv[2] or None, sys.argv[3], int(sys.argv[4])
import re
small = re.compile(small_re)
info = HfApi().model_info(repo, revision=revision, files_metadata=True)
files, hashes = [], {}
with tempfile.TemporaryDirectory() as tmp:
    for s in info.siblings:
        size = s.size
        lfs = getattr(s, "lfs", None)
        files.append({"path": s.rfilename, "size": size, "lfs_sha256": getattr(lfs, "sha256", None) if lfs else None})
        if small.search(s.rfilename) and (size or 0) <= limit:
            p = hf_hub_download(repo, s.rfilename, revision=info.sha, cache_dir=tmp)
            hashes[s.rfilename] = hashlib.sha256(open(p, "rb").read()).hexdigest()
print("BUNDLE-MODEL " + json.dumps({"revision": info.sha, "files": files, "small": hashes}))
"""

FETCH_SCRIPT = r"""
import sys
from huggingface_hub import snapshot_download
path = snapshot_download(sys.argv[1], revision=sys.argv[2], local_dir="/model", max_workers=8)
print("BUNDLE-FETCHED " + path)
"""


def _run(image: str, script: str, args: list[str], folder: Path | None, timeout: float) -> str:
    import os

    from bundle.stack import engine

    env = {k: v for k, v in os.environ.items() if k in ("HF_TOKEN", "HF_ENDPOINT", "HTTPS_PROXY", "HTTP_PROXY",
                                                          "NO_PROXY")}
    return engine.run_networked_tool(image, ["python", "-c", script, *args], env=env,
                                     volumes=[(folder, "/model", "rw")] if folder else [], timeout=timeout)


def pin(image: str, pin_: ModelPin, revision: str | None) -> tuple[str, dict[str, str]]:
    """(revision, manifest) of `pin_.repo` at `revision` (default: the Hub's main), read from the Hub."""
    out = _run(image, PIN_SCRIPT, [pin_.repo, revision or "", SMALL.pattern, str(SMALL_LIMIT)], None, 1800)
    line = next((ln for ln in out.splitlines() if ln.startswith("BUNDLE-MODEL ")), None)
    if line is None:
        raise EnvironmentProblem(f"reading {pin_.repo} from the Hugging Face Hub failed: {out.strip()[-500:]}",
                                 hint="check the Hub is reachable (HF_ENDPOINT, a proxy) "
                                                                  "and HF_TOKEN for a gated repo")
    data = json.loads(line[len("BUNDLE-MODEL "):])
    return data["revision"], manifest_from(data["files"], data["small"])


def manifest_bytes(pin_: ModelPin) -> int:
    """Total size of the pinned files the manifest gives a size for (the shards: nearly all of it)."""
    return sum(int(m.group("size")) for m in map(_ENTRY.match, pin_.files.values()) if m and m.group("size"))


@dataclass(frozen=True)
class FetchProgress:
    received: int  # bytes under the folder, partial downloads (huggingface_hub's .incomplete files) included
    total: int  # the manifest's bytes
    files_done: int  # pinned files present at their pinned size (small files: present)
    files: int
    seconds: float

    def line(self) -> str:
        def gb(n: int) -> str:
            return f"{n / 1e9:.1f} GB"
        rate = self.received / self.seconds / 1e6 if self.seconds > 0 else 0.0
        share = f" ({100 * self.received / self.total:.0f}%)" if self.total else ""
        return (f"model: {gb(self.received)} of {gb(self.total)}{share}, {self.files_done} of {self.files} files, "
                f"{rate:.0f} MB/s, {int(self.seconds) // 60}m{int(self.seconds) % 60:02d}s elapsed")


def fetch_progress(folder: Path, pin_: ModelPin, seconds: float) -> FetchProgress:
    """How far a download into `folder` is, read from the folder itself (the download runs in a container)."""
    received = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    done = 0
    for rel, entry in pin_.files.items():
        path, m = folder / rel, _ENTRY.match(entry)
        if path.is_file() and (m is None or not m.group("size") or path.stat().st_size == int(m.group("size"))):
            done += 1
    return FetchProgress(received, manifest_bytes(pin_), done, len(pin_.files), seconds)


def fetch(image: str, pin_: ModelPin, folder: Path, *, report=print, every_s: float = 15.0) -> list[Difference]:
    """Download exactly the pinned revision into `folder`, then check it against the manifest;
    `report` gets a progress line (bytes and files of the manifest, rate, elapsed) every `every_s`."""
    import threading
    import time

    if not pin_.pinned:
        raise InputError(f"docker/lock.toml: model.revision is not pinned for {pin_.repo}",
                         hint="run `bundle model pin` on a host that reaches the Hub, commit the lock, then fetch")
    folder.mkdir(parents=True, exist_ok=True)
    stop, started = threading.Event(), time.monotonic()

    def watch() -> None:
        while not stop.wait(every_s):
            try:
                report(fetch_progress(folder, pin_, time.monotonic() - started).line())
            except OSError:  # a file renamed while being listed: the next tick counts it
                continue
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        out = _run(image, FETCH_SCRIPT, [pin_.repo, pin_.revision], folder, 6 * 3600)
    finally:
        stop.set()
        watcher.join(timeout=2)
    report(fetch_progress(folder, pin_, time.monotonic() - started).line())
    if "BUNDLE-FETCHED " not in out:
        raise Failed(f"downloading {pin_.repo}@{pin_.revision[:12]} failed: {out.strip()[-500:]}",
                     hint="run it again: huggingface_hub resumes partial downloads")
    return check_folder(folder, pin_, shards_sha256=True)


def write_pin(lock: Lock, revision: str, manifest: dict[str, str], which: str = DEFAULT_CHECKPOINT) -> None:
    """Replace one checkpoint's revision and its files table in docker/lock.toml ([model] and
    [model.files], or [model_0731] and [model_0731.files]), keeping every other line."""
    table = CHECKPOINT_TABLES[which]
    text = lock.path.read_text()
    text = re.sub(rf'(?m)^(\[{table}\][^\[]*?^revision = )"[^"]*"', lambda m: f'{m.group(1)}"{revision}"', text)
    header = f"[{table}.files]\n"
    head, sep, tail = text.partition(header)
    if not sep:
        raise InputError(f"{lock.path}: no [{table}.files] table",
                         hint=f"add `[{table}.files]` after the [{table}] table")
    # The files table runs to the next table header (or the end of the lock).
    following = re.search(r"(?m)^\[", tail)
    rest = tail[following.start():] if following else ""
    body = "".join(f'"{path}" = "{entry}"\n' for path, entry in sorted(manifest.items()))
    lock.path.write_text(head + sep + body + ("\n" + rest if rest else ""))
