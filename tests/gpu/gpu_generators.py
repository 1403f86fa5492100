"""FlashInfer generators that take an argument, as the no-argument `module:function` targets
docker/kernels-build.py reads (tests/gpu/build_for_gpu.sh)."""

from flashinfer.jit.activation import gen_act_and_mul_module


def silu_and_mul():
    return gen_act_and_mul_module("silu")
