"""Compile SGLang's TileLang indexer kernels for the lock's arch at image build time, into a TileLang
cache the entrypoint hands to the server (docker/entrypoint.sh seeds $TILELANG_CACHE_DIR from it).

    python tilelang-prebuild.py CACHE_DIR MANIFEST   (FLASHINFER_CUDA_ARCH_LIST: the lock's arch)

What the server calls on sm_120 for DeepSeek-V4 (sglang/srt/arg_groups/model_hook.py sets
SGLANG_OPT_USE_TILELANG_INDEXER): sglang/kernels/ops/attention/dsa/tilelang_kernel.py's
tilelang_fp8_paged_mqa_logits -> fp8_paged_mqa_logits_kernel(head_dim=128, num_heads=64,
block_size=64, clear_accum=False, split_kv=...), a @tilelang.jit kernel with symbolic batch, table,
sequence and block counts: one compilation per split_kv, every other size dynamic. The caller picks
split_kv = max(1, min(max_seq_len // 64, 256 // rows)); max_seq_len is the page table's width in
compressed tokens, at least 256 blocks for any context of 64Ki tokens or more (DeepSeek-V4's own
65,536 and up), so a decode step of `rows` query rows uses max(1, 256 // rows): the 31 values of
SPLITS, the same on every TP size (the indexer's 64 heads are not split by TP).

Each kernel goes through the factory's own JITImpl with TileLang's "auto" target resolved to the
Target a GPU host of the lock's arch detects (tilelang/cuda/target.py: {"kind": "cuda",
"arch": "sm_<cc>a"}), so the cache key (tilelang/cache/kernel_cache.py: the PrimFunc's script, the
target's string, pass configs, backend, TileLang's version and library hashes) is the one the
server computes. Then a fresh process without a compiler (CUDA_HOME and PATH without nvcc) asks the
same factory again: every kernel must come from the disk cache, or the build fails.
"""

import json
import os
import subprocess
import sys
import time

NUM_CU = 256  # tilelang_fp8_paged_mqa_logits' constant
SPLITS = sorted({max(1, NUM_CU // rows) for rows in range(1, NUM_CU + 2)}, reverse=True)
SHAPE = {"head_dim": 128, "num_heads": 64, "block_size": 64, "clear_accum": False}
FACTORY = "sglang.kernels.ops.attention.dsa.tilelang_kernel:fp8_paged_mqa_logits_kernel"


def arch() -> str:
    """What TileLang's CUDA detector answers on a GPU of the lock's arch (FLASHINFER_CUDA_ARCH_LIST=12.0a:
    compute capability 12.0 -> sm_120a), through TileLang's own get_target_arch."""
    from tilelang.contrib.nvcc import get_target_arch

    value = os.environ.get("FLASHINFER_CUDA_ARCH_LIST", "").split()
    if len(value) != 1:
        sys.exit(f"FLASHINFER_CUDA_ARCH_LIST={' '.join(value)!r}: one arch expected (the lock's cuda_arch_list)")
    major, minor = value[0].rstrip("af").split(".")
    return "sm_" + get_target_arch((int(major), int(minor)))


def _sample_args(rows: int, pages: int):
    """CPU tensors of the kernel's dtypes: only their dtypes and ranks reach the PrimFunc (every
    dimension is symbolic; the check process asks with other sizes and must hit the same entries)."""
    import torch

    h, d, b = SHAPE["num_heads"], SHAPE["head_dim"], SHAPE["block_size"]
    return (torch.empty((rows, h, d), dtype=torch.float8_e4m3fn),
            torch.empty((rows * pages, b * (d + 4)), dtype=torch.uint8),
            torch.empty((rows, h), dtype=torch.float32), torch.empty((rows,), dtype=torch.int32),
            torch.empty((rows, pages), dtype=torch.int32), torch.empty((rows, pages * b), dtype=torch.float32))


def compile_all(target_arch: str, splits: list[int], rows: int = 2, pages: int = 4) -> dict[int, dict]:
    """Each split through the factory's JITImpl, as the server's first call would, on every core
    (TileLang's own par_compile runs compilations on threads too); returns each one's cache key and
    whether it was compiled (a new entry) or read."""
    import concurrent.futures
    import importlib

    from tilelang.cache.kernel_cache import KernelCache
    from tilelang.cuda.target import _cuda_target_from_arch

    module, function = FACTORY.split(":")
    factory = getattr(importlib.import_module(module), function)
    root = KernelCache._get_cache_root()
    before = set(os.listdir(root)) if os.path.isdir(root) else set()
    # TileLang's detector on a GPU host returns _cuda_target_from_arch(<its arch>); "auto" resolves to
    # the current Target first, so the key holds the same target string.
    target = _cuda_target_from_arch(target_arch)

    def one(split: int) -> dict:
        t = time.monotonic()
        with target:
            impl = factory(**SHAPE, split_kv=split)
            args = _sample_args(rows, pages)
            impl.initialize_jit_mode(*args)
            impl.func.parse_args(*args)
            kernel = impl.compile(*args)
        key = getattr(kernel, "_tilelang_cache_key", None)
        print(f"  split_kv={split}: {time.monotonic() - t:.1f} s", flush=True)
        return {"seconds": round(time.monotonic() - t, 1), "key": key}

    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        out = dict(zip(splits, pool.map(one, splits)))
    new = set(os.listdir(root)) - before
    for rec in out.values():
        rec["compiled"] = rec["key"] in new
    out["new_entries"] = sorted(new)
    return out


def main(cache_dir: str, manifest_path: str) -> None:
    target_arch = arch()
    os.environ["TILELANG_CACHE_DIR"] = cache_dir
    if sys.argv[3:4] == ["--check"]:
        # The fresh process: no compiler reachable, other tensor sizes, every kernel from the cache.
        got = compile_all(target_arch, SPLITS, rows=7, pages=300)
        if got["new_entries"]:
            sys.exit(f"tilelang: {len(got['new_entries'])} kernel(s) compiled again instead of loading from {cache_dir}")
        return
    print(f"tilelang: {FACTORY} for {target_arch}, split_kv {SPLITS}", flush=True)
    t = time.monotonic()
    cpu0 = os.times()
    got = compile_all(target_arch, SPLITS)
    from tilelang.cache.kernel_cache import KernelCache

    root = KernelCache._get_cache_root()
    kernels = {}
    for split in SPLITS:
        rec = got[split]
        if not rec["compiled"]:
            sys.exit(f"tilelang: split_kv={split} wrote no cache entry of its own (key {rec['key']})")
        entry = os.path.join(root, rec["key"])
        binaries = sorted(f for f in os.listdir(entry) if f.endswith((".so", ".cubin", ".fatbin")))
        if not binaries:
            sys.exit(f"tilelang: split_kv={split}: no library in its cache entry {entry}")
        kernels[f"fp8_paged_mqa_logits/split_kv={split}"] = {
            "library": os.path.join(entry, binaries[0]),
            "factory": FACTORY, "args": {**SHAPE, "split_kv": split}, "key": rec["key"], "entry": entry,
            "files": sorted(os.listdir(entry)), "seconds": rec["seconds"]}
    # Fresh process, nothing to compile with: each kernel must be a cache hit.
    env = {k: v for k, v in os.environ.items() if k != "CUDA_HOME"}
    env["PATH"] = "/usr/bin:/bin"
    env["CUDA_HOME"] = "/nonexistent"
    subprocess.run([sys.executable, __file__, cache_dir, manifest_path, "--check"], check=True, env=env)
    cpu1 = os.times()
    manifest = json.loads(open(manifest_path).read()) if os.path.exists(manifest_path) else {}
    manifest["tilelang"] = {"arch": target_arch, "cache_dir": cache_dir, "namespace_root": root,
                            "seconds": round(time.monotonic() - t, 1),
                            "cpu_seconds": round(cpu1.user + cpu1.system + cpu1.children_user + cpu1.children_system
                                                 - cpu0.user - cpu0.system - cpu0.children_user
                                                 - cpu0.children_system, 1),
                            "kernels": kernels}
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"tilelang: {len(kernels)} kernel(s) in {manifest['tilelang']['seconds']:.0f} s, "
          f"each loaded from the cache in a process without a compiler", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
