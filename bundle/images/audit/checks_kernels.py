"""The CUDA toolchain and the prebuilt kernels: one nvcc, of the lock's [cuda] release, with headers
of that release; every module the kernels layer built (its manifest, /opt/bundle/kernels.json)
present, holding sm_120a SASS and no PTX, linked against nothing the image lacks (the driver's
libcuda.so.1 aside: the host brings it) and needing libcuda.so.1 where it calls the driver API, and
found prebuilt by FlashInfer's own lookup; the modules the predicted choices load that the layer
did not build are compiled at the first start (WARN)."""

from __future__ import annotations

from bundle.images import cuda_toolchain, kernels_jit
from bundle.images.audit.checks_sglang import predicted
from bundle.images.audit.context import AuditContext
from bundle.findings import Finding, Level
from bundle.images.requirements import normalise

DRIVER = "libcuda.so.1"
TARGET_ARCH = "sm_120a"
_REBUILD = "rebuild the image from the lock (`make image`)"


def _facts(ctx: AuditContext) -> dict:
    facts = ctx.facts.get("kernels") or {}
    if "probe_error" in facts:
        raise RuntimeError(f"the probe could not read the toolchain and kernels: {facts['probe_error']}")
    return facts


def toolchain(ctx: AuditContext) -> tuple[str, list[Finding]]:
    cuda = ctx.lock.data["cuda"]
    facts = _facts(ctx)
    findings = []
    nvccs = facts.get("nvcc", [])
    if not nvccs:
        findings.append(Finding(Level.FAIL, "no nvcc in the image: the JIT compilers cannot build", fix=_REBUILD))
    if len(nvccs) > 1:
        findings.append(Finding(Level.FAIL, f"{len(nvccs)} CUDA compilers: "
                                             + ", ".join(f"{n['path']} ({n['version']})" for n in nvccs)
                                             + "; which one builds the kernels depends on CUDA_HOME",
                                fix="keep one toolchain: docker/lock.toml [cuda], nothing else installs an nvcc"))
    for n in nvccs:
        if n["version"] != cuda["nvcc"]:
            findings.append(Finding(Level.FAIL, f"{n['path']} is nvcc {n['version']}, the lock's [cuda] pins "
                                                 f"{cuda['nvcc']}", fix=_REBUILD))
    major, minor = (int(x) for x in cuda["line"].split("."))
    header = facts.get("cuda_h_version")
    if header != major * 1000 + minor * 10:
        findings.append(Finding(Level.FAIL, f"/usr/local/cuda/include/cuda.h is CUDA_VERSION {header}, not the "
                                             f"[cuda] line {cuda['line']} (mismatched headers)", fix=_REBUILD))
    for wheel, version in cuda_toolchain.wheel_pins(ctx.lock).items():
        locked = ctx.packages.get(normalise(wheel))
        if locked is None or locked.version != version:
            findings.append(Finding(Level.FAIL, f"docker/requirements: {wheel} is "
                                                 f"{locked.version if locked else 'absent'}, [cuda] pins {version}",
                                    fix="run `make lock`"))
    found = ", ".join(f"{n['path']} {n['version']}" for n in nvccs) or "none"
    return f"nvcc: {found}; cuda.h {header}; [cuda] {cuda['line']}", findings


def _module_findings(name: str, got: dict, lib: dict | None, lookup: dict) -> list[Finding]:
    if not got.get("present"):
        return [Finding(Level.FAIL, f"{name}: the kernels layer built it but its library is missing", fix=_REBUILD)]
    out = []
    cubins, ptx = (lib or {}).get("cubins", []), (lib or {}).get("ptx", [])
    if TARGET_ARCH not in cubins:
        out.append(Finding(Level.FAIL, f"{name}: no {TARGET_ARCH} SASS (cubins {', '.join(cubins) or 'none'}): "
                                        f"built for another arch", fix="build it with FLASHINFER_CUDA_ARCH_LIST=12.0a "
                                                                       "(the lock's cuda_arch_list): `make image`"))
    if ptx:
        out.append(Finding(Level.FAIL, f"{name}: holds PTX ({', '.join(ptx)}) the 580 driver would compile at "
                                        "first use", fix=_REBUILD))
    if got.get("driver_calls") and DRIVER not in got.get("needed", []):
        out.append(Finding(Level.FAIL, f"{name}: calls the driver API ({got['driver_calls'][0]}, ...) without "
                                        f"{DRIVER} in NEEDED: it fails to load on a GPU host",
                           fix="link it against a libcuda.so stub that exports the driver entry points "
                               "(docker/cuda-home.sh)"))
    unresolved = [lib_ for lib_ in got.get("unresolved", []) if lib_ != DRIVER]
    if unresolved:
        out.append(Finding(Level.FAIL, f"{name}: links against {', '.join(unresolved)}, not in the image", fix=_REBUILD))
    answer = lookup.get(name, {})
    if not answer.get("is_aot"):
        out.append(Finding(Level.FAIL, f"{name}: FlashInfer's lookup does not find it prebuilt "
                                        f"({answer.get('error') or answer.get('path') or 'no answer'}): it "
                                        "would be compiled at first start", fix=_REBUILD))
    return out


def kernels(ctx: AuditContext) -> tuple[str, list[Finding]]:
    facts = _facts(ctx)
    manifest = facts.get("manifest")
    built = (manifest or {}).get("modules", {})
    findings: list[Finding] = []
    if manifest is None:
        findings.append(Finding(Level.WARN, "no kernels layer (/opt/bundle/kernels.json): every JIT module is "
                                             "compiled at the first start", fix=_REBUILD))
    libs = {lib["path"]: lib for lib in (ctx.facts.get("libraries") or {}).get("libraries", [])}
    lookup = facts.get("lookup") or {}
    if "error" in lookup and not isinstance(lookup["error"], dict):
        findings.append(Finding(Level.FAIL, f"FlashInfer's lookup failed: {lookup['error']}", fix="see --debug"))
        lookup = {}
    for name, module in sorted(built.items()):
        findings += _module_findings(name, (facts.get("modules") or {}).get(name, {}), libs.get(module["path"]),
                                     lookup)
    needed: dict[str, list[str]] = {}
    for server, choice in predicted(ctx).items():
        for name in kernels_jit.needed_by(choice):
            needed.setdefault(name, []).append(server)
    for name, servers in sorted(needed.items()):
        if name not in built:
            findings.append(Finding(Level.WARN, f"{name} (needed by {', '.join(servers)}): not prebuilt, compiled "
                                                 f"at the first start", fix="`make image` builds every needed module"))
    ok = [n for n in built if not any(f.what.startswith(f"{n}:") for f in findings)]
    return (f"{len(built)} module(s) prebuilt for 12.0a ({', '.join(sorted(built)) or 'none'}), {len(ok)} sound; "
            f"the predicted choices need {', '.join(sorted(needed)) or 'none'}"), findings
