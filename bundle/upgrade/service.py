"""`bundle upgrade NAME==VERSION`: the scratch lock, both sides gathered, one report (human + JSON).

Steps (each announced as `[n/m]`): read the lock; resolve the new closure in a scratch copy; read both
releases' parsers and guards; build and audit the old side's stand-in; the new side's; compare. The
working lock changes only with `apply=True`.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name

from bundle import paths
from bundle.errors import InputError
from bundle.lock import Lock, load_lock
from bundle.upgrade import closure, gather, scratch
from bundle.upgrade.gather import Progress

RELEASE = "sglang"  # the package whose exact pins fix most of the stack


@dataclass(frozen=True)
class Request:
    package: str
    version: str
    lock_path: Path | None = None
    overrides: dict[str, str] = field(default_factory=dict)
    build: bool = True
    fresh: bool = False
    apply: bool = False
    config: str | None = None
    audits: dict[str, Path] = field(default_factory=dict)  # "old"/"new" -> a saved audit used instead of building


def upgrade_dir() -> Path:
    return paths.runs_dir() / "upgrade"


def wheel_dir() -> Path:
    return paths.runs_dir() / "upgrade" / "wheels"


def new_pins(old: Lock, package: str, version: str) -> tuple[dict[str, str], set[str]]:
    """The [python] changes for package==version, and the names whose old versions are not kept (the old
    release's own exact pins). A package the pinned SGLang pins exactly moves only with an SGLang."""
    text = old.path.read_text()
    table = scratch.table_pins(text, "python")
    python = old.data["base"]["python"]
    key = next((k for k in table if canonicalize_name(k) == canonicalize_name(package)), None)
    if key is None:
        raise InputError(f"{old.path}: [python] pins no {package}",
                         hint=f"name one of: {', '.join(sorted(table))}")
    old_release = closure.release_pins(RELEASE, table[RELEASE], python, wheel_dir())
    if canonicalize_name(package) == RELEASE:
        new_release = closure.release_pins(RELEASE, version, python, wheel_dir())
        return scratch.pins_to_take(table, RELEASE, version, new_release), set(old_release) | {RELEASE}
    refuse_if_pinned(package, version, table[RELEASE], old_release)
    return {key: version}, {canonicalize_name(package)}


def refuse_if_pinned(package: str, version: str, sglang: str, sglang_pins: dict[str, str]) -> None:
    """A BundleError when the pinned SGLang requires another exact version of `package`."""
    pinned_by = sglang_pins.get(canonicalize_name(package))
    if pinned_by is not None and pinned_by != version:
        raise InputError(f"{package} {version}: sglang {sglang} requires {package}=={pinned_by} exactly; "
                         f"{package} moves only with an SGLang that requires {version}",
                         hint="`bundle upgrade --check` names the SGLang releases that require it; then "
                              "`bundle upgrade sglang==THAT`")


def run(req: Request, progress: Progress = print) -> dict:
    """Gather both sides, compare, save runs/upgrade/<old>-to-<new>/; returns the report (its `paths` say where)."""
    from bundle.upgrade import compare  # the report: pure, from the saved sides

    building = {label for label in ("old", "new") if req.build and label not in req.audits}
    steps = 4 + len(building)
    started = time.monotonic()
    step = iter(range(1, steps + 1))

    def announce(what: str) -> None:
        progress(f"[{next(step)}/{steps}] {what} ({time.monotonic() - started:.0f} s)")

    old = load_lock(req.lock_path)
    announce(f"lock {old.path} (hash {old.hash}): sglang {old.pins['sglang']}; "
             f"{req.package} {old.pins.get(req.package, '?')} -> {req.version}")
    changes, released = new_pins(old, req.package, req.version)
    dest = upgrade_dir() / "work" / f"{canonicalize_name(req.package)}-{req.version}"
    announce(f"resolving the new closure in {dest} (pins {', '.join(f'{k} {v}' for k, v in changes.items())}"
             + (f"; overrides {', '.join(f'{k}=={v}' for k, v in req.overrides.items())}" if req.overrides else "")
             + ") with uv, as `make lock` does")
    text = scratch.edit_pins(old.path.read_text(), "python", changes)
    new_path = scratch.make_scratch(gather.lock_root(old), old, dest, text)
    prefs = scratch.preferences(old.path.parent / "requirements", released, dest / ".cache" / "kept")
    new = scratch.resolve(new_path, overrides=req.overrides or None, keep_from=prefs)
    progress(f"    new lock {new.path} (hash {new.hash})")
    announce(f"reading the parsers and guards of sglang {old.pins['sglang']} / {new.pins['sglang']}, "
             f"smg {old.pins['smg']} / {new.pins['smg']} (wheels --no-deps, no build)")
    facts = {"old": gather.release_facts(old, wheel_dir()), "new": gather.release_facts(new, wheel_dir())}
    config_name = _config_name(req.config)
    sides = {}
    for label, lock in (("old", old), ("new", new)):
        if label in building:
            announce(f"{label} side: stand-in build and audit of lock {lock.hash}")
        elif label in req.audits:
            progress(f"    {label} side: the audit in {req.audits[label]}")
        sides[label] = gather.side(label, lock, facts[label], build=label in building, config=req.config,
                                   config_name=config_name, fresh=req.fresh, progress=progress,
                                   audit_file=req.audits.get(label))
    announce("comparing")
    folder = upgrade_dir() / f"{old.hash}-to-{new.hash}"
    gather.save(folder, sides["old"], "old.json")
    gather.save(folder, sides["new"], "new.json")
    report = compare.report(sides["old"], sides["new"], _deployment(req.config), overrides=req.overrides,
                            change=f"{req.package}=={req.version}")
    if req.apply:
        report["applied"] = apply(old, new, sides["new"])
    report["paths"] = save_report(folder, report)
    return report


def _config_name(config: str | None) -> str:
    return _deployment(config).source.name


def _deployment(config: str | None):
    from bundle.config.loader import find_config, load_config

    return load_config(find_config(config))


def save_report(folder: Path, report: dict) -> dict[str, str]:
    from bundle.upgrade import render

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(json.dumps(report, indent=1, sort_keys=True, default=str) + "\n")
    (folder / "report.txt").write_text(render.text(report) + "\n")
    latest = upgrade_dir() / "latest"
    if latest.is_symlink() or latest.exists():
        latest.unlink()
    latest.symlink_to(folder.name)
    return {"json": str(folder / "report.json"), "text": str(folder / "report.txt")}


def apply(old: Lock, new: Lock, new_side: dict) -> dict:
    """The new lock and hashed requirements over the old ones; the parser snapshots too when the old lock
    is the project's own (they describe the project's pinned SGLang and smg)."""
    from bundle.rules import argspec

    written = []
    shutil.copyfile(new.path, old.path)
    written.append(str(old.path))
    req_old, req_new = old.path.parent / "requirements", new.path.parent / "requirements"
    for f in sorted(req_new.glob("*.in")) + sorted(req_new.glob("*.txt")):
        shutil.copyfile(f, req_old / f.name)
        written.append(str(req_old / f.name))
    if old.path.resolve() == (paths.docker_dir() / "lock.toml").resolve():
        for name, spec in new_side["parsers"].items():
            plain = {"version": spec["version"],
                     "options": [{k: v for k, v in o.items() if k != "default"} for o in spec["options"]]}
            argspec.SPECS[name].write_text(json.dumps(plain, indent=1) + "\n")
            written.append(str(argspec.SPECS[name]))
    return {"written": written, "lock_hash": load_lock(old.path).hash}
