"""Every audit check, in the order the table shows them."""

from __future__ import annotations

from bundle.images.audit import (checks_kernels, checks_packages, checks_runtime, checks_sbom, checks_sglang,
                                 checks_sm120)
from bundle.checks import selected
from bundle.images.audit.core import Check, CheckResult, run_check

CHECKS: tuple[Check, ...] = (
    Check("lock", "Installed set equals the lock", checks_packages.installed_equals_lock),
    Check("once", "Each distribution once, nothing shadowed", checks_packages.installed_once),
    Check("files", "Files as installed (RECORD)", checks_packages.files_as_installed),
    Check("pip-check", "pip check", checks_packages.pip_check),
    Check("path-hooks", "No stray .pth or egg-link", checks_packages.no_stray_path_hooks),
    Check("imports", "Imports without a GPU", checks_runtime.imports),
    Check("help", "Server and router --help", checks_runtime.helps),
    Check("server-args", "SGLang's ServerArgs on every command line", checks_sglang.server_args),
    Check("predicted", "Predicted choices on sm_120", checks_sglang.choices),
    Check("sm120", "Native code for sm_120", checks_sm120.coverage),
    Check("levers", "Chosen paths have sm_120 kernels", checks_sm120.levers),
    Check("toolchain", "One CUDA toolchain, the lock's", checks_kernels.toolchain),
    Check("kernels", "JIT modules prebuilt for sm_120a", checks_kernels.kernels),
    Check("sbom", "CycloneDX SBOM", checks_sbom.sbom),
)
NAMES = tuple(c.name for c in CHECKS)
# The probe sections each check reads (a check left out with --skip spares its section's time).
SECTIONS = {"lock": ("packages",), "once": ("packages",), "files": ("packages",), "pip-check": ("pip_check",),
            "path-hooks": ("packages",), "imports": ("imports",), "help": ("helps",),
            "server-args": ("serverargs",), "predicted": ("serverargs",), "sm120": ("libraries",),
            "levers": ("libraries", "serverargs"), "toolchain": ("kernels",),
            "kernels": ("kernels", "libraries", "serverargs"), "sbom": ("sbom",)}
# The checks that read every native library's device code. Without them the probe runs cuobjdump
# only on the libraries a choice can need (kernels.NEEDS, kernels.ALWAYS) and the kernels layer's
# modules: the whole scan is most of a minute on 2 cores, the subset seconds.
WHOLE_LIBRARY_SCAN = ("sm120",)


def run_checks(ctx, only: list[str] | None = None, skip: list[str] | None = None) -> list[CheckResult]:
    return [run_check(check, ctx) for check in selected(CHECKS, only, skip)]
