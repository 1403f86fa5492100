"""A release's own exact pins (`Requires-Dist: name==version`), read from its wheel's METADATA.

SGLang pins its stack exactly (0.5.22: flashinfer-python 0.7.1, sglang-kernel 0.4.9; 0.5.23: 0.7.2,
0.4.10), so upgrading SGLang means taking the whole set it requires. The wheel is fetched with pip
(`pip download --no-deps`) for the lock's Python and platform; its markers are evaluated for that
platform with `packaging`, extras left out (the image installs no extra).
"""

from __future__ import annotations

import sys
import zipfile
from email.parser import Parser
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from bundle.errors import EnvironmentProblem
from bundle.run import run

# The image's platform: CPython 3.12 on x86_64 Linux (docs/images.md).
WHEEL_PLATFORM = "manylinux_2_34_x86_64"


def environment(python_version: str) -> dict[str, str]:
    return {"python_version": python_version, "python_full_version": f"{python_version}.0",
            "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
            "os_name": "posix", "implementation_name": "cpython", "platform_python_implementation": "CPython",
            "extra": ""}


def requirements(metadata_text: str, python_version: str) -> dict[str, str]:
    """canonical name -> specifier ("==0.4.10", ">=1.2", "" for any) of every requirement that applies
    on the image's platform without extras."""
    meta = Parser().parsestr(metadata_text)
    env = environment(python_version)
    out = {}
    for line in meta.get_all("Requires-Dist") or []:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        out[canonicalize_name(req.name)] = str(req.specifier)
    return out


def exact_pins(metadata_text: str, python_version: str) -> dict[str, str]:
    """canonical name -> version for every unconditional (for this platform) `==` requirement."""
    return {name: spec[2:] for name, spec in requirements(metadata_text, python_version).items()
            if spec.startswith("==") and "," not in spec and "*" not in spec}


def wheel_metadata(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        return zf.read(name).decode()


def download_wheel(package: str, version: str, python_version: str | None, into: Path) -> Path:
    """The wheel of package==version for the image's platform, or (python_version None) for this
    interpreter, where its parser is read (pip's own download; cached in `into`)."""
    into = into / (f"cp{python_version.replace('.', '')}" if python_version else "host")
    into.mkdir(parents=True, exist_ok=True)
    dist = canonicalize_name(package).replace("-", "_")
    found = sorted(p for p in into.glob("*.whl") if canonicalize_name(p.name.split("-")[0]) == canonicalize_name(dist)
                   and p.name.split("-")[1] == version)
    if found:
        return found[0]
    cmd = [sys.executable, "-m", "pip", "download", f"{package}=={version}", "--no-deps", "--only-binary", ":all:",
           "-d", str(into), "-q"]
    if python_version:
        cmd += ["--python-version", python_version, "--platform", WHEEL_PLATFORM, "--platform",
                "manylinux_2_28_x86_64", "--platform", "manylinux2014_x86_64", "--platform", "any"]
    proc = run(cmd, timeout=1800, check=False)  # one wheel (torch is ~900 MB); half an hour means a hung index
    found = sorted(p for p in into.glob("*.whl") if p.name.split("-")[1] == version
                   and canonicalize_name(p.name.split("-")[0]) == canonicalize_name(dist))
    if proc.returncode != 0 or not found:
        raise EnvironmentProblem(f"{package}=={version}: no wheel for "
                                 f"{f'CPython {python_version} on {WHEEL_PLATFORM}' if python_version else 'this Python'} "
                                 f"could be downloaded: {(proc.stderr or proc.stdout).strip()[-400:]}",
                                 hint=f"check the version exists (`pip index versions {package}`) and PyPI is reachable")
    return found[0]


def release_pins(package: str, version: str, python_version: str, wheel_dir: Path) -> dict[str, str]:
    return exact_pins(wheel_metadata(download_wheel(package, version, python_version, wheel_dir)), python_version)


def release_requirements(package: str, version: str, python_version: str, wheel_dir: Path) -> dict[str, str]:
    return requirements(wheel_metadata(download_wheel(package, version, python_version, wheel_dir)), python_version)
