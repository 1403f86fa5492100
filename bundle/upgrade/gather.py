"""Everything the report compares, gathered for one side (a lock): its pins and hashed requirements,
the SGLang release's own exact pins, its parsers (with defaults) and guard facts read from its wheels,
and (unless skipped) the stand-in build of the lock and its audit. Saved as one JSON per side under
runs/upgrade/<old>-to-<new>/, so the report can be made again, and tested, from recorded inputs.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bundle import paths
from bundle.run import stream
from bundle.errors import Failed
from bundle.images import audit_record
from bundle.lock import Lock
from bundle.images.requirements import LAYERS, parse_pins
from bundle.upgrade import closure, guards, parser_snapshot

Progress = Callable[[str], None]
# The audit checks the report reads (installed set, SGLang's post-init, sm_120 code): the others (imports,
# --help, pip check, SBOM) take most of an audit's time and feed nothing here.
AUDIT_ONLY = ("--only", "lock", "--only", "predicted", "--only", "sm120", "--only", "levers")
# What of the audit the report uses (the rest stays in runs/audit/lock-<hash>/).
AUDIT_KEYS = ("image", "lock_hash", "image_lock_hash", "config", "model_config", "status", "libraries", "predicted")


def lock_root(lock: Lock) -> Path:
    """The project folder a lock belongs to (docker/lock.toml's grandparent): the checkout, or a scratch copy."""
    return lock.path.resolve().parent.parent


def requirements(lock: Lock) -> dict[str, dict[str, str]]:
    folder = lock.path.parent / "requirements"
    return {layer: parse_pins((folder / f"{layer}.txt").read_text()) if (folder / f"{layer}.txt").is_file() else {}
            for layer in LAYERS}


def release_facts(lock: Lock, wheel_dir: Path) -> dict:
    """The SGLang release's exact pins, its and smg's parsers, and the guard facts from its source."""
    python = lock.data["base"]["python"]
    pins = closure.release_pins("sglang", lock.pins["sglang"], python, wheel_dir)
    host = [closure.download_wheel("sglang", lock.pins["sglang"], None, wheel_dir),
            closure.download_wheel("smg", lock.pins["smg"], None, wheel_dir)]
    parsers = parser_snapshot.snapshot(host, paths.PACKAGE_DIR.parent)
    return {"sglang_requires": pins, "parsers": parsers,
            "guards": guards.facts(parser_snapshot.site_folder(host))}


def _stream(cmd: list[str], env: dict[str, str], progress: Progress, prefix: str) -> int:
    """Run `cmd`, passing its output on line by line, with a line of the elapsed time after every 30 s
    of silence (the framework layer is one `uv pip install` of about 11 GB: minutes without a line of
    its own)."""
    return stream(cmd, lambda line: progress(f"{prefix}{line}"), env=env,
                  on_quiet=lambda seconds: progress(f"{prefix}... still running, {seconds:.0f} s"))


def standin_image(lock: Lock) -> str:
    from bundle.images.build import make_plan

    return make_plan(lock, standin=True, root=lock_root(lock)).layers[-1].extra_tags[0]


def cached_audit(lock: Lock, config_name: str) -> dict | None:
    """The last audit of this lock's stand-in image with this config, if one was saved."""
    try:
        report = json.loads((audit_record.folder(lock.hash) / "latest.json").read_text())
    except (OSError, ValueError):
        return None
    if report.get("image") != standin_image(lock) or report.get("config") != config_name:
        return None
    return report


def build_and_audit(lock: Lock, *, config: str | None, config_name: str, fresh: bool, progress: Progress) -> dict:
    """`bundle build --standin` then `bundle audit --standin` in the lock's own project folder (a scratch
    copy for a new version), in child processes whose output is shown as it comes."""
    root = lock_root(lock)
    env = {**os.environ, "BUNDLE_HOME": str(root), "BUNDLE_RUNS_DIR": str(paths.runs_dir()),
           "PYTHONPATH": os.pathsep.join([str(paths.PACKAGE_DIR.parent), os.environ.get("PYTHONPATH", "")])}
    if not fresh:
        found = cached_audit(lock, config_name)
        if found is not None:
            progress(f"    reusing the audit of {found['image']} ({audit_record.folder(lock.hash)}/latest.json)")
            return found
    started = time.monotonic()
    progress(f"    bundle build --standin (lock {lock.hash}, in {root}) ...")
    rc = _stream([sys.executable, "-m", "bundle", "build", "--standin"], env, progress, "    | ")
    if rc != 0:
        raise Failed(f"the stand-in build of {lock.path} failed (exit {rc})",
                     hint=f"see the build output above; the layers built so far are kept (BUNDLE_HOME={root})")
    progress(f"    built in {time.monotonic() - started:.0f} s; bundle audit --standin ...")
    cmd = [sys.executable, "-m", "bundle", "audit", "--standin", *AUDIT_ONLY] + (["-c", config] if config else [])
    _stream(cmd, env, progress, "    | ")  # exit 1 is an audit with FAILs: still the facts we compare
    found = cached_audit(lock, config_name)
    if found is None:
        raise Failed(f"the audit of {standin_image(lock)} saved no report under "
                     f"{audit_record.folder(lock.hash)}",
                     hint="run `bundle audit --standin --debug` with BUNDLE_HOME set to the lock's folder")
    progress(f"    audited; {time.monotonic() - started:.0f} s for this side")
    return found


def saved_audit(path: Path, lock: Lock) -> dict:
    """An audit report made elsewhere (`bundle audit --json`, runs/audit/.../*.json: a GPU host's, or of
    one layer) for this lock; a BundleError when it is of another lock."""
    try:
        report = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise Failed(f"{path}: not a readable audit report ({exc})",
                     hint="pass a `bundle audit --json` output or a runs/audit/lock-<hash>/*.json") from None
    if report.get("lock_hash") != lock.hash:
        raise Failed(f"{path}: lock_hash is {report.get('lock_hash')}, the lock {lock.path} hashes {lock.hash}",
                     hint="audit an image of that lock, or pass the audit of this one")
    return report


def side(label: str, lock: Lock, facts: dict, *, build: bool, config: str | None, config_name: str,
         fresh: bool, progress: Progress, audit_file: Path | None = None) -> dict:
    """One side of the report: the lock, its release facts (release_facts) and, with `build` (or a saved
    audit), its audit."""
    audit = None
    if build or audit_file is not None:
        full = (saved_audit(audit_file, lock) if audit_file is not None else
                build_and_audit(lock, config=config, config_name=config_name, fresh=fresh, progress=progress))
        audit = {k: full.get(k) for k in AUDIT_KEYS}
        audit["fails"] = [f for f in full.get("findings", []) if f.get("level") == "FAIL"]
        audit["installed"] = (full.get("packages") or {}).get("installed", {})
    return {"label": label, "lock": str(lock.path), "lock_hash": lock.hash, "pins": lock.pins,
            "requirements": requirements(lock), **facts, "audit": audit}


def save(folder: Path, data: dict, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return path
