"""Custom kernels for SGLang on RTX PRO 6000 Blackwell (sm_120), installed by the image's overlay layer.

Importing this package is cheap on purpose (no torch, no triton): the start-up hook
(`sglang_sm120_kernels.hook`) is imported by a .pth file in every Python process of the image.
The kernels live in `sglang_sm120_kernels.sparse_mla_decode`.
"""

__version__ = "0.1.0"
