"""sm_120 coverage: every native library's cubins and PTX (cuobjdump), whether it can run on compute
capability 12.0, and, for each choice the config leads the server to, whether the libraries that
choice needs can: FAIL where they cannot (the original deployment's 10x slowdown, found before
launch)."""

from __future__ import annotations

from bundle.images.audit import kernels, sm120
from bundle.images.audit.checks_sglang import predicted
from bundle.images.audit.context import AuditContext
from bundle.findings import Finding, Level

SITE = "/opt/venv/lib/python3.12/site-packages/"


def libraries(ctx: AuditContext) -> list[dict]:
    """[{path, size, cubins, ptx, runs_on_sm120, how}] for every library holding device code."""
    facts = ctx.facts.get("libraries") or {}
    if "probe_error" in facts or facts.get("error"):
        raise RuntimeError(f"the probe could not list the native code: "
                           f"{facts.get('probe_error') or facts.get('error')}")
    return [{**lib, **sm120.coverage(lib["cubins"], lib["ptx"])} for lib in facts.get("libraries", [])]


def _short(path: str) -> str:
    return path.removeprefix(SITE)


def coverage(ctx: AuditContext) -> tuple[str, list[Finding]]:
    libs = libraries(ctx)
    cannot = [lib for lib in libs if not lib["runs_on_sm120"]]
    findings = [Finding(Level.INFO, f"{_short(lib['path'])} ({lib['size'] / 1e6:.0f} MB) cannot run on sm_120: "
                                     f"cubins {', '.join(lib['cubins']) or 'none'}, PTX {', '.join(lib['ptx']) or 'none'}")
                for lib in sorted(cannot, key=lambda lib: -lib["size"])]
    dead = sum(lib["size"] for lib in cannot)
    return (f"{len(libs)} libraries with device code ({ctx.facts['libraries'].get('scanned', '?')} scanned); "
            f"{len(cannot)} cannot run on sm_120 ({dead / 1e9:.2f} GB)"), findings


def levers(ctx: AuditContext) -> tuple[str, list[Finding]]:
    by_path = {_short(lib["path"]): lib for lib in libraries(ctx)}
    findings: list[Finding] = []
    needed: list[tuple[str, str, str]] = [(what, lib, "every server") for what, lib in kernels.ALWAYS]
    for server, choice in predicted(ctx).items():
        resolved = ctx.facts["serverargs"][server]["resolved"]
        for (field, value), libs in kernels.NEEDS.items():
            if str(resolved.get(field)) == value:
                needed += [(f"{field}={value}", lib, server) for lib in libs]
    checked = set()
    for what, lib, server in needed:
        if (what, lib, server) in checked:
            continue
        checked.add((what, lib, server))
        got = by_path.get(lib)
        field = what.split("=")[0]
        lever = kernels.LEVER_OF.get(field, "the image")
        if got is None:
            findings.append(Finding(Level.FAIL, f"{server}: {what} needs {lib}, which is not in the image "
                                                 f"(or holds no device code)",
                                    fix="rebuild the image from the lock"))
        elif not got["runs_on_sm120"]:
            findings.append(Finding(Level.FAIL, f"{server}: {what} needs {lib}, which has no code for sm_120 "
                                                 f"(cubins {', '.join(got['cubins']) or 'none'}, "
                                                 f"PTX {', '.join(got['ptx']) or 'none'})",
                                    fix=f"{ctx.config_name}: choose another value for {lever}"
                                        if lever != "the image" else "use a build of this library with sm_120 code"))
    return f"{len(checked)} kernel needs of the chosen paths checked", findings
