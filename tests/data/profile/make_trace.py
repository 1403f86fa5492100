"""A small CUDA trace from torch's profiler over kernels of the families a DeepSeek-V4 decode step runs
(bundle's profile parser is tested on it): bf16 GEMMs (cuBLAS), a grouped "MoE" loop of GEMMs, a Triton
kernel, attention (SDPA), RMS norm and elementwise, softmax/top-k/multinomial sampling,
each decode step under record_function("step[DECODE bs=4]") as SGLang's ModelRunner names its steps."""
import gzip
import json
import os
import shutil
import sys
import time

import torch
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def silu_mul_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, (x / (1 + tl.exp(-x)) * y).to(tl.bfloat16), mask=mask)


def rms_norm(x, w):
    v = x.float().pow(2).mean(-1, keepdim=True)
    return (x.float() * torch.rsqrt(v + 1e-6)).to(x.dtype) * w


def attention(q, k, v):
    return F.scaled_dot_product_attention(q, k, v)


def moe_experts(h, experts, topk_ids):
    out = torch.zeros_like(h)
    for e in topk_ids.unique().tolist():
        w1, w2 = experts[e]
        a = h @ w1
        g, u = a.chunk(2, dim=-1)
        act = torch.empty_like(g)
        n = g.numel()
        silu_mul_kernel[(triton.cdiv(n, 1024),)](g.contiguous(), u.contiguous(), act, n, BLOCK=1024)
        out += act @ w2
    return out


def sampler(logits):
    probs = torch.softmax(logits.float(), dim=-1)
    top = torch.topk(probs, 20, dim=-1)
    return torch.multinomial(top.values, 1)


def decode_step(x, p):
    h = rms_norm(x, p["norm"])
    q = (h @ p["wq"]).view(4, 16, 1, 128)
    o = attention(q, p["k"], p["v"]).reshape(4, 2048)
    x = x + o @ p["wo"]
    h = rms_norm(x, p["norm"])
    router = torch.softmax(h.float() @ p["gate"], dim=-1)
    topk_ids = torch.topk(router, 2, dim=-1).indices
    x = x + moe_experts(h, p["experts"], topk_ids)
    return sampler(rms_norm(x, p["norm"]) @ p["lm_head"])


def main(out_dir):
    torch.manual_seed(0)
    dev, bf = "cuda", torch.bfloat16
    d = 2048
    p = {"norm": torch.ones(d, device=dev, dtype=bf), "wq": torch.randn(d, d, device=dev, dtype=bf) * 0.02,
         "k": torch.randn(4, 16, 512, 128, device=dev, dtype=bf), "v": torch.randn(4, 16, 512, 128, device=dev, dtype=bf),
         "wo": torch.randn(d, d, device=dev, dtype=bf) * 0.02, "gate": torch.randn(d, 8, device=dev),
         "experts": [(torch.randn(d, 2048, device=dev, dtype=bf) * 0.02, torch.randn(1024, d, device=dev, dtype=bf) * 0.02)
                     for _ in range(8)],
         "lm_head": torch.randn(d, 32000, device=dev, dtype=bf) * 0.02}
    x = torch.randn(4, d, device=dev, dtype=bf)
    for _ in range(3):  # warm-up: cuBLAS heuristics, Triton's compile
        decode_step(x, p)
    torch.cuda.synchronize()
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts, with_stack=True, record_shapes=False) as prof:
        for _ in range(3):
            with torch.profiler.record_function("step[DECODE bs=4]"):
                decode_step(x, p)
        torch.cuda.synchronize()
    path = os.path.join(out_dir, "h100_decode_like.trace.json")
    prof.export_chrome_trace(path)
    with open(path, "rb") as src, gzip.open(path + ".gz", "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    os.remove(path)
    info = {"device": torch.cuda.get_device_name(0), "capability": list(torch.cuda.get_device_capability(0)),
            "torch": torch.__version__, "cuda": torch.version.cuda, "triton": triton.__version__,
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "bytes": os.path.getsize(path + ".gz")}
    json.dump(info, open(os.path.join(out_dir, "made_with.json"), "w"), indent=1)
    print(json.dumps(info))


if __name__ == "__main__":
    main(sys.argv[1])
