"""Stand-in sgl_kernel.utils (CPU engine rehearsal only)."""
from sgl_kernel._standin import StandInKernel

is_arch_support_pdl = StandInKernel("sgl_kernel.utils.is_arch_support_pdl")
