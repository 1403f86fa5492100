"""Tensor-core sparse-MLA decode for DeepSeek-V4's paged FP8 KV cache (Triton).

Drop-in for SGLang 0.5.23's `flash_mla_sparse_decode_triton`
(`sglang/kernels/ops/attention/flash_mla_sm120_triton.py`): same arguments, same outputs, same
semantics (extra compressed cache merged by LSE, attention sink in the denominator, `topk_length`,
index -1 skipped), but shaped for the GPU:

* one program holds every head of a query (up to 64) as the M side of `tl.dot`, so each gathered
  KV tile is loaded and dequantised once per query instead of once per head, and both products
  (Q.K^T and P.V) run on tensor cores;
* the top-k (and the extra cache's top-k) is split across programs, so batch 1 fills the machine;
  the splits are merged by their log-sum-exp, with the sink, by a second small kernel (launched
  the plain way or as a programmatic dependent launch) or by the attention kernel's last program
  per query and head block: `DecodeConfig.merge` picks, by default per call (`_merge_for`).

DSv4 page layout (V4, 584 bytes per token), read from the page's raw bytes:
  data section  [slot*576 + 0 : +448]   448 FP8 e4m3 "nope" values
                [slot*576 + 448 : +128]  64 BF16 "rope" values
  scale section [page_size*576 + slot*8 : +7]  7 UE8M0 exponents, one per 64 nope values
with `page_bytes = k_cache.stride(0)` between pages (SGLang pads pages).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

NOPE_DIM = 448
ROPE_DIM = 64
HEAD_DIM = NOPE_DIM + ROPE_DIM  # 512
TOKEN_DATA_BYTES = NOPE_DIM + 2 * ROPE_DIM  # 576
TOKEN_SCALE_BYTES = 8  # 7 exponents + 1 pad
BYTES_PER_TOKEN = TOKEN_DATA_BYTES + TOKEN_SCALE_BYTES  # 584: the last dim of SGLang's V4 cache view

_LOG2E = 1.4426950408889634
_LN2 = 0.6931471805599453


@dataclass(frozen=True)
class DecodeConfig:
    """Launch shape. `target_programs_per_sm` sets how finely the top-k is split across programs.

    `max_block_h` caps the heads one program holds: on sm_120, 64 heads x 512 fp32 accumulators
    plus the query do not fit one CTA's registers (ptxas spills 6-18 KB, see kernels/README.md),
    so 64 heads run as two programs of 32 by default.
    """

    block_t: int = 32
    max_block_h: int = 32
    # Where even heads in blocks of this size, one tile per program, fit the machine in one wave
    # (batch 1 with 64 heads, top-k up to 1024 or 512 + 512 extra), they run so: twice the
    # programs, each half as long, on SMs the grid would leave idle (0: always `max_block_h`).
    small_batch_block_h: int = 16
    num_warps_h16: int = 8  # 4 was slower on all 16 sixteen-head shapes (kernels/RESULTS.md)
    num_warps_h64: int = 8  # for head blocks of 32 or 64
    num_stages: int = 2  # software-pipelines the next tile's gathers behind this tile's math
    target_programs_per_sm: float = 1.0
    # Load the query in the tile loop, after the index load, so the two DRAM trips overlap:
    # "auto" does where a program walks a single tile (batch 1: 0.1-0.7 us faster on the H200),
    # not where it walks many (the reloads cost up to 5 % at batch 64).
    q_in_loop: bool | str = "auto"
    # True: a program stops at topk_length (skips empty tiles, but its first index load then
    # waits for topk_length's load); False: topk_length only masks (faster on the H200 at every
    # batch of the benchmark, where rows are full).
    loop_to_len: bool = False
    # Output columns per merge program; 0: as many as keep at most `combine_values_per_thread`
    # fp32 partials a thread with all splits loaded at once (512 for up to 32 splits, 256 for
    # 64): fewer, wider programs where a query has few splits (1.11x at batch 8 and 1.03x at
    # batch 1 on the H200 against 128 columns), no spills where it has many (512 columns x 64
    # splits spill on sm_120 and were 4-5 us slower).
    combine_block_d: int = 0
    combine_values_per_thread: int = 128
    combine_num_warps: int = 4
    combine_max_splits_per_step: int = 64
    # The split partials' storage: "float32", or "bfloat16" (half the bytes the attention kernel
    # writes and the merge reads back; the merged output is bf16 either way, and FlashInfer's and
    # SGLang's own `merge_state` take bf16 partials with fp32 LSEs in the same way); "auto":
    # bf16 where the "last" merge runs (one program reads all of a query's partials: 2-5 % faster
    # at batch 32 on the H200), fp32 for the merge kernel (bf16 was no faster there, and slower
    # with its wide programs).
    partial_dtype: str = "auto"
    # How the top-k splits are merged (MERGES): "kernel", a second kernel launch; "pdl", the same
    # kernel as a programmatic dependent launch (placed while the attention kernel runs, waiting
    # in-kernel for it); "last", inside the attention kernel, by the last program of each (query,
    # head block) to finish; "auto": "last" where a query has at most `auto_last_max_splits`
    # splits (that program then reads little), else "pdl" where the attention grid leaves most
    # SMs idle (at most `auto_pdl_max_sm_share` of them busy), else "kernel". The thresholds
    # are the H200 measurements' (kernels/RESULTS.md); sm_120 may want others.
    merge: str = "auto"
    auto_last_max_splits: int = 5
    auto_pdl_max_sm_share: float = 0.5
    # "auto" also takes "pdl" where both grids fit the machine in one wave (attention and merge
    # programs each at most one per SM): 0.4-0.8 us faster than the plain launch on the H200
    # (64 heads at batch 1, 16 heads at batch 8). With the merge's programs outnumbering the SMs
    # (four per head, as before), PDL measured slower there.
    auto_pdl_one_wave: bool = True
    # With merge="last", one program merges all splits of its (query, head block) alone, so the
    # split is coarsened until a query has at most this many splits (0: no cap).
    last_max_splits: int = 0

    def __post_init__(self):
        # Checked once, when the configuration is made, not on every decode call.
        if self.merge not in MERGES:
            raise ValueError(f"DecodeConfig.merge must be one of {', '.join(MERGES)}, got {self.merge!r}")
        if self.q_in_loop not in (True, False, "auto"):
            raise ValueError(f'DecodeConfig.q_in_loop must be True, False or "auto", got {self.q_in_loop!r}')
        if self.partial_dtype not in PARTIAL_DTYPES:
            raise ValueError(
                f"DecodeConfig.partial_dtype must be one of {', '.join(PARTIAL_DTYPES)}, got {self.partial_dtype!r}"
            )


MERGES = ("auto", "kernel", "pdl", "last")
PARTIAL_DTYPES = ("auto", "float32", "bfloat16")


DEFAULT_CONFIG = DecodeConfig()


@triton.jit
def _mma(a, b, EMULATE_DOT: tl.constexpr):
    # The Triton interpreter (CPU) multiplies bf16 operands as raw bits; its operands arrive here
    # already rounded to bf16 and held in fp32, so an IEEE fp32 dot is the same arithmetic as the
    # tensor cores' bf16 x bf16 -> fp32.
    if EMULATE_DOT:
        return tl.dot(a, b, input_precision="ieee")
    else:
        return tl.dot(a, b)


@triton.jit
def _nope_chunk(kv_ptr, data, expo8, valid, col, G: tl.constexpr, EMULATE_DOT: tl.constexpr):
    """Dequantised nope values [G*64, G*64+64) of a tile's tokens, as bf16 [BLOCK_T, 64]."""
    raw = tl.load(kv_ptr + (data[:, None] + (G * 64 + col[None, :])), mask=valid[:, None], other=0)
    expo = ((expo8 >> (8 * G)) & 0xFF).to(tl.int32)
    # 2^(e-127) built from its bits: exact, no exp2 on the critical path.
    scale = (expo << 23).to(tl.float32, bitcast=True)
    k = (raw.to(tl.float8e4nv, bitcast=True).to(tl.float32) * scale[:, None]).to(tl.bfloat16)
    if EMULATE_DOT:
        k = k.to(tl.float32)
    return k


@triton.jit
def _load_q(q_row, col, h_ok, G: tl.constexpr, EMULATE_DOT: tl.constexpr):
    q = tl.load(q_row + G * 64 + col[None, :], mask=h_ok[:, None], other=0.0)
    if EMULATE_DOT:
        q = q.to(tl.float32)
    return q


@triton.jit
def _attend_tiles(
    q0,
    q1,
    q2,
    q3,
    q4,
    q5,
    q6,
    qr,
    m_i,
    l_i,
    a0,
    a1,
    a2,
    a3,
    a4,
    a5,
    a6,
    ar,
    kv_ptr,  # uint8: the cache's raw bytes
    idx_row_ptr,  # this query's indices
    n_cols,  # their number (the top-k width)
    n_valid,  # how many of them count (topk_length)
    page_size,
    page_bytes,
    tile_lo,
    tile_hi,
    qk_scale_log2,
    q_row,
    h_ok,
    BLOCK_T: tl.constexpr,
    EMULATE_DOT: tl.constexpr,
    Q_IN_LOOP: tl.constexpr,
):
    """Online softmax over tiles [tile_lo, tile_hi) of one query's top-k, all heads at once.

    The 512 dims are eight 64-wide chunks (7 FP8 groups, each with its own exponent, and the BF16
    rope): each chunk is one tensor-core product for Q.K^T and one for P.V, and no tile ever needs
    a reshape or a 512-wide fp32 copy.
    """
    offs_t = tl.arange(0, BLOCK_T)
    col = tl.arange(0, 64)
    scale_section = page_size.to(tl.int64) * 576
    for tile in range(tile_lo, tile_hi):
        t = tile * BLOCK_T + offs_t
        # Masked by the row's width, not by topk_length: with LOOP_TO_LEN off, the index load
        # then need not wait for topk_length's load (a DRAM trip at batch 1); the length masks.
        idx = tl.load(idx_row_ptr + t, mask=t < n_cols, other=-1)
        valid = (t < n_valid) & (idx >= 0)
        idx = tl.where(valid, idx, 0)
        page = (idx // page_size).to(tl.int64)
        slot = (idx % page_size).to(tl.int64)
        data = page * page_bytes + slot * 576
        # The token's 8 scale bytes (7 exponents + pad) in one 8-byte load.
        expo8 = tl.load((kv_ptr + (page * page_bytes + scale_section + slot * 8)).to(tl.pointer_type(tl.uint64)),
                        mask=valid, other=0)  # fmt: skip
        k0 = _nope_chunk(kv_ptr, data, expo8, valid, col, 0, EMULATE_DOT)
        k1 = _nope_chunk(kv_ptr, data, expo8, valid, col, 1, EMULATE_DOT)
        k2 = _nope_chunk(kv_ptr, data, expo8, valid, col, 2, EMULATE_DOT)
        k3 = _nope_chunk(kv_ptr, data, expo8, valid, col, 3, EMULATE_DOT)
        k4 = _nope_chunk(kv_ptr, data, expo8, valid, col, 4, EMULATE_DOT)
        k5 = _nope_chunk(kv_ptr, data, expo8, valid, col, 5, EMULATE_DOT)
        k6 = _nope_chunk(kv_ptr, data, expo8, valid, col, 6, EMULATE_DOT)
        rope_ptr = (kv_ptr + (data + 448)).to(tl.pointer_type(tl.bfloat16))
        kr = tl.load(rope_ptr[:, None] + col[None, :], mask=valid[:, None], other=0.0)
        if EMULATE_DOT:
            kr = kr.to(tl.float32)
        if Q_IN_LOOP:
            # Issued after the index load, so the two DRAM trips overlap instead of queueing.
            c0 = _load_q(q_row, col, h_ok, 0, EMULATE_DOT)
            c1 = _load_q(q_row, col, h_ok, 1, EMULATE_DOT)
            c2 = _load_q(q_row, col, h_ok, 2, EMULATE_DOT)
            c3 = _load_q(q_row, col, h_ok, 3, EMULATE_DOT)
            c4 = _load_q(q_row, col, h_ok, 4, EMULATE_DOT)
            c5 = _load_q(q_row, col, h_ok, 5, EMULATE_DOT)
            c6 = _load_q(q_row, col, h_ok, 6, EMULATE_DOT)
            cr = _load_q(q_row, col, h_ok, 7, EMULATE_DOT)
        else:
            c0, c1, c2, c3, c4, c5, c6, cr = q0, q1, q2, q3, q4, q5, q6, qr

        s = _mma(c0, tl.trans(k0), EMULATE_DOT)
        s += _mma(c1, tl.trans(k1), EMULATE_DOT)
        s += _mma(c2, tl.trans(k2), EMULATE_DOT)
        s += _mma(c3, tl.trans(k3), EMULATE_DOT)
        s += _mma(c4, tl.trans(k4), EMULATE_DOT)
        s += _mma(c5, tl.trans(k5), EMULATE_DOT)
        s += _mma(c6, tl.trans(k6), EMULATE_DOT)
        s += _mma(cr, tl.trans(kr), EMULATE_DOT)
        s = tl.where(valid[None, :], s * qk_scale_log2, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        p = p.to(tl.bfloat16)
        if EMULATE_DOT:
            p = p.to(tl.float32)
        al = alpha[:, None]
        a0 = a0 * al + _mma(p, k0, EMULATE_DOT)
        a1 = a1 * al + _mma(p, k1, EMULATE_DOT)
        a2 = a2 * al + _mma(p, k2, EMULATE_DOT)
        a3 = a3 * al + _mma(p, k3, EMULATE_DOT)
        a4 = a4 * al + _mma(p, k4, EMULATE_DOT)
        a5 = a5 * al + _mma(p, k5, EMULATE_DOT)
        a6 = a6 * al + _mma(p, k6, EMULATE_DOT)
        ar = ar * al + _mma(p, kr, EMULATE_DOT)
        m_i = m_new
    return m_i, l_i, a0, a1, a2, a3, a4, a5, a6, ar


@triton.jit
def _store_o(o_row, acc, inv_l, col, h_ok, G: tl.constexpr):
    tl.store(
        o_row + G * 64 + col[None, :], (acc * inv_l[:, None]).to(o_row.dtype.element_ty), mask=h_ok[:, None]
    )


@triton.jit
def _sparse_mla_partial_kernel(
    q_ptr,
    stride_qb,
    stride_qh,
    H,
    kv_ptr,
    idx_ptr,
    stride_ib,
    len_ptr,
    topk,
    page_size,
    page_bytes,
    n_split,
    xkv_ptr,
    xidx_ptr,
    stride_xib,
    xlen_ptr,
    xtopk,
    xpage_size,
    xpage_bytes,
    o_part_ptr,
    lse_part_ptr,
    n_split_total,
    tiles_per_split,
    qk_scale_log2,
    counter_ptr,
    sink_ptr,
    out_ptr,
    stride_ob,
    stride_oh,
    lse_out_ptr,
    HAS_LEN: tl.constexpr,
    HAS_EXTRA: tl.constexpr,
    HAS_XLEN: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_T: tl.constexpr,
    EMULATE_DOT: tl.constexpr,
    Q_IN_LOOP: tl.constexpr,
    LOOP_TO_LEN: tl.constexpr,
    MERGE_LAST: tl.constexpr,  # "last": the last program of each (query, head block) merges
    LAUNCH_DEPENDENTS: tl.constexpr,  # the merge kernel follows as a programmatic dependent launch
    HAS_SINK: tl.constexpr,
):
    """One program: every head of one query block over one split of the top-k.

    Grid (batch, split, head block). Splits [0, n_split) walk the main cache, the rest the extra
    cache. Writes the split's normalised output (fp32, or bf16: `DecodeConfig.partial_dtype`) and
    its LSE in base 2 (-inf if empty).
    With MERGE_LAST the last split program of a (query, head block) to finish then merges all
    splits (`_merge_splits`) and writes the final output and LSE.
    """
    if LAUNCH_DEPENDENTS:
        # Let the merge kernel's programs be placed on the idle SMs now; they wait in-kernel
        # (griddepcontrol.wait) until this grid has finished and its stores are visible.
        tl.extra.cuda.gdc_launch_dependents()
    b = tl.program_id(0)
    sp = tl.program_id(1)
    hb = tl.program_id(2)
    heads = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    h_ok = heads < H
    col = tl.arange(0, 64)

    q_row = q_ptr + b.to(tl.int64) * stride_qb + heads[:, None] * stride_qh
    if Q_IN_LOOP:
        q0, q1, q2, q3, q4, q5, q6, qr = 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0  # loaded per tile instead
    else:
        q0 = _load_q(q_row, col, h_ok, 0, EMULATE_DOT)
        q1 = _load_q(q_row, col, h_ok, 1, EMULATE_DOT)
        q2 = _load_q(q_row, col, h_ok, 2, EMULATE_DOT)
        q3 = _load_q(q_row, col, h_ok, 3, EMULATE_DOT)
        q4 = _load_q(q_row, col, h_ok, 4, EMULATE_DOT)
        q5 = _load_q(q_row, col, h_ok, 5, EMULATE_DOT)
        q6 = _load_q(q_row, col, h_ok, 6, EMULATE_DOT)
        qr = _load_q(q_row, col, h_ok, 7, EMULATE_DOT)

    m_i = tl.full([BLOCK_H], -1.0e30, tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    a0 = tl.zeros([BLOCK_H, 64], tl.float32)
    a1 = tl.zeros([BLOCK_H, 64], tl.float32)
    a2 = tl.zeros([BLOCK_H, 64], tl.float32)
    a3 = tl.zeros([BLOCK_H, 64], tl.float32)
    a4 = tl.zeros([BLOCK_H, 64], tl.float32)
    a5 = tl.zeros([BLOCK_H, 64], tl.float32)
    a6 = tl.zeros([BLOCK_H, 64], tl.float32)
    ar = tl.zeros([BLOCK_H, 64], tl.float32)

    if sp < n_split:
        n_valid = topk
        if HAS_LEN:
            n_valid = tl.maximum(tl.minimum(tl.load(len_ptr + b).to(tl.int32), topk), 0)
        tile_lo = sp * tiles_per_split
        # LOOP_TO_LEN stops at topk_length (skips empty tiles, but the loop waits for that load);
        # otherwise topk_length only masks, and the first index load need not wait for it.
        tile_hi = tl.minimum(tile_lo + tiles_per_split, tl.cdiv(n_valid if LOOP_TO_LEN else topk, BLOCK_T))
        m_i, l_i, a0, a1, a2, a3, a4, a5, a6, ar = _attend_tiles(
            q0, q1, q2, q3, q4, q5, q6, qr, m_i, l_i, a0, a1, a2, a3, a4, a5, a6, ar,
            kv_ptr, idx_ptr + b.to(tl.int64) * stride_ib, topk, n_valid, page_size, page_bytes,
            tile_lo, tile_hi, qk_scale_log2, q_row, h_ok, BLOCK_T, EMULATE_DOT, Q_IN_LOOP,
        )  # fmt: skip
    else:
        if HAS_EXTRA:
            n_valid = xtopk
            if HAS_XLEN:
                n_valid = tl.maximum(tl.minimum(tl.load(xlen_ptr + b).to(tl.int32), xtopk), 0)
            tile_lo = (sp - n_split) * tiles_per_split
            tile_hi = tl.minimum(
                tile_lo + tiles_per_split, tl.cdiv(n_valid if LOOP_TO_LEN else xtopk, BLOCK_T)
            )
            m_i, l_i, a0, a1, a2, a3, a4, a5, a6, ar = _attend_tiles(
                q0, q1, q2, q3, q4, q5, q6, qr, m_i, l_i, a0, a1, a2, a3, a4, a5, a6, ar,
                xkv_ptr, xidx_ptr + b.to(tl.int64) * stride_xib, xtopk, n_valid, xpage_size, xpage_bytes,
                tile_lo, tile_hi, qk_scale_log2, q_row, h_ok, BLOCK_T, EMULATE_DOT, Q_IN_LOOP,
            )  # fmt: skip

    has_mass = l_i > 0.0
    inv_l = 1.0 / tl.where(has_mass, l_i, 1.0)
    lse2 = tl.where(has_mass, m_i + tl.log2(tl.where(has_mass, l_i, 1.0)), float("-inf"))
    row = (b * n_split_total + sp).to(tl.int64) * H + heads
    o_row = o_part_ptr + row[:, None] * 512
    _store_o(o_row, a0, inv_l, col, h_ok, 0)
    _store_o(o_row, a1, inv_l, col, h_ok, 1)
    _store_o(o_row, a2, inv_l, col, h_ok, 2)
    _store_o(o_row, a3, inv_l, col, h_ok, 3)
    _store_o(o_row, a4, inv_l, col, h_ok, 4)
    _store_o(o_row, a5, inv_l, col, h_ok, 5)
    _store_o(o_row, a6, inv_l, col, h_ok, 6)
    _store_o(o_row, ar, inv_l, col, h_ok, 7)
    tl.store(lse_part_ptr + row, lse2, mask=h_ok)

    if MERGE_LAST:
        # Split-K "last program reduces". Every thread's partial stores above are ordered before
        # the counter bump: the CTA barrier, then the (cumulative) release of the acq_rel atomic.
        # The program that draws the last ticket has seen all the others' releases (acquire) and
        # merges; it then puts the counter back to 0, so the zero-initialised counters serve the
        # next call (and CUDA-graph replays) without a memset launch.
        tl.debug_barrier()
        counter = counter_ptr + (b * tl.num_programs(2) + hb)
        ticket = tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu")
        if ticket == n_split_total - 1:
            _merge_splits(
                o_part_ptr, lse_part_ptr, sink_ptr, out_ptr, stride_ob, stride_oh, lse_out_ptr,
                b, heads, h_ok, H, n_split_total, HAS_SINK, BLOCK_H,
            )  # fmt: skip
            tl.atomic_xchg(counter, 0, sem="relaxed", scope="gpu")


@triton.jit
def _merge_splits(
    o_part_ptr,
    lse_part_ptr,
    sink_ptr,
    out_ptr,
    stride_ob,
    stride_oh,
    lse_out_ptr,
    b,
    heads,
    h_ok,
    H,
    n_split_total,
    HAS_SINK: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    """The "last" merge: one query's splits for a block of heads, by LSE, with the sink;
    the same arithmetic as `_sparse_mla_combine_kernel`. Loads use `.cg` (L2, not L1): the
    partials were written by other SMs during this launch."""
    S_STEP: tl.constexpr = 16
    col = tl.arange(0, 64)
    first = (b * n_split_total).to(tl.int64)
    splits = tl.arange(0, S_STEP)
    m = tl.full([S_STEP, BLOCK_H], float("-inf"), tl.float32)
    for s0 in range(0, n_split_total, S_STEP):
        ok = ((s0 + splits) < n_split_total)[:, None] & h_ok[None, :]
        ptrs = lse_part_ptr + ((first + s0 + splits) * H)[:, None] + heads[None, :]
        m = tl.maximum(m, tl.load(ptrs, mask=ok, other=float("-inf"), cache_modifier=".cg"))
    m_row = tl.max(m, 0)
    if HAS_SINK:
        sink2 = tl.load(sink_ptr + heads, mask=h_ok, other=float("-inf")).to(tl.float32) * 1.4426950408889634
        m_row = tl.maximum(m_row, sink2)
    m_row = tl.where(m_row == float("-inf"), 0.0, m_row)

    a0 = tl.zeros([BLOCK_H, 64], tl.float32)
    a1 = tl.zeros([BLOCK_H, 64], tl.float32)
    a2 = tl.zeros([BLOCK_H, 64], tl.float32)
    a3 = tl.zeros([BLOCK_H, 64], tl.float32)
    a4 = tl.zeros([BLOCK_H, 64], tl.float32)
    a5 = tl.zeros([BLOCK_H, 64], tl.float32)
    a6 = tl.zeros([BLOCK_H, 64], tl.float32)
    ar = tl.zeros([BLOCK_H, 64], tl.float32)
    total = tl.zeros([BLOCK_H], tl.float32)
    for s in range(n_split_total):
        row = (first + s) * H + heads
        w = tl.exp2(tl.load(lse_part_ptr + row, mask=h_ok, other=float("-inf"), cache_modifier=".cg") - m_row)
        total += w
        wc = w[:, None]
        o_row = o_part_ptr + row[:, None] * 512 + col[None, :]
        msk = h_ok[:, None]
        a0 += wc * tl.load(o_row + 0 * 64, mask=msk, other=0.0, cache_modifier=".cg").to(tl.float32)
        a1 += wc * tl.load(o_row + 1 * 64, mask=msk, other=0.0, cache_modifier=".cg").to(tl.float32)
        a2 += wc * tl.load(o_row + 2 * 64, mask=msk, other=0.0, cache_modifier=".cg").to(tl.float32)
        a3 += wc * tl.load(o_row + 3 * 64, mask=msk, other=0.0, cache_modifier=".cg").to(tl.float32)
        a4 += wc * tl.load(o_row + 4 * 64, mask=msk, other=0.0, cache_modifier=".cg").to(tl.float32)
        a5 += wc * tl.load(o_row + 5 * 64, mask=msk, other=0.0, cache_modifier=".cg").to(tl.float32)
        a6 += wc * tl.load(o_row + 6 * 64, mask=msk, other=0.0, cache_modifier=".cg").to(tl.float32)
        ar += wc * tl.load(o_row + 7 * 64, mask=msk, other=0.0, cache_modifier=".cg").to(tl.float32)
    if HAS_SINK:
        total += tl.exp2(sink2 - m_row)

    has_mass = total > 0.0
    safe_total = tl.where(has_mass, total, 1.0)
    inv = tl.where(has_mass, 1.0 / safe_total, 0.0)
    out_row = out_ptr + b.to(tl.int64) * stride_ob + heads[:, None] * stride_oh + col[None, :]
    msk = h_ok[:, None]
    tl.store(out_row + 0 * 64, (a0 * inv[:, None]).to(tl.bfloat16), mask=msk)
    tl.store(out_row + 1 * 64, (a1 * inv[:, None]).to(tl.bfloat16), mask=msk)
    tl.store(out_row + 2 * 64, (a2 * inv[:, None]).to(tl.bfloat16), mask=msk)
    tl.store(out_row + 3 * 64, (a3 * inv[:, None]).to(tl.bfloat16), mask=msk)
    tl.store(out_row + 4 * 64, (a4 * inv[:, None]).to(tl.bfloat16), mask=msk)
    tl.store(out_row + 5 * 64, (a5 * inv[:, None]).to(tl.bfloat16), mask=msk)
    tl.store(out_row + 6 * 64, (a6 * inv[:, None]).to(tl.bfloat16), mask=msk)
    tl.store(out_row + 7 * 64, (ar * inv[:, None]).to(tl.bfloat16), mask=msk)
    lse_out = tl.where(has_mass, (m_row + tl.log2(safe_total)) * 0.6931471805599453, float("-inf"))
    tl.store(lse_out_ptr + b * H + heads, lse_out, mask=h_ok)


@triton.jit
def _sparse_mla_combine_kernel(
    o_part_ptr,
    lse_part_ptr,
    sink_ptr,
    out_ptr,
    stride_ob,
    stride_oh,
    lse_out_ptr,
    H,
    n_split_total,
    HAS_SINK: tl.constexpr,
    S_BLOCK: tl.constexpr,
    ONE_STEP: tl.constexpr,  # n_split_total <= S_BLOCK
    BLOCK_D: tl.constexpr,
    WAIT_FOR_PRIMARY: tl.constexpr,
):
    """Merge one (query, head)'s splits by LSE, add the sink to the denominator, write bf16 out
    (BLOCK_D columns of it) and the LSE.

    Grid (batch * heads, 512 / BLOCK_D): many small programs with plain 2-D loads, because at
    batch 1 this kernel is pure latency (a head-block version with 3-D tiles took 10 us there).
    """
    bh = tl.program_id(0)
    db = tl.program_id(1)
    b = bh // H
    h = bh % H
    splits = tl.arange(0, S_BLOCK)
    first = (b * n_split_total).to(tl.int64)
    d = db * BLOCK_D + tl.arange(0, BLOCK_D)
    if HAS_SINK:
        # An input, not the attention kernel's output: loaded before any wait.
        sink2 = tl.load(sink_ptr + h).to(tl.float32) * 1.4426950408889634
    if WAIT_FOR_PRIMARY:
        # Launched as a programmatic dependent launch: this program may start while the attention
        # kernel still runs; wait here until it has finished and its partials are visible.
        tl.extra.cuda.gdc_wait()

    if ONE_STEP:
        # All splits fit one step: their LSEs and partial rows are loaded together, one trip to L2
        # (the partial rows do not depend on the LSEs; only their weights do).
        ok = splits < n_split_total
        rows = (first + splits) * H + h
        lse = tl.load(lse_part_ptr + rows, mask=ok, other=float("-inf"))
        o = tl.load(o_part_ptr + rows[:, None] * 512 + d[None, :], mask=ok[:, None], other=0.0).to(tl.float32)
        m_row = tl.max(lse, 0)
    else:
        m = tl.full([S_BLOCK], float("-inf"), tl.float32)
        for s0 in range(0, n_split_total, S_BLOCK):
            ok = (s0 + splits) < n_split_total
            m = tl.maximum(
                m, tl.load(lse_part_ptr + (first + s0 + splits) * H + h, mask=ok, other=float("-inf"))
            )
        m_row = tl.max(m, 0)
    if HAS_SINK:
        m_row = tl.maximum(m_row, sink2)
    m_row = tl.where(m_row == float("-inf"), 0.0, m_row)

    if ONE_STEP:
        w = tl.exp2(lse - m_row)
        acc = tl.sum(w[:, None] * o, 0)
        total_row = tl.sum(w, 0)
    else:
        acc = tl.zeros([BLOCK_D], tl.float32)
        total = tl.zeros([S_BLOCK], tl.float32)
        for s0 in range(0, n_split_total, S_BLOCK):
            ok = (s0 + splits) < n_split_total
            rows = (first + s0 + splits) * H + h
            w = tl.exp2(tl.load(lse_part_ptr + rows, mask=ok, other=float("-inf")) - m_row)
            o = tl.load(o_part_ptr + rows[:, None] * 512 + d[None, :], mask=ok[:, None], other=0.0)
            acc += tl.sum(w[:, None] * o.to(tl.float32), 0)
            total += w
        total_row = tl.sum(total, 0)
    if HAS_SINK:
        total_row += tl.exp2(sink2 - m_row)

    has_mass = total_row > 0.0
    safe_total = tl.where(has_mass, total_row, 1.0)
    inv = tl.where(has_mass, 1.0 / safe_total, 0.0)
    tl.store(out_ptr + b.to(tl.int64) * stride_ob + h * stride_oh + d, (acc * inv).to(tl.bfloat16))
    if db == 0:
        lse_out = tl.where(has_mass, (m_row + tl.log2(safe_total)) * 0.6931471805599453, float("-inf"))
        tl.store(lse_out_ptr + bh, lse_out)


@functools.cache
def _num_sms(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def unsupported_reason(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    indices: torch.Tensor,
    extra_k_cache: torch.Tensor | None = None,
    extra_indices: torch.Tensor | None = None,
) -> str | None:
    """Why these inputs are outside what this kernel implements, or None if it takes them.

    The start-up hook hands anything outside (V4.1 caches of 528/288 bytes per token, other head
    sizes) back to SGLang's own kernel.
    """
    if q.dim() != 4 or q.shape[1] != 1 or q.shape[-1] != HEAD_DIM:
        return f"q must be [B, 1, H, {HEAD_DIM}], got {tuple(q.shape)}"
    if q.dtype != torch.bfloat16 or q.stride(-1) != 1:
        return f"q must be bf16 with a unit last stride, got {q.dtype} strides {q.stride()}"
    caches = [("k_cache", k_cache, indices)]
    if extra_k_cache is not None and extra_indices is not None:
        caches.append(("extra_k_cache", extra_k_cache, extra_indices))
    for name, cache, idx in caches:
        if cache.dim() != 4 or cache.shape[-1] != BYTES_PER_TOKEN or cache.element_size() != 1:
            return f"{name} must be a [pages, page_size, 1, {BYTES_PER_TOKEN}] byte view, got {tuple(cache.shape)}"
        if cache.stride(-1) != 1 or cache.stride(0) < cache.shape[1] * BYTES_PER_TOKEN:
            return f"{name} pages overlap: strides {cache.stride()}"
        if idx.dtype not in (torch.int32, torch.int64) or idx.shape[0] != q.shape[0]:
            return f"{name} indices must be int [B, ...], got {idx.dtype} {tuple(idx.shape)}"
        if cache.device != q.device or idx.device != q.device:
            return f"{name} is on {cache.device}, q on {q.device}"
    return None


def _flat_bytes(cache: torch.Tensor) -> torch.Tensor:
    # Every byte the kernel may address: all pages, the last one up to its scale section's end.
    n = (cache.shape[0] - 1) * cache.stride(0) + cache.shape[1] * BYTES_PER_TOKEN
    return cache.view(torch.uint8).as_strided((n,), (1,))


def _rows(indices: torch.Tensor, batch: int) -> torch.Tensor:
    flat = indices.reshape(batch, -1)
    return flat if flat.stride(-1) == 1 else flat.contiguous()


_COUNTERS: dict = {}
_MIN_COUNTERS = 4096


def _merge_counters(device: torch.device, needed: int) -> torch.Tensor:
    """Zero-initialised int32 arrival counters for the "last" merge, one per (query, head block).

    Kept per (device, stream) and reused by every call: the kernel's last program of each
    (query, head block) resets its counter to 0, so no call (and no CUDA-graph replay) needs a
    memset. One buffer per stream, because two launches in flight on different streams must not
    share counters. Allocated once, at least `_MIN_COUNTERS` long (batch x head blocks); do the
    first call of a stream outside CUDA-graph capture, or the allocation's memset is captured too.
    """
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    key = (device.type, device.index, stream)
    buf = _COUNTERS.get(key)
    if buf is None or buf.numel() < needed:
        buf = torch.zeros(max(needed, _MIN_COUNTERS), dtype=torch.int32, device=device)
        _COUNTERS[key] = buf
    return buf


@dataclass
class _Plan:
    B: int
    H: int
    block_h: int
    n_hblocks: int
    n_split: int
    n_split_total: int
    tiles_per_split: int
    num_warps: int
    merge: str  # the merge this call runs: config.merge, or what it falls back to (`_merge_for`)
    q_in_loop: bool  # config.q_in_loop, "auto" resolved
    s_block: int  # splits the merge kernel loads in one step
    combine_block_d: int  # output columns per merge-kernel program


def _device_sms(dev: torch.device) -> int:
    if dev.type != "cuda":
        return 8  # the interpreter: any small machine
    return _num_sms(dev.index if dev.index is not None else torch.cuda.current_device())


def _partials_in_bf16(config: DecodeConfig, last_merge: bool) -> bool:
    """Whether the split partials are stored as bf16 (`DecodeConfig.partial_dtype`, "auto"
    resolved: bf16 where the attention kernel's last program merges them)."""
    return config.partial_dtype == "bfloat16" or (config.partial_dtype == "auto" and last_merge)


def _combine_block_d(config: DecodeConfig, s_block: int) -> int:
    """Output columns per merge-kernel program (`DecodeConfig.combine_block_d`, 0 resolved)."""
    if config.combine_block_d:
        return config.combine_block_d
    cols = config.combine_values_per_thread * 32 * config.combine_num_warps // s_block
    return max(16, min(HEAD_DIM, triton.next_power_of_2(cols + 1) // 2))  # a power of 2, <= cols


def _merge_for(
    config: DecodeConfig, dev: torch.device, n_split_total: int, programs: int, merge_programs: int
) -> str:
    """The merge a call of `programs` attention programs, `n_split_total` a query, runs (the
    merge kernel would launch `merge_programs`): `config.merge`, "auto" resolved, "pdl" falling
    back to "kernel" where there is no GPU of sm_90 or newer (programmatic dependent launch
    needs Hopper+)."""
    merge = config.merge
    if merge == "auto":
        sms = _device_sms(dev)
        if n_split_total <= config.auto_last_max_splits:
            merge = "last"
        elif programs <= config.auto_pdl_max_sm_share * sms or (
            config.auto_pdl_one_wave and programs <= sms and merge_programs <= sms
        ):
            merge = "pdl"
        else:
            merge = "kernel"
    if merge == "pdl" and (dev.type != "cuda" or torch.cuda.get_device_capability(dev)[0] < 9):
        merge = "kernel"
    return merge


def _plan(q, rows, xtopk: int, config: DecodeConfig, tiles_per_split: int | None) -> _Plan:
    B, _, H, _ = q.shape
    tiles = triton.cdiv(rows.shape[1], config.block_t)
    xtiles = triton.cdiv(xtopk, config.block_t)
    sms = _device_sms(q.device)
    block_h = min(config.max_block_h, max(16, triton.next_power_of_2(H)))
    small = config.small_batch_block_h
    if (
        0 < small < block_h
        and B * triton.cdiv(H, small) * (tiles + xtiles) <= sms * config.target_programs_per_sm
    ):
        block_h = small
    n_hblocks = triton.cdiv(H, block_h)
    if tiles_per_split is None:
        target = max(1, int(sms * config.target_programs_per_sm))
        tiles_per_split = max(1, math.ceil(B * n_hblocks * (tiles + xtiles) / target))
        if config.merge == "last" and config.last_max_splits > 0:
            # One program merges all of a query's splits: keep their number (its reads) small.
            while triton.cdiv(tiles, tiles_per_split) + (
                triton.cdiv(xtiles, tiles_per_split) if xtopk else 0
            ) > config.last_max_splits and tiles_per_split < max(tiles, xtiles, 1):
                tiles_per_split += 1
    n_split = max(1, triton.cdiv(tiles, tiles_per_split))
    n_xsplit = max(1, triton.cdiv(xtiles, tiles_per_split)) if xtopk else 0
    num_warps = config.num_warps_h64 if block_h >= 32 else config.num_warps_h16
    n_split_total = n_split + n_xsplit
    s_block = min(config.combine_max_splits_per_step, triton.next_power_of_2(n_split_total))
    combine_block_d = _combine_block_d(config, s_block)
    merge = _merge_for(
        config, q.device, n_split_total, B * n_split_total * n_hblocks, B * H * (HEAD_DIM // combine_block_d)
    )
    q_in_loop = tiles_per_split == 1 if config.q_in_loop == "auto" else config.q_in_loop
    return _Plan(
        B, H, block_h, n_hblocks, n_split, n_split_total, tiles_per_split, num_warps, merge, q_in_loop,
        s_block, combine_block_d,
    )  # fmt: skip


def sparse_mla_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    indices: torch.Tensor,
    topk_length: torch.Tensor | None,
    attn_sink: torch.Tensor | None,
    head_dim_v: int,
    softmax_scale: float | None,
    extra_k_cache: torch.Tensor | None = None,
    extra_indices: torch.Tensor | None = None,
    extra_topk_length: torch.Tensor | None = None,
    *,
    config: DecodeConfig = DEFAULT_CONFIG,
    tiles_per_split: int | None = None,
    check: bool = True,
    _stages: str = "partial+combine",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sparse MLA decode; returns (out [B, 1, H, 512] bf16, lse [B, H, 1] fp32), like SGLang's.

    `tiles_per_split` (tests, tuning) fixes how many BLOCK_T-token tiles one program walks;
    by default it is chosen so the grid is about `target_programs_per_sm` programs per SM.
    `check=False` skips the input validation (the start-up hook has already done it).
    `config.merge` chooses how the top-k splits are merged (`DecodeConfig`, `_merge_for`).
    """
    if check:
        reason = unsupported_reason(q, k_cache, indices, extra_k_cache, extra_indices)
        if reason is not None:
            raise ValueError(reason)
    if softmax_scale is None:
        softmax_scale = q.shape[-1] ** (-0.5)
    B, _, H, D = q.shape
    device = q.device
    has_extra = extra_k_cache is not None and extra_indices is not None

    rows = _rows(indices, B)
    xrows = _rows(extra_indices, B) if has_extra else rows
    xtopk = xrows.shape[1] if has_extra else 0
    plan = _plan(q, rows, xtopk, config, tiles_per_split)

    kv = _flat_bytes(k_cache)
    xkv = _flat_bytes(extra_k_cache) if has_extra else kv
    # `_stages` (benchmarks) runs one of the two kernels alone; the in-kernel merges need both.
    merge = plan.merge if _stages == "partial+combine" else "kernel"
    in_kernel = merge == "last"
    part_dtype = torch.bfloat16 if _partials_in_bf16(config, in_kernel) else torch.float32
    o_part = torch.empty(B, plan.n_split_total, H, HEAD_DIM, dtype=part_dtype, device=device)
    lse_part = torch.empty(B, plan.n_split_total, H, dtype=torch.float32, device=device)
    out = torch.empty(B, 1, H, D, dtype=torch.bfloat16, device=device)
    lse = torch.empty(B, 1, H, dtype=torch.float32, device=device)
    counters = _merge_counters(device, B * plan.n_hblocks) if in_kernel else lse_part

    if "partial" in _stages:
        _sparse_mla_partial_kernel[(B, plan.n_split_total, plan.n_hblocks)](
            q, q.stride(0), q.stride(2), H,
            kv, rows, rows.stride(0), topk_length if topk_length is not None else rows, rows.shape[1],
            k_cache.shape[1], k_cache.stride(0), plan.n_split,
            xkv, xrows, xrows.stride(0),
            extra_topk_length if (has_extra and extra_topk_length is not None) else rows, xtopk,
            extra_k_cache.shape[1] if has_extra else 1, extra_k_cache.stride(0) if has_extra else 1,
            o_part, lse_part, plan.n_split_total, plan.tiles_per_split, float(softmax_scale) * _LOG2E,
            counters, attn_sink if attn_sink is not None else lse_part,
            out, out.stride(0), out.stride(2), lse,
            HAS_LEN=topk_length is not None,
            HAS_EXTRA=has_extra,
            HAS_XLEN=has_extra and extra_topk_length is not None,
            BLOCK_H=plan.block_h,
            BLOCK_T=config.block_t,
            EMULATE_DOT=device.type != "cuda",
            Q_IN_LOOP=plan.q_in_loop,
            LOOP_TO_LEN=config.loop_to_len,
            MERGE_LAST=in_kernel,
            LAUNCH_DEPENDENTS=merge == "pdl",
            HAS_SINK=in_kernel and attn_sink is not None,
            num_warps=plan.num_warps,
            num_stages=config.num_stages,
        )  # fmt: skip
    if "combine" in _stages and not in_kernel:
        pdl = {"launch_pdl": True} if merge == "pdl" else {}
        _sparse_mla_combine_kernel[(B * H, HEAD_DIM // plan.combine_block_d)](
            o_part, lse_part, attn_sink if attn_sink is not None else lse_part,
            out, out.stride(0), out.stride(2), lse, H, plan.n_split_total,
            HAS_SINK=attn_sink is not None,
            S_BLOCK=plan.s_block,
            ONE_STEP=plan.n_split_total <= plan.s_block,
            BLOCK_D=plan.combine_block_d,
            WAIT_FOR_PRIMARY=merge == "pdl",
            num_warps=config.combine_num_warps,
            **pdl,
        )  # fmt: skip
    return out, lse.permute(0, 2, 1)


def flash_mla_sparse_decode_triton(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    indices: torch.Tensor,
    topk_length: torch.Tensor | None,
    attn_sink: torch.Tensor | None,
    head_dim_v: int,
    softmax_scale: float,
    extra_k_cache: torch.Tensor | None = None,
    extra_indices: torch.Tensor | None = None,
    extra_topk_length: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """SGLang's signature, parameter for parameter: what the start-up hook installs."""
    return sparse_mla_decode(
        q, k_cache, indices, topk_length, attn_sink, head_dim_v, softmax_scale,
        extra_k_cache, extra_indices, extra_topk_length,
    )  # fmt: skip
