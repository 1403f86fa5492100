"""Can this host verify the published image's signature? `bundle pull` needs cosign for that."""

from __future__ import annotations

from bundle.doctor.context import HostContext
from bundle.doctor.core import CheckResult, ok, warn
from bundle.images import signature
from bundle.run import run


def cosign_present(ctx: HostContext) -> CheckResult:
    binary = signature.cosign()
    if binary is None:
        return warn("cosign is not installed: `bundle pull` cannot verify the image's signature and says "
                    "NOT CHECKED (digest, label, SBOM and contents are still verified)",
                    f"install cosign ({signature.COSIGN_INSTALL}); `bundle pull --require-signature` "
                    "then refuses an unsigned image", cosign=None)
    proc = run([binary, "version"], timeout=30, check=False)
    version = next((line.split(":", 1)[1].strip() for line in (proc.stdout + proc.stderr).splitlines()
                    if line.startswith("GitVersion:")), "version unknown")
    if proc.returncode != 0:
        return warn(f"{binary} does not run (`cosign version` exited {proc.returncode})",
                    f"reinstall cosign ({signature.COSIGN_INSTALL})", cosign=binary)
    return ok(f"cosign {version} ({binary}): `bundle pull` verifies the image's signature", cosign=binary,
              version=version)
