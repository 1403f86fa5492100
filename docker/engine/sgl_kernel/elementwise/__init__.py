"""Stand-in sgl_kernel.elementwise (CPU engine rehearsal only)."""
from sgl_kernel._standin import StandInKernel

copy_to_gpu_no_ce = StandInKernel("sgl_kernel.elementwise.copy_to_gpu_no_ce")
