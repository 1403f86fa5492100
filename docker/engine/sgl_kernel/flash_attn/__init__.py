"""Stand-in sgl_kernel.flash_attn (CPU engine rehearsal only)."""
from sgl_kernel._standin import StandInKernel

build_bidirectional_block_ids = StandInKernel("sgl_kernel.flash_attn.build_bidirectional_block_ids")
flash_attn_varlen_func = StandInKernel("sgl_kernel.flash_attn.flash_attn_varlen_func")
flash_attn_with_kvcache = StandInKernel("sgl_kernel.flash_attn.flash_attn_with_kvcache")
get_scheduler_metadata = StandInKernel("sgl_kernel.flash_attn.get_scheduler_metadata")
