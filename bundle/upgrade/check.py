"""`bundle upgrade --check`: what is newer than each pin of the lock, and which of it the pinned SGLang allows.

Releases come from PyPI's simple API (PEP 691 JSON; final releases with at least one file not yanked)
or, offline, from a saved index snapshot (`--index FILE`, written by `--save-index FILE`): per project
its versions and, for SGLang releases from the pinned one on, their requirements (from each wheel's
METADATA). A package SGLang pins exactly moves only with an SGLang that requires it: the answer names
those releases.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from bundle.errors import EnvironmentProblem, InputError
from bundle.lock import load_lock
from bundle.upgrade import closure

SIMPLE = "https://pypi.org/simple/{}/"
ACCEPT = "application/vnd.pypi.simple.v1+json"
RELEASE = "sglang"


def _final_versions(project: dict) -> list[str]:
    """Final (no pre/dev) releases with at least one file that is not yanked, oldest first."""
    live = set()
    for f in project.get("files", []):
        if f.get("yanked"):
            continue
        version = f.get("version")
        if version:
            live.add(version)
    out = []
    for v in project.get("versions", []):
        try:
            parsed = Version(v)
        except InvalidVersion:
            continue
        if not parsed.is_prerelease and not parsed.is_devrelease and (not live or v in live):
            out.append(v)
    return sorted(out, key=Version)


def _fetch_project(name: str) -> dict:
    request = urllib.request.Request(SIMPLE.format(canonicalize_name(name)), headers={"Accept": ACCEPT})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            data = json.loads(response.read())
    except OSError as exc:
        raise EnvironmentProblem(f"PyPI's simple API did not answer for {name}: {exc}",
                                 hint="run where PyPI is reachable, or pass --index FILE (a saved snapshot)") from None
    # Only what --check reads: the versions and, per file, its version and whether it is yanked.
    files = set()
    for f in data.get("files", []):
        version = _version_of(f.get("filename", ""), name)
        if version:
            files.add((version, bool(f.get("yanked"))))
    return {"versions": data.get("versions", []),
            "files": [{"version": v, "yanked": y} for v, y in sorted(files)]}


def _version_of(filename: str, name: str) -> str | None:
    stem = filename.removesuffix(".tar.gz").removesuffix(".zip").removesuffix(".whl")
    parts = stem.split("-")
    if len(parts) >= 2 and canonicalize_name(parts[0]) == canonicalize_name(name):
        return parts[1]
    return None


def take_index(lock_path: Path | None, wheel_dir: Path, progress=print) -> dict:
    """A snapshot of PyPI for every [python] pin of the lock, with SGLang's requirements per release."""
    lock = load_lock(lock_path)
    python = lock.data["base"]["python"]
    projects = {}
    names = list(lock.data["python"])
    for i, name in enumerate(names, 1):
        progress(f"[{i}/{len(names)}] {name}: PyPI simple API")
        projects[canonicalize_name(name)] = _fetch_project(name)
    sglang = projects[RELEASE]
    pinned = Version(lock.pins[RELEASE])
    requires = {}
    for v in (v for v in _final_versions(sglang) if Version(v) >= pinned):
        progress(f"    sglang {v}: requirements from its wheel's METADATA")
        requires[v] = closure.release_requirements(RELEASE, v, python, wheel_dir)
    sglang["requires"] = requires
    return {"taken": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "python": python,
            "source": "https://pypi.org/simple/ (PEP 691 JSON) and each sglang wheel's METADATA",
            "projects": projects}


def load_index(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a readable index snapshot ({exc})",
                         hint="write one with `bundle upgrade --check --save-index FILE`") from None
    if not isinstance(data.get("projects"), dict):
        raise InputError(f"{path}: projects: missing (not an index snapshot)",
                         hint="write one with `bundle upgrade --check --save-index FILE`")
    return data


def answer(lock_pins: dict[str, str], index: dict) -> list[dict]:
    """One row per [python] pin: newer releases and what the pinned SGLang says about them."""
    projects = index["projects"]
    sglang_pin = lock_pins[RELEASE]
    sglang = projects.get(RELEASE, {})
    requires_by_release = sglang.get("requires", {})
    pinned_requires = requires_by_release.get(sglang_pin)
    rows = []
    for key, pinned in lock_pins.items():
        name = canonicalize_name(key)
        project = projects.get(name)
        if project is None:
            rows.append({"name": key, "pinned": pinned, "newer": [], "allowed": [],
                         "answer": "not in the index snapshot"})
            continue
        newer = [v for v in _final_versions(project) if Version(v) > Version(pinned)]
        if name == RELEASE:
            text = (f"take one with `bundle upgrade sglang=={newer[-1]}`" if newer else "the newest release is pinned")
            rows.append({"name": key, "pinned": pinned, "newer": newer, "allowed": newer, "answer": text})
            continue
        if pinned_requires is None:
            rows.append({"name": key, "pinned": pinned, "newer": newer, "allowed": [],
                         "answer": f"sglang {sglang_pin}'s requirements are not in the snapshot"})
            continue
        spec = pinned_requires.get(name)
        if spec is None:
            allowed = newer
            text = (f"sglang {sglang_pin} does not require {key}: `bundle upgrade {key}=={newer[-1]}`"
                    if newer else f"sglang {sglang_pin} does not require {key}; the newest is pinned")
        else:
            allowed = [v for v in newer if Version(v) in SpecifierSet(spec)]
            if spec.startswith("==") and not allowed:
                takers = {v: [r for r, req in sorted(requires_by_release.items(), key=lambda kv: Version(kv[0]))
                              if req.get(name) == f"=={v}"] for v in newer}
                named = [f"{v} with sglang {', '.join(rs)}" for v, rs in takers.items() if rs]
                text = (f"sglang {sglang_pin} pins {key}{spec}: only with an SGLang that requires it; "
                        + ("; ".join(named) if named else
                           f"no SGLang release in the snapshot requires {', '.join(newer)}") if newer else
                        f"sglang {sglang_pin} pins {key}{spec}; nothing newer")
            else:
                text = (f"sglang {sglang_pin} allows {key}{spec}: " + (", ".join(allowed) or "none of them"))
        rows.append({"name": key, "pinned": pinned, "newer": newer, "allowed": allowed, "answer": text,
                     "sglang_requires": spec})
    return rows


def check(lock_path: Path | None, *, index_file: Path | None = None, save_index: Path | None = None,
          wheel_dir: Path | None = None, progress=print) -> dict:
    lock = load_lock(lock_path)
    if index_file is not None:
        index, source = load_index(index_file), str(index_file)
    else:
        from bundle.upgrade.service import wheel_dir as default_wheels

        index, source = take_index(lock_path, wheel_dir or default_wheels(), progress), "PyPI (live)"
        if save_index is not None:
            save_index.write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
            progress(f"index snapshot written to {save_index}")
    pins = {k: str(v) for k, v in lock.data["python"].items()}
    return {"lock": str(lock.path), "sglang": pins[RELEASE], "index": source, "taken": index.get("taken"),
            "packages": answer(pins, index)}
