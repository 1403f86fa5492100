"""The image's signature: cosign keyless (Sigstore), signed by the release workflow's GitHub OIDC
identity. The release signs the digest and attests the SBOM (`bundle sign`); `bundle pull`
verifies the signature where cosign is installed and, where it is not, says exactly what was not
checked and the command that would check it: never a silent pass."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from bundle.errors import CommandTimedOut, EnvironmentProblem, Failed
from bundle.run import run

# GitHub Actions' OIDC issuer: the certificate Fulcio issues to a workflow run names it.
OIDC_ISSUER = "https://token.actions.githubusercontent.com"
COSIGN_INSTALL = "https://docs.sigstore.dev/cosign/system_config/installation/"
# A keyless signature waits on the OIDC token and the transparency log: minutes at worst, never hours.
SIGN_TIMEOUT_S = 600
VERIFIED, NOT_CHECKED, FAILED = "verified", "NOT CHECKED", "FAILED"


def cosign() -> str | None:
    return shutil.which("cosign")


def verify_command(ref: str, signer: str) -> list[str]:
    """What `bundle pull` runs: the signature on `ref` (repo@digest) was made by `signer` (a
    regular expression of the workflow's certificate identity) through GitHub's OIDC issuer."""
    return ["cosign", "verify", "--certificate-identity-regexp", signer,
            "--certificate-oidc-issuer", OIDC_ISSUER, "--output", "json", ref]


def sign_commands(ref: str, sbom: Path | None) -> list[list[str]]:
    """What the release runs: sign the digest, then attach the SBOM as a signed attestation."""
    commands = [["cosign", "sign", "--yes", ref]]
    if sbom is not None:
        commands.append(["cosign", "attest", "--yes", "--type", "cyclonedx", "--predicate", str(sbom), ref])
    return commands


@dataclass(frozen=True)
class SignatureCheck:
    status: str  # VERIFIED, NOT_CHECKED or FAILED
    detail: str
    command: list[str]


def verify(ref: str, signer: str | None, *, timeout: float = 120.0) -> SignatureCheck:
    if not signer:
        return SignatureCheck(NOT_CHECKED, "the lock names no signer ([image] signer in docker/lock.toml), so "
                                           "the signature was NOT verified", [])
    command = verify_command(ref, signer)
    binary = cosign()
    if binary is None:
        return SignatureCheck(NOT_CHECKED, "cosign is not installed on this host, so the signature was NOT "
                                           f"verified; install cosign ({COSIGN_INSTALL}) and run: "
                                           f"{' '.join(_quoted(command))}", command)
    try:
        proc = run([binary, *command[1:]], timeout=timeout, check=False)
    except CommandTimedOut:
        return SignatureCheck(FAILED, f"cosign verify did not answer within {timeout:.0f} s", command)
    if proc.returncode != 0:
        tail = " / ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        return SignatureCheck(FAILED, f"cosign verify exited {proc.returncode}: {tail}", command)
    return SignatureCheck(VERIFIED, f"signed by {signer} (issuer {OIDC_ISSUER})", command)


def sign(ref: str, sbom: Path | None, report=print) -> list[list[str]]:
    """Run the signing commands (the release workflow, with an OIDC token); a BundleError naming
    them when cosign is missing or one fails."""
    commands = sign_commands(ref, sbom)
    binary = cosign()
    if binary is None:
        listing = "; ".join(" ".join(_quoted(c)) for c in commands)
        raise EnvironmentProblem(f"cosign is not installed, so {ref} cannot be signed; the commands are: {listing}",
                                 hint=f"install cosign ({COSIGN_INSTALL}); the release workflow uses sigstore/cosign-installer")
    for i, command in enumerate(commands, 1):
        report(f"[{i}/{len(commands)}] {' '.join(_quoted(command))}")
        proc = run([binary, *command[1:]], timeout=SIGN_TIMEOUT_S, check=False)
        if proc.returncode != 0:
            tail = " / ".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
            raise Failed(f"{' '.join(command[:2])} exited {proc.returncode}: {tail}",
                         hint="keyless signing needs an OIDC token: in GitHub Actions, `permissions: "
                              "id-token: write`")
    return commands


def _quoted(command: list[str]) -> list[str]:
    import shlex

    return [shlex.quote(part) for part in command]
