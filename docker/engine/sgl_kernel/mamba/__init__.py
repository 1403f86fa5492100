"""Stand-in sgl_kernel.mamba (CPU engine rehearsal only)."""
from sgl_kernel._standin import StandInKernel

causal_conv1d_fn_cpu = StandInKernel("sgl_kernel.mamba.causal_conv1d_fn_cpu")
causal_conv1d_update_cpu = StandInKernel("sgl_kernel.mamba.causal_conv1d_update_cpu")
chunk_gated_delta_rule_cpu = StandInKernel("sgl_kernel.mamba.chunk_gated_delta_rule_cpu")
