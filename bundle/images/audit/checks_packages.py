"""The installed set against the lock: every distribution the lock pins, at its version, once, with
its files as installed; nothing the lock does not know; pip check clean; no stray .pth/egg-link."""

from __future__ import annotations

from bundle.images.audit.context import AuditContext
from bundle.findings import Finding, Level
from bundle.images.requirements import normalise

VENV = "/opt/venv/"
# Seeded by `python -m venv` from the interpreter's ensurepip, not installed from the lock.
VENV_SEED = {"pip"}
# .pth files that a locked distribution ships in its RECORD are the distribution's own (setuptools'
# distutils shim, CUTLASS DSL's path hook, the kernel overlay's start-up hook).


def _facts(ctx: AuditContext) -> dict:
    facts = ctx.facts.get("packages") or {}
    if "probe_error" in facts or not facts:
        raise RuntimeError(f"the probe could not list the packages: {facts.get('probe_error', 'no facts')}")
    return facts


def _venv_dists(ctx: AuditContext) -> list[dict]:
    return [d for d in _facts(ctx)["distributions"] if d["site"].startswith(VENV)]


def installed_equals_lock(ctx: AuditContext) -> tuple[str, list[Finding]]:
    findings: list[Finding] = []
    seen: dict[str, dict] = {}
    for dist in _venv_dists(ctx):
        seen.setdefault(normalise(dist["name"]), dist)
    overlay = normalise(ctx.overlay) if ctx.overlay else None
    for key, pkg in sorted(ctx.packages.items()):
        dist = seen.get(key)
        if dist is None:
            findings.append(Finding(Level.FAIL, f"{pkg.name}=={pkg.version} (docker/requirements/{pkg.layer}.txt) "
                                                 f"is not installed", fix="rebuild the image from this lock: bundle build"))
        elif dist["version"] != pkg.version:
            findings.append(Finding(Level.FAIL, f"{dist['name']} {dist['version']} is installed, the lock pins "
                                                 f"{pkg.version} ({dist['path']})",
                                    fix="rebuild from this lock (bundle build); never pip install into the image"))
        else:
            direct = dist.get("direct_url") or {}
            hashes = (direct.get("archive_info") or {}).get("hashes") or {}
            recorded = hashes.get("sha256") or ((direct.get("archive_info") or {}).get("hash", "").split("=")[-1]
                                                if "sha256=" in (direct.get("archive_info") or {}).get("hash", "")
                                                else None)
            if recorded and pkg.hashes and recorded not in pkg.hashes:
                findings.append(Finding(Level.FAIL, f"{dist['name']} {dist['version']} was installed from a file "
                                                     f"with sha256 {recorded[:16]}..., not one the lock allows",
                                        fix="rebuild from this lock: bundle build"))
    for key, dist in sorted(seen.items()):
        if key in ctx.packages or key == overlay:
            continue
        if key in VENV_SEED:
            findings.append(Finding(Level.WARN, f"{dist['name']} {dist['version']} is in the venv (seeded by "
                                                 f"`python -m venv`), not pinned by the lock",
                                    fix="harmless at run time; pin it in docker/lock.toml to make the set exact"))
            continue
        findings.append(Finding(Level.FAIL, f"{dist['name']} {dist['version']} is installed but unknown to the "
                                             f"lock ({dist['path']})",
                                fix="add it to docker/lock.toml and run `make lock`, or remove it from the image"))
    summary = f"{len(seen)} distributions in {VENV.rstrip('/')}, {len(ctx.packages)} pinned by the lock"
    return summary, findings


def installed_once(ctx: AuditContext) -> tuple[str, list[Finding]]:
    """A distribution twice (two .dist-info, in one folder or two on sys.path) or a module shadowed."""
    facts = _facts(ctx)
    findings: list[Finding] = []
    by_name: dict[str, list[dict]] = {}
    for dist in facts["distributions"]:
        by_name.setdefault(normalise(dist["name"]), []).append(dist)
    for key, dists in sorted(by_name.items()):
        if len(dists) > 1:
            copies = ", ".join(f"{d['version']} at {d['path']}" for d in dists)
            findings.append(Finding(Level.FAIL, f"{dists[0]['name']} is installed {len(dists)} times: {copies}",
                                    fix="remove every copy but the lock's from the image (a PYTHONPATH or a stale "
                                        "site-packages folder usually brings the second one)"))
    for module, dirs in sorted(facts["shadowed"].items()):
        findings.append(Finding(Level.FAIL, f"module {module!r} is in {len(dirs)} folders on sys.path; "
                                             f"{dirs[0]} shadows {', '.join(dirs[1:])}",
                                fix="remove the extra copy (or the sys.path entry that brings it)"))
    if facts.get("pythonpath"):
        findings.append(Finding(Level.WARN, f"PYTHONPATH is set in the image: {facts['pythonpath']}",
                                fix="drop it: every package belongs in /opt/venv"))
    return f"{len(facts['distributions'])} distributions on sys.path", findings


def files_as_installed(ctx: AuditContext) -> tuple[str, list[Finding]]:
    """Each distribution's RECORD against the disk (sizes; sha256 too with --deep)."""
    facts = _facts(ctx)
    findings: list[Finding] = []
    dists = _venv_dists(ctx)
    checked = 0
    for dist in dists:
        rec = dist["record"]
        checked += rec.get("files", 0)
        if not rec.get("present"):
            findings.append(Finding(Level.WARN, f"{dist['name']} {dist['version']} has no RECORD: its files "
                                                 f"cannot be checked", fix="reinstall it from the lock"))
            continue
        if rec.get("n_missing"):
            findings.append(Finding(Level.FAIL, f"{dist['name']}: {rec['n_missing']} file(s) of its RECORD are "
                                                 f"missing, e.g. {', '.join(rec['missing'][:3])}",
                                    fix="rebuild the layer that installs it; never delete files from the venv"))
        for rel in rec.get("changed", []):
            other = _other_owner(dists, dist, rel)
            if other:
                findings.append(Finding(Level.WARN, f"{rel} is installed by both {dist['name']} and {other}; "
                                                     f"the copy on disk is {other}'s (an upstream packaging clash)",
                                        fix="harmless unless the file is imported at run time; report it upstream"))
            else:
                findings.append(Finding(Level.FAIL, f"{dist['name']}: {rel} differs from its RECORD "
                                                     f"(changed after install)",
                                        fix="rebuild the layer that installs it; never edit files in the venv"))
    mode = "sizes and sha256" if facts.get("deep") else "sizes (--deep adds sha256)"
    return f"{checked} files checked against their RECORD ({mode})", findings


def _other_owner(dists: list[dict], owner: dict, rel: str) -> str | None:
    """Another distribution whose RECORD lists `rel` at the size on disk (the probe's `clash`)."""
    return (owner["record"].get("clash") or {}).get(rel)


def pip_check(ctx: AuditContext) -> tuple[str, list[Finding]]:
    facts = ctx.facts.get("pip_check") or {}
    if facts.get("returncode") == 0:
        return f"{facts.get('tool')}: no broken requirements", []
    lines = facts.get("output") or ["(no output)"]
    return f"{facts.get('tool')} failed", [Finding(Level.FAIL, line, fix="rebuild from the lock (`make lock` then "
                                                                    "`bundle build`)") for line in lines[:10]]


def no_stray_path_hooks(ctx: AuditContext) -> tuple[str, list[Finding]]:
    facts = _facts(ctx)
    owned = set()
    for dist in facts["distributions"]:
        owned.update(dist.get("pth_owned", []))
    findings = []
    for pth in facts["pth_files"]:
        name = pth["path"].rsplit("/", 1)[-1]
        if name.startswith("__editable__"):
            findings.append(Finding(Level.FAIL, f"{pth['path']}: an editable install's hook ({pth['head'][:1]})",
                                    fix="install the package from the lock, not with -e"))
        elif name not in owned:
            findings.append(Finding(Level.FAIL, f"{pth['path']} belongs to no installed distribution: "
                                                 f"{(pth['head'] or [''])[0][:120]}",
                                    fix="remove it: a .pth runs at every interpreter start"))
    for link in facts["egg_links"]:
        findings.append(Finding(Level.FAIL, f"{link['path']} -> {(link['target'] or [''])[0]} (a develop-mode "
                                             f"install)", fix="remove it and install the package from the lock"))
    return f"{len(facts['pth_files'])} .pth file(s), {len(facts['egg_links'])} egg-link(s)", findings
