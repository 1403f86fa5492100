"""Stand-in sgl_kernel.quantization (CPU engine rehearsal only)."""
from sgl_kernel._standin import StandInKernel

ggml_dequantize = StandInKernel("sgl_kernel.quantization.ggml_dequantize")
ggml_moe_a8 = StandInKernel("sgl_kernel.quantization.ggml_moe_a8")
ggml_moe_a8_vec = StandInKernel("sgl_kernel.quantization.ggml_moe_a8_vec")
ggml_mul_mat_a8 = StandInKernel("sgl_kernel.quantization.ggml_mul_mat_a8")
ggml_mul_mat_vec_a8 = StandInKernel("sgl_kernel.quantization.ggml_mul_mat_vec_a8")
