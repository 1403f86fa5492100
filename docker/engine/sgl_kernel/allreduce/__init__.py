"""Stand-in sgl_kernel.allreduce (CPU engine rehearsal only)."""
from sgl_kernel._standin import StandInKernel

