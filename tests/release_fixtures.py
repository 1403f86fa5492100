"""What the release tests share: a real distribution registry on 127.0.0.1 (Debian's
docker-registry), a tiny lock (one pinned distribution, hashed), a real wheel of it built here with
the standard library, and a CycloneDX document of a venv. The tiny image chain built from these
exercises the same push/pull/verification code as the 11 GB runtime image, in seconds."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import socket
import subprocess
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.conftest import missing

REPO_ROOT = Path(__file__).resolve().parents[1]
BASE_IMAGE = "sglang-bundle/debian-root:bookworm"


def sh(*args: str, input: str | None = None, timeout: float = 300) -> str:
    proc = subprocess.run(args, input=input, capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, f"{' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout




def ensure_base_image() -> str:
    if subprocess.run(["docker", "image", "inspect", BASE_IMAGE], capture_output=True, check=False).returncode != 0:
        sh("bash", str(REPO_ROOT / "docker" / "debian-root.sh"), BASE_IMAGE)
    return BASE_IMAGE


def serve_registry(root: Path):
    """Start a registry storing under `root`; yields its 127.0.0.1:PORT, stops it afterwards."""
    binary = shutil.which("docker-registry") or shutil.which("registry")
    if binary is None:
        missing("no registry binary: apt-get install docker-registry (docker/host-packages.sh)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = root / "config.yml"
    config.write_text(f"version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {root}/data\n"
                      f"  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n")
    address = f"127.0.0.1:{port}"
    with open(root / "registry.log", "w") as log:
        proc = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://{address}/v2/", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                pytest.fail(f"registry did not start: {(root / 'registry.log').read_text()}")
            time.sleep(0.2)
        yield address
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def copy_lock(into: Path, *, repo: str | None = None, digest: str = "",
              requirements: dict[str, str] | None = None) -> Path:
    """docker/lock.toml copied into `into`/docker with [image] repo/published_digest replaced, and
    its requirement locks: the project's, or `requirements` (layer -> text) for a tiny lock."""
    lock_dir = into / "docker"
    req_dir = lock_dir / "requirements"
    req_dir.mkdir(parents=True, exist_ok=True)
    if requirements is None:
        for path in (REPO_ROOT / "docker" / "requirements").glob("*.txt"):
            shutil.copy(path, req_dir / path.name)
    else:
        for layer, text in requirements.items():
            (req_dir / f"{layer}.txt").write_text(text)
    text = (REPO_ROOT / "docker" / "lock.toml").read_text()
    text = re.sub(r'^published_digest = ".*"$', f'published_digest = "{digest}"', text, count=1, flags=re.MULTILINE)
    if repo:
        text = re.sub(r'^repo = ".*"$', f'repo = "{repo}"', text, count=1, flags=re.MULTILINE)
    path = lock_dir / "lock.toml"
    path.write_text(text)
    return path


def make_wheel(folder: Path, name: str, version: str) -> Path:
    """A real, minimal pure-Python wheel (one module), written with zipfile: pip installs it as any."""
    module = name.replace("-", "_")
    dist_info = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": f'"""{name}: a package of the release tests."""\nVERSION = "{version}"\n',
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{dist_info}/top_level.txt": f"{module}\n",
    }
    record = []
    for path, body in files.items():
        data = body.encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist_info}/RECORD,,")
    wheel = folder / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, body in files.items():
            archive.writestr(path, body)
        archive.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
    return wheel


def pinned(name: str, version: str, wheel: Path) -> str:
    """A requirement lock line as `make lock` writes them: name==version with the file's sha256."""
    return f"{name}=={version} \\\n    --hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}\n"


def cyclonedx(components: list[tuple[str, str]]) -> bytes:
    """A CycloneDX 1.6 document of a venv's distributions, in cyclonedx-py's reproducible shape."""
    doc = {"bomFormat": "CycloneDX", "specVersion": "1.6", "version": 1,
           "metadata": {"component": {"type": "application", "name": "venv", "bom-ref": "root"}},
           "components": [{"type": "library", "bom-ref": f"{n}=={v}", "name": n, "version": v,
                           "purl": f"pkg:pypi/{n}@{v}"} for n, v in components]}
    return json.dumps(doc, indent=2, sort_keys=True).encode()
