"""Stand-in sgl_kernel.speculative (CPU engine rehearsal only)."""
from sgl_kernel._standin import StandInKernel

reconstruct_indices_from_tree_mask = StandInKernel("sgl_kernel.speculative.reconstruct_indices_from_tree_mask")
