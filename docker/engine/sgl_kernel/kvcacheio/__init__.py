"""Stand-in sgl_kernel.kvcacheio (CPU engine rehearsal only)."""
from sgl_kernel._standin import StandInKernel

get_device_accessible_ptr = StandInKernel("sgl_kernel.kvcacheio.get_device_accessible_ptr")
transfer_embedding_ranges_direct = StandInKernel("sgl_kernel.kvcacheio.transfer_embedding_ranges_direct")
transfer_kv_all_layer = StandInKernel("sgl_kernel.kvcacheio.transfer_kv_all_layer")
transfer_kv_all_layer_direct_lf_pf = StandInKernel("sgl_kernel.kvcacheio.transfer_kv_all_layer_direct_lf_pf")
transfer_kv_all_layer_lf_pf = StandInKernel("sgl_kernel.kvcacheio.transfer_kv_all_layer_lf_pf")
transfer_kv_all_layer_lf_ph = StandInKernel("sgl_kernel.kvcacheio.transfer_kv_all_layer_lf_ph")
transfer_kv_all_layer_mla = StandInKernel("sgl_kernel.kvcacheio.transfer_kv_all_layer_mla")
transfer_kv_all_layer_mla_lf_pf = StandInKernel("sgl_kernel.kvcacheio.transfer_kv_all_layer_mla_lf_pf")
transfer_kv_direct = StandInKernel("sgl_kernel.kvcacheio.transfer_kv_direct")
transfer_kv_per_layer = StandInKernel("sgl_kernel.kvcacheio.transfer_kv_per_layer")
transfer_kv_per_layer_direct_pf_lf = StandInKernel("sgl_kernel.kvcacheio.transfer_kv_per_layer_direct_pf_lf")
transfer_kv_per_layer_mla = StandInKernel("sgl_kernel.kvcacheio.transfer_kv_per_layer_mla")
transfer_kv_per_layer_mla_pf_lf = StandInKernel("sgl_kernel.kvcacheio.transfer_kv_per_layer_mla_pf_lf")
transfer_kv_per_layer_pf_lf = StandInKernel("sgl_kernel.kvcacheio.transfer_kv_per_layer_pf_lf")
transfer_kv_per_layer_ph_lf = StandInKernel("sgl_kernel.kvcacheio.transfer_kv_per_layer_ph_lf")
