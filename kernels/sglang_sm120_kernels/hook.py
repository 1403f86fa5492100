"""The one patch point: swap SGLang's Triton sparse-MLA decode for ours at server start.

`sglang_sm120_kernels_overlay.pth` (installed beside the package) runs `install()` in every Python
process of the image (the server, its scheduler and TP worker subprocesses, anything else) when
BUNDLE_SPARSE_MLA_OVERLAY=1, and does nothing otherwise. `install()` only registers an import
hook: torch, triton and sglang are not imported early. When SGLang's module

    sglang.kernels.ops.attention.flash_mla_sm120_triton

is executed, its attribute `flash_mla_sparse_decode_triton` is replaced before any importer sees
it. SGLang's caller (`flash_mla_with_kvcache_sm120` in `flash_mla_sm120.py`, taken when
SGLANG_SM120_FLASHMLA_BACKEND=triton) imports that name inside the function on every call, so the
replacement is what runs. Inputs the kernel does not implement (V4.1 cache layouts, other head
sizes) go to SGLang's original function.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import logging
import os
import sys
from collections.abc import Callable

ENV_VAR = "BUNDLE_SPARSE_MLA_OVERLAY"
TARGET_MODULE = "sglang.kernels.ops.attention.flash_mla_sm120_triton"
TARGET_ATTR = "flash_mla_sparse_decode_triton"
ORIGINAL_ATTR = "_bundle_overlay_original"

logger = logging.getLogger("sglang_sm120_kernels.hook")


def enabled(environ=None) -> bool:
    """True when the overlay is switched on for this process (BUNDLE_SPARSE_MLA_OVERLAY=1)."""
    return (environ if environ is not None else os.environ).get(ENV_VAR, "") == "1"


def make_replacement(original: Callable) -> Callable:
    """Our kernel behind SGLang's exact signature, falling back to `original` for inputs it does
    not implement (the reason is logged once per distinct reason)."""
    seen_reasons: set = set()

    def flash_mla_sparse_decode_triton(
        q,
        k_cache,
        indices,
        topk_length,
        attn_sink,
        head_dim_v,
        softmax_scale,
        extra_k_cache=None,
        extra_indices=None,
        extra_topk_length=None,
    ):
        from . import sparse_mla_decode as smd

        reason = smd.unsupported_reason(q, k_cache, indices, extra_k_cache, extra_indices)
        if reason is None:
            return smd.sparse_mla_decode(
                q, k_cache, indices, topk_length, attn_sink, head_dim_v, softmax_scale,
                extra_k_cache, extra_indices, extra_topk_length, check=False,
            )  # fmt: skip
        if reason not in seen_reasons:
            seen_reasons.add(reason)
            logger.warning("sparse-MLA overlay: SGLang's kernel takes this call (%s)", reason)
        return original(
            q, k_cache, indices, topk_length, attn_sink, head_dim_v, softmax_scale,
            extra_k_cache, extra_indices, extra_topk_length,
        )  # fmt: skip

    flash_mla_sparse_decode_triton.__doc__ = original.__doc__
    flash_mla_sparse_decode_triton.__bundle_overlay__ = True
    return flash_mla_sparse_decode_triton


def patch(module) -> bool:
    """Replace the module's decode function with ours; False if it was already ours."""
    current = getattr(module, TARGET_ATTR)
    if getattr(current, "__bundle_overlay__", False):
        return False
    setattr(module, ORIGINAL_ATTR, current)
    setattr(module, TARGET_ATTR, make_replacement(current))
    logger.info("sparse-MLA overlay: %s.%s replaced by sglang_sm120_kernels", TARGET_MODULE, TARGET_ATTR)
    return True


def is_patched(module) -> bool:
    return bool(getattr(getattr(module, TARGET_ATTR, None), "__bundle_overlay__", False))


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader):
        self._inner = inner

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        patch(module)


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds SGLang's module the normal way, then patches it right after it executes."""

    def find_spec(self, fullname, path, target=None):
        if fullname != TARGET_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _PatchingLoader(spec.loader)
        return spec


_finder: _PatchOnImport | None = None


def install(environ=None) -> bool:
    """Arm the patch for this process if the overlay is enabled; True if armed or applied."""
    global _finder
    if not enabled(environ):
        return False
    module = sys.modules.get(TARGET_MODULE)
    if module is not None:
        patch(module)
        return True
    if _finder is None:
        _finder = _PatchOnImport()
        sys.meta_path.insert(0, _finder)
    return True
