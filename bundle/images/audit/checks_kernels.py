"""The CUDA toolchain and the prebuilt kernels: one nvcc, of the lock's [cuda] release, with headers
of that release; every module the kernels layer built (its manifest, /opt/bundle/kernels.json)
present, holding sm_120a SASS and no PTX, linked against nothing the image lacks (the driver's
libcuda.so.1 aside: the host brings it) and needing libcuda.so.1 where it calls the driver API, and
found prebuilt by FlashInfer's own lookup; the modules the predicted choices load that the layer
did not build are compiled at the first start (WARN)."""

from __future__ import annotations

from bundle.images import cuda_toolchain, kernels_jit
from bundle.images.audit import moe_calls
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


def _binary_findings(name: str, got: dict, lib: dict | None) -> list[Finding]:
    """What every prebuilt library must be, FlashInfer's modules and TileLang's kernels alike."""
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
    return out


def _module_findings(name: str, got: dict, lib: dict | None, lookup: dict) -> list[Finding]:
    out = _binary_findings(name, got, lib)
    if not got.get("present"):
        return out
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
    for name, moe in sorted((facts.get("fused_moe") or {}).items()):
        if name in built:
            findings += _fused_moe_findings(name, built[name], moe)
    tilelang = (manifest or {}).get("tilelang") or {}
    tl_built = tilelang.get("kernels") or {}
    tl_facts = facts.get("tilelang") or {}
    for name, kernel in sorted(tl_built.items()):
        findings += _binary_findings(f"tilelang {name}", tl_facts.get(name, {}), libs.get(kernel.get("library")))
    expected = [f"fp8_paged_mqa_logits/split_kv={s}" for s in tilelang_indexer_splits()]
    missing = [n for n in expected if n not in tl_built]
    if manifest is not None and missing:
        findings.append(Finding(Level.FAIL if tl_built else Level.WARN,
                                f"TileLang indexer kernel(s) not prebuilt, compiled at the first start: "
                                f"{', '.join(missing)}", fix=_REBUILD))
    needed: dict[str, list[str]] = {}
    for server, choice in predicted(ctx).items():
        for name in kernels_jit.needed_by(choice):
            needed.setdefault(name, []).append(server)
    for name, servers in sorted(needed.items()):
        if name not in built:
            findings.append(Finding(Level.WARN, f"{name} (needed by {', '.join(servers)}): not prebuilt, compiled "
                                                 f"at the first start", fix="`make image` builds every needed module"))
    ok = [n for n in built if not any(f.what.startswith(f"{n}:") for f in findings)]
    tl_ok = [n for n in tl_built if not any(f.what.startswith(f"tilelang {n}:") for f in findings)]
    return (f"{len(built)} module(s) prebuilt for 12.0a ({', '.join(sorted(built)) or 'none'}), {len(ok)} sound; "
            f"{len(tl_built)} TileLang indexer kernel(s) prebuilt, {len(tl_ok)} sound; "
            f"the predicted choices need {', '.join(sorted(needed)) or 'none'}"), findings


def tilelang_indexer_splits() -> list[int]:
    """The split_kv values SGLang's tilelang_fp8_paged_mqa_logits picks at any row count for a page table
    of at least 256 blocks (sglang/kernels/ops/attention/dsa/tilelang_kernel.py: max(1, min(max_seq_len
    // 64, 256 // rows))): what docker/tilelang-prebuild.py compiles."""
    return sorted({max(1, 256 // rows) for rows in range(1, 258)}, reverse=True)


def _fused_moe_findings(name: str, module: dict, facts: dict) -> list[Finding]:
    """A fused MoE cut to some dtype pairs (docker/kernels_narrow.py): it loads with every symbol
    resolved, holds the functions FlashInfer's wrapper reads, takes every keyword SGLang's
    flashinfer_mxfp4 calls pass, and holds the dtype pair each call asks for."""
    out = []
    load = facts.get("load") or {}
    if not load.get("rtld_now"):
        out.append(Finding(Level.FAIL, f"{name}: does not load with every symbol resolved (RTLD_NOW): "
                                        f"{load.get('error', 'no answer')}", fix=_REBUILD))
    missing = sorted(n for n, present in (load.get("functions") or {}).items() if not present)
    if missing:
        out.append(Finding(Level.FAIL, f"{name}: lacks {', '.join(missing)}, which FlashInfer's "
                                        "get_cutlass_fused_moe_module calls", fix=_REBUILD))
    api, sglang = facts.get("flashinfer_api") or {}, facts.get("sglang_calls") or {}
    if "source" not in sglang:
        return out + [Finding(Level.FAIL, f"{name}: SGLang's flashinfer_mxfp4 calls cannot be read "
                                           f"({sglang.get('error', 'no source')})", fix=_REBUILD)]
    where = sglang.get("path", moe_calls.__name__)
    found = moe_calls.calls(sglang["source"])
    if not found:
        out.append(Finding(Level.FAIL, f"{name}: no cutlass_fused_moe call found on SGLang's flashinfer_mxfp4 "
                                        f"path in {where}: the cut cannot be checked against it",
                           fix="update bundle/images/audit/moe_calls.py for this SGLang"))
    kept = set(module.get("pairs_kept") or [])
    params = set(api.get("params") or [])
    for call in found:
        unknown = sorted(set(call.keywords) - params) if params else []
        if unknown:
            out.append(Finding(Level.FAIL, f"{name}: SGLang's call at {where}:{call.line} passes "
                                            f"{', '.join(unknown)}, which FlashInfer's cutlass_fused_moe does not take",
                               fix="pin a FlashInfer that SGLang's release was built against (docker/lock.toml)"))
        if call.pair not in kept:
            out.append(Finding(Level.FAIL, f"{name}: SGLang's flashinfer_mxfp4 call at {where}:{call.line} asks for "
                                            f"{call.pair_text()} (moe_gemm_kernels_{call.pair}.cu), left out of this "
                                            f"image's fused MoE (kept: {', '.join(sorted(kept)) or 'none'})",
                               fix="add the pair to PAIRS_KEPT in docker/kernels_narrow.py and `make image`"))
    return out
