"""Stand-in sgl_kernel.scalar_type (CPU engine rehearsal only)."""
from sgl_kernel._standin import StandInKernel

ScalarType = StandInKernel("sgl_kernel.scalar_type.ScalarType")
scalar_types = StandInKernel("sgl_kernel.scalar_type.scalar_types")
