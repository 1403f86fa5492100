"""Inputs, a float64 reference and SGLang's own kernel, for the tests and the benchmark.

Nothing here runs in a server; it is shipped so that the image can re-run the checks.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch

from .sparse_mla_decode import BYTES_PER_TOKEN, HEAD_DIM, NOPE_DIM, ROPE_DIM, TOKEN_DATA_BYTES

SGLANG_KERNEL_RELPATH = Path("kernels/ops/attention/flash_mla_sm120_triton.py")


def sglang_page_bytes(page_size: int) -> int:
    """Bytes between pages in SGLang's DSv4 pool: page_size*584 rounded up to a multiple of 576."""
    return math.ceil(page_size * BYTES_PER_TOKEN / TOKEN_DATA_BYTES) * TOKEN_DATA_BYTES


def make_paged_cache(
    num_pages: int,
    page_size: int,
    *,
    generator: torch.Generator,
    device: str = "cpu",
    dtype: torch.dtype = torch.float8_e4m3fn,
    value_std: float = 0.5,
    exponents: tuple[int, int] = (123, 126),  # scales 2^-4..2^-1: |values| <= 2, like normalised DSv4 KV
) -> torch.Tensor:
    """A DSv4 FP8 paged cache as SGLang hands it to the kernel: a [pages, page_size, 1, 584] view
    of a [pages, page_bytes] byte buffer (so stride(0) = page_bytes, with padding).

    Padding bytes and the 8th scale byte are random garbage (possibly FP8 NaN) on purpose: a
    kernel that reads them is caught.
    """
    page_bytes = sglang_page_bytes(page_size)
    buf = torch.randint(0, 256, (num_pages, page_bytes), dtype=torch.uint8, generator=generator)
    n = num_pages * page_size
    nope = (torch.randn(n, NOPE_DIM, generator=generator) * value_std).clamp(-4, 4).to(torch.float8_e4m3fn)
    rope = (torch.randn(n, ROPE_DIM, generator=generator) * value_std).to(torch.bfloat16)
    expo = torch.randint(exponents[0], exponents[1] + 1, (n, 7), dtype=torch.uint8, generator=generator)
    data = torch.cat([nope.view(torch.uint8), rope.view(torch.uint8)], dim=1)  # [n, 576]
    data = data.view(num_pages, page_size * TOKEN_DATA_BYTES)
    buf[:, : page_size * TOKEN_DATA_BYTES] = data
    scales = buf[:, page_size * TOKEN_DATA_BYTES : page_size * BYTES_PER_TOKEN].view(num_pages, page_size, 8)
    scales[:, :, :7] = expo.view(num_pages, page_size, 7)
    buf = buf.to(device)
    view = buf[:, : page_size * BYTES_PER_TOKEN].view(num_pages, page_size, 1, BYTES_PER_TOKEN)
    return view.view(dtype)


def dequantize_tokens(k_cache: torch.Tensor) -> torch.Tensor:
    """Every token of the cache as float64 [pages*page_size, 512], decoded from the raw bytes."""
    num_pages, page_size = k_cache.shape[:2]
    page_bytes = k_cache.stride(0)
    n = (num_pages - 1) * page_bytes + page_size * BYTES_PER_TOKEN
    raw = k_cache.view(torch.uint8).as_strided((n,), (1,))
    raw = torch.nn.functional.pad(raw, (0, num_pages * page_bytes - n)).view(num_pages, page_bytes)
    data = raw[:, : page_size * TOKEN_DATA_BYTES].reshape(num_pages * page_size, TOKEN_DATA_BYTES)
    expo = raw[:, page_size * TOKEN_DATA_BYTES : page_size * BYTES_PER_TOKEN]
    expo = expo.reshape(num_pages * page_size, 8)[:, :7].double()
    nope = data[:, :NOPE_DIM].contiguous().view(torch.float8_e4m3fn).double()
    nope = nope.view(-1, 7, 64) * torch.exp2(expo - 127.0).unsqueeze(-1)
    rope = data[:, NOPE_DIM:].contiguous().view(torch.bfloat16).double()
    return torch.cat([nope.reshape(-1, NOPE_DIM), rope], dim=1)


def reference_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    indices: torch.Tensor,
    topk_length: torch.Tensor | None,
    attn_sink: torch.Tensor | None,
    softmax_scale: float,
    extra_k_cache: torch.Tensor | None = None,
    extra_indices: torch.Tensor | None = None,
    extra_topk_length: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain float64 sparse attention with SGLang's Triton-path semantics.

    Token t of query b counts iff t < topk_length[b] and its index is >= 0; repeated indices count
    once per occurrence. The sink adds exp(sink[h]) to the denominator and nothing to the output.
    Returns out [B, H, 512] and lse [B, H] (the LSE includes the sink; -inf with nothing at all),
    computed on q's device.
    """
    B, _, H, _ = q.shape
    dev = q.device
    qd = q.reshape(B, H, HEAD_DIM).double()
    caches = [(k_cache, indices, topk_length)]
    if extra_k_cache is not None and extra_indices is not None:
        caches.append((extra_k_cache, extra_indices, extra_topk_length))
    keys, masks = [], []
    for cache, idx, length in caches:
        idx = idx.reshape(B, -1).long()
        topk = idx.shape[1]
        valid = idx >= 0
        if length is not None:
            valid &= torch.arange(topk, device=dev)[None, :] < length.long()[:, None]
        tokens = dequantize_tokens(cache)
        keys.append(tokens[idx.clamp(min=0)])  # [B, topk, 512]
        masks.append(valid)
    kv = torch.cat(keys, dim=1)
    valid = torch.cat(masks, dim=1)
    scores = torch.einsum("bhd,btd->bht", qd, kv) * softmax_scale
    scores = scores.masked_fill(~valid[:, None, :], -math.inf)
    lse = torch.logsumexp(scores, dim=-1)  # [B, H]
    if attn_sink is not None:
        lse = torch.logaddexp(lse, attn_sink.double()[None, :].expand(B, H))
    denom = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)
    weights = torch.exp(scores - denom[..., None])
    weights = torch.where(torch.isinf(lse)[..., None], torch.zeros_like(weights), weights)
    out = torch.einsum("bht,btd->bhd", weights, kv)
    return out, lse


@dataclass
class DecodeCase:
    """One call's inputs (SGLang's argument names)."""

    q: torch.Tensor
    k_cache: torch.Tensor
    indices: torch.Tensor
    topk_length: torch.Tensor | None
    attn_sink: torch.Tensor | None
    softmax_scale: float
    extra_k_cache: torch.Tensor | None = None
    extra_indices: torch.Tensor | None = None
    extra_topk_length: torch.Tensor | None = None

    def args(self) -> tuple:
        return (
            self.q, self.k_cache, self.indices, self.topk_length, self.attn_sink, HEAD_DIM,
            self.softmax_scale, self.extra_k_cache, self.extra_indices, self.extra_topk_length,
        )  # fmt: skip

    def to(self, device: str) -> DecodeCase:
        """The same case on `device`; caches keep their padded page view (stride(0) = page bytes)."""

        def move(t):
            if t is None or isinstance(t, float):
                return t
            if t.dim() == 4 and t.element_size() == 1:
                rows = t.view(torch.uint8).as_strided((t.shape[0], t.stride(0)), (t.stride(0), 1)).to(device)
                return rows[:, : t.shape[1] * BYTES_PER_TOKEN].view(t.shape).view(t.dtype)
            return t.to(device)

        return DecodeCase(*(move(getattr(self, f)) for f in self.__dataclass_fields__))


def make_case(
    batch: int,
    heads: int,
    topk: int,
    *,
    seed: int,
    device: str = "cpu",
    extra_topk: int = 0,
    sink: bool = True,
    lengths: str = "random",  # "full" | "random" | "none" (no topk_length tensor)
    invalid_frac: float = 0.1,
    page_size: int = 256,
    num_pages: int = 4,
    extra_page_size: int = 64,
    extra_num_pages: int = 12,
    q_std: float = 1.0,
    cache_dtype: torch.dtype = torch.float8_e4m3fn,
) -> DecodeCase:
    """Random inputs shaped like a DeepSeek-V4 decode step (indices [B, 1, topk] int32)."""
    g = torch.Generator().manual_seed(seed)

    def _indices(k: int, n_tokens: int) -> torch.Tensor:
        idx = torch.randint(0, n_tokens, (batch, 1, k), dtype=torch.int32, generator=g)
        drop = torch.rand(batch, 1, k, generator=g) < invalid_frac
        return idx.masked_fill(drop, -1)

    def _lengths(k: int) -> torch.Tensor | None:
        if lengths == "none":
            return None
        if lengths == "full":
            return torch.full((batch,), k, dtype=torch.int32)
        return torch.randint(1, k + 1, (batch,), dtype=torch.int32, generator=g)

    q = (torch.randn(batch, 1, heads, HEAD_DIM, generator=g) * q_std).to(torch.bfloat16)
    k_cache = make_paged_cache(num_pages, page_size, generator=g, dtype=cache_dtype)
    indices = _indices(topk, num_pages * page_size)
    topk_length = _lengths(topk)
    attn_sink = torch.randn(heads, generator=g) * 2.0 if sink else None
    case = DecodeCase(q, k_cache, indices, topk_length, attn_sink, HEAD_DIM ** (-0.5))
    if extra_topk:
        case.extra_k_cache = make_paged_cache(
            extra_num_pages, extra_page_size, generator=g, dtype=cache_dtype
        )
        case.extra_indices = _indices(extra_topk, extra_num_pages * extra_page_size)
        case.extra_topk_length = _lengths(extra_topk)
    return case.to(device) if device != "cpu" else case


def find_sglang_kernel_file() -> Path:
    """SGLang's Triton sparse-decode source: $SGLANG_TRITON_DECODE_FILE, else the installed sglang's."""
    env = os.environ.get("SGLANG_TRITON_DECODE_FILE")
    if env:
        return Path(env)
    spec = importlib.util.find_spec("sglang")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("sglang is not installed and SGLANG_TRITON_DECODE_FILE is unset")
    return Path(next(iter(spec.submodule_search_locations))) / SGLANG_KERNEL_RELPATH


def load_sglang_kernel_module(path: Path | None = None, *, fixed_block_t: int | None = None) -> ModuleType:
    """SGLang's kernel module, loaded from its file under a private name (it needs only torch and
    triton, so sglang's own import chain is skipped).

    `fixed_block_t` replaces its autotuner by one config: the Triton interpreter has no driver to
    time configs with.
    """
    path = path or find_sglang_kernel_file()
    name = f"_sglang_ref_{abs(hash(str(path)))}_{fixed_block_t}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if fixed_block_t is not None:
        inner = module._tiled_sparse_decode_kernel.fn

        class _OneConfig:
            def __getitem__(self, grid):
                return lambda *a, **kw: inner[grid](*a, BLOCK_T=fixed_block_t, **kw)

        module._tiled_sparse_decode_kernel = _OneConfig()
    sys.modules[name] = module
    return module
