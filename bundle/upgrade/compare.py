"""The upgrade report, old side against new, from the gathered sides only (pure: no network, no Docker):
packages, command-line contract, predicted choices on sm_120, sm_120 code per native library, guards,
and a verdict (safe / needs attention / breaks, each item with the file and line it concerns)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from bundle import paths
from bundle import topology as topologies
from bundle.images.audit import kernels
from bundle.images.audit.checks_sglang import PREDICTED
from bundle.images.audit.checks_sm120 import SITE
from bundle.rules import argspec
from bundle.upgrade import contract, guards

# Top-level folder of a native library -> the lock's pin that ships it (for a finding's file:line).
LIB_OWNER = {"sgl_kernel": "sglang-kernel", "torch": "torch", "flashinfer": "flashinfer-python",
             "nvidia": "torch", "deep_ep": "sglang", "tilelang": "tilelang", "nixl_cu13": "nixl-cu13"}
# Levers behind a predicted choice (for a lost kernel's file:line): bundle.yaml key path.
LEVER_PATH = {"moe_runner_backend": ("levers", "moe_runner"), "sm120_sparse_mla_backend": ("levers", "sparse_mla"),
              "kv_cache_dtype": ("levers", "kv_cache_dtype")}


def packages(old: dict, new: dict, overrides: dict[str, str]) -> dict:
    def flat(side):
        out = {}
        for layer, pins in side["requirements"].items():
            for name, version in pins.items():
                out[name] = (version, layer)
        return out

    a, b = flat(old), flat(new)
    release = new.get("sglang_requires", {})
    changed = [{"name": n, "old": a[n][0], "new": b[n][0], "layer": b[n][1], "pinned_by_sglang": n in release}
               for n in sorted(a.keys() & b.keys()) if a[n][0] != b[n][0]]
    added = [{"name": n, "new": b[n][0], "layer": b[n][1], "pinned_by_sglang": n in release}
             for n in sorted(b.keys() - a.keys())]
    removed = [{"name": n, "old": a[n][0], "layer": a[n][1]} for n in sorted(a.keys() - b.keys())]
    top = {k: (old["pins"].get(k), new["pins"].get(k)) for k in sorted(old["pins"].keys() | new["pins"].keys())
           if old["pins"].get(k) != new["pins"].get(k)}
    return {"lock_pins": {k: {"old": v[0], "new": v[1]} for k, v in top.items()},
            "changed": changed, "added": added, "removed": removed, "overrides": overrides,
            "count": {"old": len(a), "new": len(b)}}


def command_line(old: dict, new: dict, dep) -> dict:
    uses = contract.used_flags(dep)
    used = {(u["program"], u["flag"]) for u in uses}
    out = {"parsers": {}, "breaks": [], "attention": []}
    for name in (argspec.SERVER_SPEC, argspec.ROUTER_SPEC):
        a, b = old["parsers"][name], new["parsers"][name]
        diff = contract.parser_diff(a, b)
        breaks, attention = contract.affected(diff, b, uses, name)
        # A new default matters where the bundle leaves the option to the package.
        unset = [d for d in diff if d["kind"] == "default" and (name, d["flag"]) not in used]
        for d in unset:
            attention.append({"what": f"{name} {b['version']}: {d['what']} (the bundle leaves {d['flag']} to it)",
                              "where": "(not set by the bundle)", "flag": d["flag"]})
        out["parsers"][name] = {"old_version": a["version"], "new_version": b["version"],
                                "options": {"old": len(a["options"]), "new": len(b["options"])}, "diff": diff}
        out["breaks"] += breaks
        out["attention"] += attention
    return out


def _short(path: str) -> str:
    return path.removeprefix(SITE)


def predicted(old: dict, new: dict) -> dict:
    """Per topology, per server: every predicted field that differs (old, new), or none."""
    a = (old.get("audit") or {}).get("predicted") or {}
    b = (new.get("audit") or {}).get("predicted") or {}
    per_topology = {}
    for name in topologies.NAMES:
        servers = sorted({s for s in a.keys() | b.keys() if s.split("/")[0] == name})
        diffs = {}
        for server in servers:
            pa, pb = a.get(server), b.get(server)
            if pa is None or pb is None:
                diffs[server] = {"resolved": {"old": pa is not None, "new": pb is not None}}
                continue
            changed = {k: {"old": pa.get(k), "new": pb.get(k)} for k in PREDICTED if pa.get(k) != pb.get(k)}
            if changed:
                diffs[server] = changed
        per_topology[name] = {"servers": servers, "differences": diffs,
                              "new": {s: b.get(s) for s in servers}}
    return per_topology


def libraries(old: dict, new: dict) -> list[dict]:
    a = {_short(lib["path"]): lib for lib in (old.get("audit") or {}).get("libraries") or []}
    b = {_short(lib["path"]): lib for lib in (new.get("audit") or {}).get("libraries") or []}
    out = []
    for path in sorted(a.keys() | b.keys()):
        la, lb = a.get(path), b.get(path)
        ra = la["runs_on_sm120"] if la else None
        rb = lb["runs_on_sm120"] if lb else None
        change = ("lost" if ra and rb is False else "gained" if ra is False and rb else
                  "new" if la is None else "gone" if lb is None else "same")
        out.append({"path": path, "old": _lib_summary(la), "new": _lib_summary(lb), "change": change,
                    "runs": {"old": ra, "new": rb}})
    return out


def _lib_summary(lib: dict | None) -> dict | None:
    if lib is None:
        return None
    return {"size": lib["size"], "cubins": lib["cubins"], "ptx": lib["ptx"], "runs_on_sm120": lib["runs_on_sm120"],
            "how": lib["how"]}


def _needed(new: dict) -> dict[str, list[tuple[str, str, str]]]:
    """library -> [(server, choice, field)] for what the new side's predicted choices need."""
    pred = (new.get("audit") or {}).get("predicted") or {}
    out: dict[str, list] = {}
    for what, lib in kernels.ALWAYS:
        out.setdefault(lib, []).append(("every server", what, ""))
    for server, choice in pred.items():
        for (field, value), libs in kernels.NEEDS.items():
            if str(choice.get(field)) == value:
                for lib in libs:
                    out.setdefault(lib, []).append((server, f"{field}={value}", field))
    return out


def _lock_line(lock_path: str, name: str) -> str:
    path = Path(lock_path)
    try:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.match(rf'^{re.escape(name)}\s*=', line):
                return f"{_rel(path)}:{number}"
    except OSError:
        pass
    return _rel(path)


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(paths.project_root().resolve()))
    except ValueError:
        return str(path)


def _lever_where(dep, key_path: tuple[str, ...]) -> str:
    if dep.source.is_file and dep.source.line_of(key_path) and key_path in dep.source.lines:
        return dep.source.where(key_path)
    from bundle.config import loader

    defaults = Path(loader.__file__).with_name("defaults.yaml")
    for number, line in enumerate(defaults.read_text().splitlines(), 1):
        if line.strip().startswith(f"{key_path[-1]}:"):
            return f"{_rel(defaults)}:{number}"
    return _rel(defaults)


def code_findings(libs: list[dict], new: dict, dep) -> tuple[list[dict], list[dict]]:
    needed = _needed(new)
    breaks, attention = [], []
    for lib in libs:
        users = needed.get(lib["path"], [])
        if lib["change"] == "lost":
            if users:
                # A lever's choice first: the fix is there (another value), not in the lock.
                server, choice, field = sorted(users, key=lambda u: u[2] not in LEVER_PATH)[0]
                where = (_lever_where(dep, LEVER_PATH[field]) if field in LEVER_PATH else
                         _lock_line(new["lock"], LIB_OWNER.get(lib["path"].split("/")[0], "sglang")))
                breaks.append({"what": f"{lib['path']} lost its sm_120 code (now cubins "
                                       f"{', '.join(lib['new']['cubins']) or 'none'}, PTX "
                                       f"{', '.join(lib['new']['ptx']) or 'none'}); {server} needs it for {choice}",
                               "where": where})
            else:
                attention.append({"what": f"{lib['path']} lost its sm_120 code (no chosen path needs it)",
                                  "where": _lock_line(new["lock"], LIB_OWNER.get(lib["path"].split("/")[0], "sglang"))})
        elif lib["change"] == "gained":
            attention.append({"what": f"{lib['path']} gained sm_120 code ({lib['new']['how']}): a path that can now "
                                      f"run on sm_120; worth measuring", "where": "(new capability)"})
        elif lib["change"] == "gone" and users:
            breaks.append({"what": f"{lib['path']} is gone from the image; {users[0][0]} needs it for {users[0][1]}",
                           "where": _lock_line(new["lock"], LIB_OWNER.get(lib["path"].split("/")[0], "sglang"))})
    return breaks, attention


def guard_findings(new: dict) -> tuple[list[dict], list[dict]]:
    judged = guards.judge(new["guards"])
    breaks = [{"what": f"guard {g['guard']}: {g['what']}", "where": g["where"]} for g in judged if not g["holds"]]
    # The lever values the schema allows must stay choices of the parser (--moe-runner-backend ...).
    schema_path = paths.PACKAGE_DIR / "config" / "bundle.schema.json"
    schema = json.loads(schema_path.read_text())["properties"]["levers"]["properties"]
    choices = {f: o["choices"] for o in new["parsers"][argspec.SERVER_SPEC]["options"] for f in o["flags"]}
    for lever, flag in (("moe_runner", "--moe-runner-backend"), ("kv_cache_dtype", "--kv-cache-dtype")):
        allowed = set(map(str, schema[lever].get("enum", [])))
        lost = sorted(allowed - set(map(str, choices.get(flag) or [])))
        holds = not lost
        judged.append({"guard": f"levers.{lever} values are {flag} choices", "holds": holds,
                       "what": "every value the schema allows is a choice" if holds else f"{', '.join(lost)} no longer accepted",
                       "where": _schema_line(schema_path, lever)})
        if not holds:
            breaks.append({"what": f"levers.{lever}: {', '.join(lost)} no longer a {flag} choice",
                           "where": _schema_line(schema_path, lever)})
    return judged, breaks


def _schema_line(path: Path, key: str) -> str:
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if f'"{key}"' in line:
            return f"{_rel(path)}:{number}"
    return _rel(path)


def next_steps(new: dict) -> list[str]:
    return ["on the GPU host, with the new lock applied: `make image` (or `bundle build`), then `bundle audit`",
            "`bundle launch tp4`, `bundle smoke tp4`, then `bundle bench tp4 --gate 5` against the last run of "
            "the old image; the same for pd and dp",
            "tests: `pytest -m gpu tests/test_doctor_collectives.py tests/kernels`, `pytest tests/test_contract_defaults.py "
            "tests/test_contract_parsers.py` (the contract of the new pins)"]


def report(old: dict, new: dict, dep, *, overrides: dict[str, str] | None = None, change: str = "") -> dict:
    overrides = overrides or {}
    pk = packages(old, new, overrides)
    cl = command_line(old, new, dep)
    audited = bool(old.get("audit")) and bool(new.get("audit"))
    pred = predicted(old, new) if audited else None
    libs = libraries(old, new) if audited else None
    code_breaks, code_attention = code_findings(libs, new, dep) if audited else ([], [])
    judged, guard_breaks = guard_findings(new)
    breaks = cl["breaks"] + code_breaks + guard_breaks
    attention = list(cl["attention"]) + code_attention
    for name, version in overrides.items():
        attention.append({"what": f"{name}=={version} overrides what {change} requires (uv --override)",
                          "where": "bundle upgrade --override"})
    if audited:
        for name, topo in pred.items():
            for server, diff in topo["differences"].items():
                if "resolved" in diff:
                    breaks.append({"what": f"{server}: SGLang's ServerArgs "
                                           f"{'no longer resolves' if diff['resolved']['old'] else 'now resolves'} "
                                           f"its command line", "where": f"compose/{name}.yaml"})
                else:
                    attention.append({"what": f"{server}: predicted " + ", ".join(
                        f"{k} {v['old']} -> {v['new']}" for k, v in diff.items()), "where": "(SGLang's post-init)"})
        for fail in (new["audit"].get("fails") or []):
            if fail not in (old["audit"].get("fails") or []):
                attention.append({"what": f"new audit FAIL ({fail.get('check')}): {fail.get('what')}",
                                  "where": fail.get("fix") or ""})
    else:
        attention.append({"what": "no stand-in build and audit (--no-build): predicted choices and sm_120 code "
                                  "not compared", "where": "bundle upgrade without --no-build"})
    status = "breaks" if breaks else "needs attention" if attention else "safe"
    return {
        "change": change,
        "old": {"lock": old["lock"], "lock_hash": old["lock_hash"], "sglang": old["pins"].get("sglang"),
                "image": (old.get("audit") or {}).get("image")},
        "new": {"lock": new["lock"], "lock_hash": new["lock_hash"], "sglang": new["pins"].get("sglang"),
                "image": (new.get("audit") or {}).get("image")},
        "packages": pk,
        "command_line": cl,
        "predicted": pred,
        "libraries": libs,
        "guards": judged,
        "verdict": {"status": status, "breaks": breaks, "attention": attention},
        "next": next_steps(new),
    }
