"""Stand-in for sglang-kernel in the CPU engine rehearsal image ONLY (bundle/rehearsal/engine/sgl_kernel_standin.py
generated this file). Every name raises if called: SGLang takes its plain-PyTorch paths on CPU."""


class StandInKernel:
    """A kernel SGLang imports but must never call on the CPU engine."""

    def __init__(self, name):
        self._name = name

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self._name}: sgl_kernel stand-in (CPU engine rehearsal) has no kernels; "
                           "SGLang called a GPU kernel on the CPU path")

    def __getattr__(self, attr):
        # Module-level attribute reads (e.g. scalar_types.uint4b8) happen at import time; a stand-in
        # of the attribute keeps the import working and still raises if called.
        if attr.startswith("__"):
            raise AttributeError(attr)
        return StandInKernel(f"{self._name}.{attr}")

    def __repr__(self):
        return f"<sgl_kernel stand-in {self._name}>"
