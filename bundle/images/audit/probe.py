"""bundle audit's probe: runs INSIDE a container of the image under audit, with the image's own
Python (/opt/venv/bin/python), and writes what it finds as JSON. It judges nothing: the checks in
bundle/images/audit/checks_*.py compare these facts with the lock and the config on the host.

Standard library only (it must run in any image); SGLang, the router and the tools are reached in
child processes, so one that crashes or hangs is a finding, not the end of the probe.

    python probe.py INPUT.json OUTPUT.json

INPUT.json: {"sections": [...], "lock_names": [...], "commands": {name: {"argv": [...], "env": {}}},
             "router_module": "...", "cuobjdump": PATH, "tools_path": PATH, "deep": bool,
             "sbom_path": PATH, "library_subset": [...] (optional: only these libraries are scanned)}
"""

from __future__ import annotations

import base64
import concurrent.futures
import email.parser
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import time

# None when run as `python -c SOURCE` (bundle verify, inside a running container).
HERE = os.path.dirname(os.path.abspath(__file__)) if "__file__" in globals() else None


def _site_paths() -> list[str]:
    """sys.path as the image's Python sees it, less this probe's own folder."""
    return [p for p in sys.path if p and os.path.isdir(p) and os.path.abspath(p) != HERE]


def _read(path: str, limit: int = 1 << 20) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(limit)
    except OSError:
        return None


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# ---- packages: every distribution on sys.path, its RECORD checked against the files ----

def _verify_record(site: str, info_dir: str, deep: bool) -> dict:
    """RECORD's rows against the disk: missing files, size mismatches and (deep) hash mismatches."""
    text = _read(os.path.join(info_dir, "RECORD"), 1 << 26)
    if text is None:
        return {"present": False}
    import csv
    missing, changed, files, top, rows = [], [], 0, set(), {}
    for row in csv.reader(text.splitlines()):
        if not row:
            continue
        rel, digest, size = (row + ["", "", ""])[:3]
        rows[rel] = size
        path = os.path.normpath(os.path.join(site, rel))
        first = rel.split("/", 1)[0]
        if not rel.startswith("..") and not first.endswith((".dist-info", ".egg-info", ".data")) \
                and first != "__pycache__":
            top.add(first[:-3] if first.endswith(".py") else first.split(".", 1)[0] if
                    first.endswith((".so", ".pyd")) else first)
        if not digest:
            continue  # RECORD itself, .pyc written after install
        files += 1
        try:
            st = os.stat(path)
        except OSError:
            missing.append(rel)
            continue
        if size and st.st_size != int(size):
            changed.append(rel)
            continue
        if deep and digest.startswith("sha256="):
            h = hashlib.sha256()
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 22), b""):
                    h.update(chunk)
            if base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode() != digest[7:]:
                changed.append(rel)
    return {"present": True, "files": files, "missing": missing[:20], "n_missing": len(missing),
            "changed": changed[:20], "n_changed": len(changed), "top_level_from_record": sorted(top),
            "pth_owned": sorted(r for r in rows if r.endswith(".pth") and "/" not in r), "_rows": rows}


def section_packages(inp: dict) -> dict:
    deep = bool(inp.get("deep"))
    dists, pth, egg_links = [], [], []
    paths = _site_paths()
    for site in paths:
        try:
            entries = sorted(os.listdir(site))
        except OSError:
            continue
        for entry in entries:
            full = os.path.join(site, entry)
            if entry.endswith(".pth"):
                pth.append({"path": full, "head": (_read(full, 400) or "").splitlines()[:3]})
            elif entry.endswith(".egg-link"):
                egg_links.append({"path": full, "target": (_read(full, 400) or "").splitlines()[:1]})
            elif entry.endswith((".dist-info", ".egg-info")) and os.path.isdir(full):
                meta = _read(os.path.join(full, "METADATA")) or _read(os.path.join(full, "PKG-INFO")) or ""
                headers = email.parser.Parser().parsestr(meta, headersonly=True)
                direct = _read(os.path.join(full, "direct_url.json"))
                top = (_read(os.path.join(full, "top_level.txt")) or "").split()
                record = _verify_record(site, full, deep) if entry.endswith(".dist-info") else {"present": False}
                dists.append({
                    "name": headers.get("Name") or entry.split("-", 1)[0],
                    "version": headers.get("Version") or "",
                    "path": full, "site": site,
                    "installer": (_read(os.path.join(full, "INSTALLER")) or "").strip(),
                    "direct_url": json.loads(direct) if direct else None,
                    "top_level": top or record.get("top_level_from_record", []),
                    "pth_owned": record.pop("pth_owned", []),
                    "record": record,
                })
    # A file another distribution's RECORD also lists, at the size on disk: the two clash and the
    # later install's copy won (named, so a clash is told apart from a file changed after install).
    for dist in dists:
        for rel in dist["record"].get("changed", []):
            path = os.path.normpath(os.path.join(dist["site"], rel))
            size = str(os.path.getsize(path)) if os.path.exists(path) else None
            for other in dists:
                if other is not dist and other["site"] == dist["site"] \
                        and other["record"].get("_rows", {}).get(rel) == size:
                    dist["record"].setdefault("clash", {})[rel] = other["name"]
    for dist in dists:
        dist["record"].pop("_rows", None)
        dist["record"].pop("top_level_from_record", None)
    # A top-level name found in more than one sys.path folder: the first one shadows the rest.
    where: dict[str, list[str]] = {}
    site_dirs = {d["site"] for d in dists}
    for entry_dir in paths:
        try:
            names = os.listdir(entry_dir)
        except OSError:
            continue
        for name in names:
            full = os.path.join(entry_dir, name)
            if name.endswith(".py"):
                mod = name[:-3]
            elif os.path.isdir(full) and os.path.isfile(os.path.join(full, "__init__.py")):
                mod = name
            elif re.match(r"^[A-Za-z_]\w*\..*\.so$|^[A-Za-z_]\w*\.so$", name):
                mod = name.split(".", 1)[0]
            else:
                continue
            where.setdefault(mod, []).append(entry_dir)
    shadowed = {m: dirs for m, dirs in where.items()
                if len(dirs) > 1 and any(d in site_dirs for d in dirs) and not m.startswith("_")}
    return {"sys_path": paths, "prefix": sys.prefix, "python": sys.version.split()[0],
            "distributions": dists, "pth_files": pth, "egg_links": egg_links, "shadowed": shadowed,
            "pythonpath": os.environ.get("PYTHONPATH", ""), "deep": deep}


def section_pip_check(inp: dict) -> dict:
    for cmd in ([sys.executable, "-m", "pip", "check", "--disable-pip-version-check"],
                ["uv", "pip", "check", "--python", sys.executable]):
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            last = str(exc)
            continue
        if "No module named pip" in proc.stderr:
            last = proc.stderr.strip()
            continue
        return {"tool": " ".join(cmd[:4]), "returncode": proc.returncode,
                "output": (proc.stdout + proc.stderr).strip().splitlines()[:50]}
    return {"tool": None, "returncode": None, "output": [last]}


# ---- imports: each top-level module of the lock's distributions, in child processes ----

_IMPORTER = r"""
import importlib, json, sys, time, traceback
for name in sys.argv[1:]:
    print(json.dumps({"start": name}), flush=True)
    t = time.monotonic()
    try:
        importlib.import_module(name)
        rec = {"module": name, "ok": True}
    except BaseException as exc:
        text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        lines = [ln for ln in text.splitlines() if ln.strip()] or [repr(exc)]
        rec = {"module": name, "ok": False, "error": lines[-1][:400], "detail": text[:3000]}
    rec["seconds"] = round(time.monotonic() - t, 2)
    print(json.dumps(rec), flush=True)
"""


def section_imports(inp: dict) -> dict:
    lock_names = {_normalise(n) for n in inp.get("lock_names", [])}
    modules = []
    for dist in section_packages({"deep": False})["distributions"]:
        if _normalise(dist["name"]) not in lock_names:
            continue
        for mod in dist["top_level"]:
            if mod.isidentifier() and not mod.startswith("_") and mod not in ("tests", "test", "bin") \
                    and mod not in modules:
                modules.append(mod)
    modules.sort()
    results: dict[str, dict] = {}
    pending = list(modules)
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    while pending:
        started = None
        try:
            proc = subprocess.run([sys.executable, "-c", _IMPORTER, *pending], capture_output=True,
                                  text=True, timeout=float(inp.get("import_timeout", 900)), env=env,
                                  stdin=subprocess.DEVNULL)
            out, crashed = proc.stdout, proc.returncode != 0
            tail = proc.stderr.strip().splitlines()[-1:] if crashed else []
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            crashed, tail = True, ["timed out"]
        for line in out.splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if "start" in rec:
                started = rec["start"]
            elif rec.get("module"):
                results[rec["module"]] = rec
        done = [m for m in pending if m in results]
        pending = [m for m in pending if m not in results]
        if pending and crashed:
            victim = started if started in pending else pending[0]
            results[victim] = {"module": victim, "ok": False,
                               "error": "the interpreter died importing it: " + " ".join(tail)[:300]}
            pending.remove(victim)
        elif pending and not done:
            break
    return {"modules": [results[m] for m in modules if m in results]}


def section_helps(inp: dict) -> dict:
    out = {}
    for label, module in (("server", "sglang.launch_server"), ("router", inp.get("router_module"))):
        if not module:
            continue
        t = time.monotonic()
        try:
            proc = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True,
                                  timeout=600, stdin=subprocess.DEVNULL)
            rc, text = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired:
            rc, text = None, "timed out after 600 s"
        out[label] = {"module": module, "returncode": rc, "seconds": round(time.monotonic() - t, 1),
                      "usage": next((ln for ln in text.splitlines() if ln.startswith("usage:")), "")[:200],
                      "tail": text.strip().splitlines()[-3:] if rc != 0 else []}
    return out


# ---- SGLang's own ServerArgs resolution with the platform reported as sm_120 ----

# Every platform fact SGLang's probes answer, as an RTX PRO 6000 (compute capability 12.0) would.
SM120_PLATFORM = dict(is_cuda=True, is_hip=False, is_npu=False, is_xpu=False, is_musa=False, is_mps=False,
                      is_sm90=False, is_sm100=False, is_sm100_or_sm110=False, is_sm110=False, is_sm120=True,
                      is_blackwell=True, is_hopper_with_cuda_12_3=False, has_flashinfer=True,
                      device_sm=120, device_capability=(12, 0))

PREDICTED_FIELDS = ("device", "tp_size", "attention_backend", "prefill_attention_backend",
                    "decode_attention_backend", "page_size", "moe_runner_backend", "moe_a2a_backend",
                    "kv_cache_dtype", "speculative_algorithm", "speculative_num_steps",
                    "speculative_eagle_topk", "speculative_num_draft_tokens", "disaggregation_mode",
                    "disaggregation_transfer_backend", "disable_cuda_graph", "cuda_graph_backend_decode",
                    "cuda_graph_backend_prefill", "disable_custom_all_reduce", "fp8_gemm_runner_backend",
                    "swa_full_tokens_ratio", "max_running_requests", "speculative_dspark_block_size",
                    "speculative_draft_model_path")

_RESOLVER = r"""
import json, logging, os, sys, traceback
jobs = json.loads(sys.stdin.read())
platform = jobs["platform"]; fields = jobs["fields"]
platform["device_capability"] = tuple(platform["device_capability"])
logging.disable(logging.WARNING)
from sglang.srt.runtime_context import override_platform
from sglang.srt.server_args import prepare_server_args
from sglang.srt.environ import envs
pristine = dict(os.environ)
for job in jobs["commands"]:
    # Each command line as its own server would see it: its service's environment, nothing left
    # behind by the one before (resolution writes some SGLANG_* variables).
    os.environ.clear(); os.environ.update(pristine); os.environ.update(job["env"])
    try:
        with override_platform(**platform):
            args = prepare_server_args(job["argv"])
            args.resolve_once()
            resolved = args.resolved_dict()
        sparse = envs.SGLANG_SM120_FLASHMLA_BACKEND.get()
        out = {k: resolved.get(k) for k in fields}
        # flash_mla_sm120.py dispatches on exactly these two names; anything else is its torch path.
        out["sm120_sparse_mla_backend"] = sparse if sparse in ("flashinfer", "triton") else "torch"
        out["sm120_sparse_mla_env"] = sparse
        print("RESOLVED " + json.dumps({"name": job["name"], "resolved": out}, default=str), flush=True)
    except BaseException as exc:
        lines = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines() or [repr(exc)]
        tail = [ln.strip() for ln in traceback.format_exc().strip().splitlines()[-6:]]
        print("FAILED " + json.dumps({"name": job["name"], "error": lines[-1][:500], "tail": tail}), flush=True)
"""


def section_serverargs(inp: dict) -> dict:
    """Every command line in one child process (importing SGLang once costs most of the time)."""
    jobs, out = [], {}
    for name, spec in sorted(inp.get("commands", {}).items()):
        argv = list(spec["argv"])
        added = []
        if "--device" not in argv:
            # What get_device() answers on a GPU host; on this machine it has no accelerator to find.
            argv += ["--device", "cuda"]
            added.append("--device cuda")
        env = {**spec.get("env", {}), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        jobs.append({"name": name, "argv": argv, "env": env})
        out[name] = {"ok": False, "error": "not reached (the resolver died before it)", "added": added,
                     "argv": argv}
    try:
        proc = subprocess.run([sys.executable, "-c", _RESOLVER], capture_output=True, text=True, timeout=900,
                              input=json.dumps({"commands": jobs, "platform": SM120_PLATFORM,
                                                "fields": PREDICTED_FIELDS}))
        stdout, died = proc.stdout, (proc.stderr.strip().splitlines() or [""])[-1] if proc.returncode else ""
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        died = "timed out after 900 s"
    for line in stdout.splitlines():
        kind, _, payload = line.partition(" ")
        if kind in ("RESOLVED", "FAILED"):
            rec = json.loads(payload)
            entry = out[rec["name"]]
            if kind == "RESOLVED":
                entry.update(ok=True, resolved=rec["resolved"])
                entry.pop("error", None)
            else:
                entry.update(ok=False, error=rec["error"], traceback_tail=rec["tail"])
    for entry in out.values():
        if not entry["ok"] and entry["error"].startswith("not reached") and died:
            entry["error"] += f": {died[:300]}"
    return out


# ---- native libraries: cubins and PTX of every shared object, by cuobjdump ----

_ARCH = re.compile(r"\.(sm_\d+[af]?)\.(?:cubin|ptx)\s*$")


def _list(cuobjdump: str, path: str, what: str) -> list[str]:
    try:
        proc = subprocess.run([cuobjdump, what, path], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return sorted({m.group(1) for ln in proc.stdout.splitlines() if (m := _ARCH.search(ln))})


# The sections a host ELF keeps its device code in, where cuobjdump reads it (nvcc's fatbinary, the
# relocatable device code's). A library with none holds nothing cuobjdump would list.
_DEVICE_SECTIONS = {b".nv_fatbin", b"__nv_relfatbin", b".nvFatBinSegment"}


def _may_hold_device_code(path: str) -> bool:
    """False only for a little-endian ELF64 host library whose section names hold none of
    _DEVICE_SECTIONS: about 990 of the stand-in's 1,081 shared objects, each spared two cuobjdump runs
    (the sm120 scan 54 s -> 37 s on 2 cores, the same 94 libraries reported, 2026-12-06). A CUDA ELF, a fatbin file and anything this
    reader cannot parse are scanned as before."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return True
            if int.from_bytes(head[0x12:0x14], "little") == 190:  # EM_CUDA: a cubin itself
                return True
            shoff = int.from_bytes(head[0x28:0x30], "little")
            entsize, count, names_at = (int.from_bytes(head[i:i + 2], "little") for i in (0x3A, 0x3C, 0x3E))
            if not shoff or entsize < 64 or not count or names_at >= count:
                return True
            f.seek(shoff)
            table = f.read(entsize * count)
            if len(table) < entsize * count:
                return True
            names = table[names_at * entsize:(names_at + 1) * entsize]
            f.seek(int.from_bytes(names[0x18:0x20], "little"))
            strings = f.read(int.from_bytes(names[0x20:0x28], "little"))
    except OSError:
        return True
    return any(name in _DEVICE_SECTIONS for name in strings.split(b"\0"))


def _objdump(cuobjdump: str, path: str) -> dict:
    held = _may_hold_device_code(path)
    return {"path": path, "size": os.path.getsize(path),
            "cubins": _list(cuobjdump, path, "--list-elf") if held else [],
            "ptx": _list(cuobjdump, path, "--list-ptx") if held else []}


def _embedded_cubins(path: str) -> list[bytes]:
    """CUDA ELF images (e_machine 190) inside a host library that keeps them as data, not in a fatbin
    section cuobjdump reads: TileLang's tvm_ffi executable.so carries its kernel's cubin that way."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return []
    out, at = [], data.find(b"\x7fELF", 1)
    while at != -1 and at + 64 <= len(data):
        head = data[at:at + 64]
        if head[4] == 2 and int.from_bytes(head[0x12:0x14], "little") == 190:  # ELF64, EM_CUDA
            def end(offset: int, entsize: int, count: int) -> int:
                return (int.from_bytes(head[offset:offset + 8], "little")
                        + int.from_bytes(head[entsize:entsize + 2], "little") * int.from_bytes(head[count:count + 2], "little"))
            size = max(end(0x28, 0x3A, 0x3C), end(0x20, 0x36, 0x38))  # section and program header tables
            if 64 <= size <= len(data) - at:
                out.append(data[at:at + size])
        at = data.find(b"\x7fELF", at + 1)
    return out


def _objdump_embedded(cuobjdump: str, path: str) -> dict:
    """cuobjdump on each cubin a library carries as data, reported under the library's own path."""
    import tempfile

    cubins, ptx = set(), set()
    for i, blob in enumerate(_embedded_cubins(path)):
        with tempfile.NamedTemporaryFile(suffix=f".{i}.cubin") as f:
            f.write(blob)
            f.flush()
            cubins.update(_list(cuobjdump, f.name, "--list-elf"))
            ptx.update(_list(cuobjdump, f.name, "--list-ptx"))
    return {"path": path, "size": os.path.getsize(path), "cubins": sorted(cubins), "ptx": sorted(ptx),
            "embedded": True}


def section_libraries(inp: dict) -> dict:
    cuobjdump = inp.get("cuobjdump")
    if not cuobjdump or not os.access(cuobjdump, os.X_OK):
        return {"error": f"cuobjdump not found at {cuobjdump}", "libraries": []}
    roots = [p for p in _site_paths() if "site-packages" in p or "dist-packages" in p]
    roots += [p for p in ("/usr/local/cuda/lib64", "/usr/local/cuda/targets") if os.path.isdir(p)]
    files, seen = [], set()
    for root in roots:
        for dirpath, _dirs, names in os.walk(root):
            for name in names:
                if not re.search(r"\.so(\.\d+)*$|\.cubin$|\.fatbin$", name):
                    continue
                path = os.path.join(dirpath, name)
                if os.path.islink(path) or not os.path.isfile(path):
                    continue
                real = os.path.realpath(path)
                if real not in seen:
                    seen.add(real)
                    files.append(path)
    subset = inp.get("library_subset")
    if subset is not None:  # only these (relative to a site folder) and the kernels layer's modules
        manifest = json.loads(_read(inp.get("kernels_manifest", "/opt/bundle/kernels.json")) or "{}")
        wanted = {m.get("path") for m in manifest.get("modules", {}).values()}
        wanted |= {os.path.join(site, rel) for site in roots for rel in subset}
        files = [p for p in files if p in wanted]
    # The TileLang kernels the layer compiled live outside the package folders (their cache), their
    # cubins inside executable.so as data.
    manifest = json.loads(_read(inp.get("kernels_manifest", "/opt/bundle/kernels.json")) or "{}")
    embedded = sorted({k["library"] for k in ((manifest.get("tilelang") or {}).get("kernels") or {}).values()
                       if k.get("library") and os.path.isfile(k["library"])})
    t = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        listed = list(pool.map(lambda p: _objdump(cuobjdump, p), sorted(files)))
        listed += list(pool.map(lambda p: _objdump_embedded(cuobjdump, p), embedded))
    return {"scanned": len(files), "subset": subset is not None, "seconds": round(time.monotonic() - t, 1),
            "libraries": [lib for lib in listed if lib["cubins"] or lib["ptx"]]}


# ---- the CUDA toolchain and the prebuilt kernels (docker/kernels.Dockerfile) ----

# Not the image's: the kernel's file systems and the audit's own mounts (probe, tools, model, output).
_SKIP_ROOTS = ("/proc", "/sys", "/dev", "/tmp", "/opt/bundle-audit", "/model")


def _nvccs() -> list[dict]:
    """Every nvcc executable in the image (links folded into their target), with its version."""
    found = {}
    for dirpath, dirs, names in os.walk("/"):
        dirs[:] = [d for d in dirs if os.path.join(dirpath, d) not in _SKIP_ROOTS]
        if "nvcc" in names:
            path = os.path.join(dirpath, "nvcc")
            real = os.path.realpath(path)
            if os.path.isfile(real) and os.access(real, os.X_OK):
                found.setdefault(real, path)
    out = []
    for real in sorted(found):
        try:
            text = subprocess.run([real, "--version"], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            text = ""
        m = re.search(r"release (\d+\.\d+), V([\d.]+)", text)
        out.append({"path": real, "release": m.group(1) if m else None, "version": m.group(2) if m else None})
    return out


def _cuda_h_version(path: str = "/usr/local/cuda/include/cuda.h") -> int | None:
    text = _read(path)
    m = re.search(r"^#define CUDA_VERSION (\d+)", text or "", re.MULTILINE)
    return int(m.group(1)) if m else None


def _torch_library_dirs() -> list[str]:
    """The folders torch's CUDA library names in its RUNPATH ($ORIGIN expanded): the CUDA wheels'
    lib folders (nvidia/cu13/lib, ...). FlashInfer imports torch before it loads a module, so
    libcudart.so.13 and the rest are already loaded from there by soname: the loader resolves a
    module's NEEDED against them, not only against ld.so's default paths, and so must the audit."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return []
    lib_dir = os.path.join(list(spec.submodule_search_locations)[0], "lib")
    dirs = [lib_dir]
    for name in ("libtorch_cuda.so", "libtorch_global_deps.so"):
        try:
            text = subprocess.run(["readelf", "-d", os.path.join(lib_dir, name)], capture_output=True,
                                  text=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        for paths in re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library (?:runpath|rpath): \[([^\]]*)\]", text):
            for entry in paths.split(":"):
                folder = os.path.normpath(entry.replace("$ORIGIN", lib_dir))
                if entry and os.path.isdir(folder) and folder not in dirs:
                    dirs.append(folder)
    return dirs


def _elf(path: str, library_dirs: list[str] = ()) -> dict:
    """NEEDED, the driver-API symbols it leaves undefined, and what the loader cannot find (ldd) in a
    process that has imported torch (`library_dirs`: _torch_library_dirs)."""
    env = {**os.environ, "LD_LIBRARY_PATH": ":".join([*library_dirs, os.environ.get("LD_LIBRARY_PATH", "")]).strip(":")}

    def run(*cmd: str) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env).stdout
        except (OSError, subprocess.TimeoutExpired):
            return ""
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run("readelf", "-d", path))
    undefined = sorted({ln.split()[-1].split("@")[0] for ln in run("nm", "-D", "--undefined-only", path).splitlines()
                        if re.search(r"\bcu[A-Z]\w*$", ln.split()[-1].split("@")[0] if ln.split() else "")})
    missing = sorted({ln.split("=>")[0].strip() for ln in run("ldd", path).splitlines() if "not found" in ln})
    return {"needed": needed, "driver_calls": undefined, "unresolved": missing}


_LOOKUP = """
import importlib, json, sys
out = {}
for name, target in json.loads(sys.argv[1]).items():
    module, function = target.split(":")
    try:
        spec = getattr(importlib.import_module(module), function)()
        out[name] = {"is_aot": bool(spec.is_aot), "path": str(spec.get_library_path())}
    except Exception as exc:
        out[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
print("LOOKUP " + json.dumps(out))
"""


# A module's load as the GPU host does it, every symbol resolved (RTLD_NOW; the driver's from the base
# layer's link stub under its soname), then the functions FlashInfer's own wrapper reads from it.
_LOAD_NOW = """
import ctypes, json, os, sys, torch, tvm_ffi
path, names = sys.argv[1], json.loads(sys.argv[2])
out = {"path": path}
try:
    ctypes.CDLL(path, mode=os.RTLD_NOW)
    out["rtld_now"] = True
    mod = tvm_ffi.load_module(path)
    out["functions"] = {n: hasattr(mod, n) for n in names}
except Exception as exc:
    out["rtld_now"] = out.get("rtld_now", False)
    out["error"] = f"{type(exc).__name__}: {exc}"[:500]
print("LOADNOW " + json.dumps(out))
"""

# Where SGLang's flashinfer_mxfp4 runner calls FlashInfer's fused MoE, and FlashInfer's wrapper of it.
SGLANG_MOE_CALLS = "sglang/srt/layers/moe/moe_runner/flashinfer_cutlass.py"
FLASHINFER_MOE_API = "flashinfer/fused_moe/core.py"


def _package_file(rel: str) -> str | None:
    for site in _site_paths():
        path = os.path.join(site, rel)
        if os.path.isfile(path):
            return path
    return None


def _flashinfer_moe_api(path: str) -> dict:
    """FlashInfer's own wrapper: the parameters of cutlass_fused_moe and the functions
    get_cutlass_fused_moe_module reads from the loaded module (`module.<name>`)."""
    import ast

    tree = ast.parse(_read(path, 1 << 24) or "")
    params, attrs = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "cutlass_fused_moe" and not params:
            a = node.args
            params = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
        if isinstance(node, ast.FunctionDef) and node.name == "get_cutlass_fused_moe_module":
            attrs |= {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
                      and isinstance(n.value, ast.Name) and n.value.id == "module"}
    return {"path": path, "params": params, "module_functions": sorted(attrs)}


def _fused_moe_facts(library: str, library_dirs: list[str]) -> dict:
    out: dict = {}
    api_path, calls_path = _package_file(FLASHINFER_MOE_API), _package_file(SGLANG_MOE_CALLS)
    out["flashinfer_api"] = _flashinfer_moe_api(api_path) if api_path else {"error": f"no {FLASHINFER_MOE_API}"}
    out["sglang_calls"] = ({"path": calls_path, "source": _read(calls_path, 1 << 22)} if calls_path
                           else {"error": f"no {SGLANG_MOE_CALLS}"})
    stub = "/usr/local/cuda/lib64/stubs/libcuda.so"
    import tempfile

    with tempfile.TemporaryDirectory() as driver:
        if os.path.exists(stub):
            os.symlink(stub, os.path.join(driver, "libcuda.so.1"))
        env = {**os.environ, "LD_LIBRARY_PATH": ":".join([driver, *library_dirs, os.environ.get("LD_LIBRARY_PATH", "")])}
        names = out["flashinfer_api"].get("module_functions", [])
        try:
            proc = subprocess.run([sys.executable, "-c", _LOAD_NOW, library, json.dumps(names)], capture_output=True,
                                  text=True, timeout=300, env=env)
            line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("LOADNOW ")), None)
            out["load"] = (json.loads(line[8:]) if line
                           else {"rtld_now": False, "error": (proc.stderr.strip().splitlines() or ["?"])[-1][:500]})
        except subprocess.TimeoutExpired:
            out["load"] = {"rtld_now": False, "error": "the load did not answer in 300 s"}
    return out


def section_kernels(inp: dict) -> dict:
    manifest_path = inp.get("kernels_manifest", "/opt/bundle/kernels.json")
    out: dict = {"nvcc": _nvccs(), "cuda_h_version": _cuda_h_version(), "manifest": None}
    text = _read(manifest_path)
    if text is None:
        return out
    manifest = json.loads(text)
    out["manifest"] = manifest
    modules = manifest.get("modules", {})
    library_dirs = _torch_library_dirs()
    out["modules"] = {name: {"present": os.path.isfile(m["path"]),
                             **(_elf(m["path"], library_dirs) if os.path.isfile(m["path"]) else {})}
                      for name, m in modules.items()}
    # A module cut to some dtype pairs (docker/kernels_narrow.py): loaded and read against SGLang's calls.
    out["fused_moe"] = {name: _fused_moe_facts(m["path"], library_dirs) for name, m in modules.items()
                        if "pairs_kept" in m and os.path.isfile(m["path"])}
    tilelang = (manifest.get("tilelang") or {}).get("kernels") or {}
    out["tilelang"] = {name: {"present": bool(k.get("library")) and os.path.isfile(k["library"]),
                              **(_elf(k["library"], library_dirs) if k.get("library") and os.path.isfile(k["library"])
                                 else {})}
                       for name, k in tilelang.items()}
    # FlashInfer's own lookup, as a server would ask it: JIT off, a fresh HOME (no JIT cache).
    env = {**os.environ, "FLASHINFER_DISABLE_JIT": "1", "HOME": "/tmp/audit-fresh-home"}
    # The generator the server calls (a cut module is built by another, under the same name).
    targets = {name: m.get("lookup") or m.get("generator", "") for name, m in modules.items()}
    try:
        proc = subprocess.run([sys.executable, "-c", _LOOKUP, json.dumps(targets)], capture_output=True,
                              text=True, timeout=300, env=env)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("LOOKUP ")), None)
        out["lookup"] = json.loads(line[7:]) if line else {"error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
    except subprocess.TimeoutExpired:
        out["lookup"] = {"error": "FlashInfer's lookup did not answer in 300 s"}
    return out


# ---- the SBOM, by cyclonedx-bom from the mounted tools (never from the image's venv) ----

def section_sbom(inp: dict) -> dict:
    tools, target = inp.get("tools_path"), inp.get("sbom_path")
    # The tool's folder goes onto sys.path inside the launcher only: an environment variable
    # would reach the interpreter it inspects and put the tool's own packages into the SBOM.
    launcher = ("import sys; sys.path.insert(0, sys.argv.pop(1)); "
                "from cyclonedx_py._internal.cli import run; sys.argv[0] = 'cyclonedx-py'; sys.exit(run())")
    cmd = [sys.executable, "-c", launcher, tools, "environment", "--output-reproducible", "--of", "JSON",
           "--output-file", target, sys.executable]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 or not os.path.isfile(target):
        return {"ok": False, "error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]}
    with open(target, "rb") as f:
        data = f.read()
    doc = json.loads(data)
    in_image = inp.get("sbom_in_image", "/opt/bundle/sbom.cdx.json")
    in_image_sha = None
    if os.path.isfile(in_image):
        with open(in_image, "rb") as f:
            in_image_sha = hashlib.sha256(f.read()).hexdigest()
    return {"ok": True, "path": target, "sha256": hashlib.sha256(data).hexdigest(), "in_image_sha256": in_image_sha,
            "components": len(doc.get("components", [])), "spec_version": doc.get("specVersion")}


SECTIONS = {"packages": section_packages, "pip_check": section_pip_check, "imports": section_imports,
            "helps": section_helps, "serverargs": section_serverargs, "libraries": section_libraries,
            "kernels": section_kernels, "sbom": section_sbom}


def main(argv: list[str]) -> int:
    """argv: INPUT (a file, or the JSON itself) and OUTPUT (a file, or - for stdout)."""
    if argv[1].lstrip().startswith("{"):
        inp = json.loads(argv[1])
    else:
        with open(argv[1]) as f:
            inp = json.load(f)
    result: dict = {}
    for name in inp.get("sections", list(SECTIONS)):
        t = time.monotonic()
        try:
            result[name] = SECTIONS[name](inp)
        except Exception as exc:  # one broken section is reported; the others still run
            result[name] = {"probe_error": f"{type(exc).__name__}: {exc}"}
        result.setdefault("_seconds", {})[name] = round(time.monotonic() - t, 1)
        if argv[2] != "-":
            with open(argv[2], "w") as f:  # written after every section: a later crash keeps the rest
                json.dump(result, f)
    if argv[2] == "-":
        print("BUNDLE-PROBE " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
