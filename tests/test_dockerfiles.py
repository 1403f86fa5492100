"""The Dockerfiles: lint clean, every installed version from a lock, arguments supplied by the plan,
and every layer built for real on the local engine, on the stand-in for the CUDA base (Debian
bookworm + CPython 3.12, docker/standin-root.sh)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from bundle.images import build
from bundle.lock import LOCK_HASH_LABEL, load_lock
from tests.conftest import missing

REPO = Path(__file__).resolve().parents[1]
DOCKERFILES = sorted((REPO / "docker").glob("*.Dockerfile"))
LAYER_FILES = [REPO / spec.dockerfile for spec in build.LAYERS]


def _instructions(path: Path) -> list[str]:
    """Instructions with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(ln for ln in path.read_text().splitlines()
                                         if not ln.lstrip().startswith("#")))
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


def _install_problems(path: Path) -> list[str]:
    problems = []
    for ins in _instructions(path):
        if not ins.upper().startswith("RUN "):
            continue
        for cmd in re.split(r"&&|;|\|\|", ins):
            if re.search(r"\bpip3? install\b|\buv pip install\b", cmd):
                hashed_lock = "--require-hashes" in cmd and re.search(r"-r \S+\.txt", cmd)
                local_no_deps = "--no-deps" in cmd and re.search(r"\s(/\S+|\"\$\w+\")\s*$", cmd.strip())
                if not (hashed_lock or local_no_deps):
                    problems.append(f"{path.name}: unpinned install: {cmd.strip()}")
            if re.search(r"\bapt-get install\b", cmd):
                pinned = all("=" in pkg for pkg in re.findall(r"\s([a-z0-9][a-z0-9.+-]+\S*)", cmd)
                              if pkg not in ("apt-get", "install"))
                if not pinned and "--snapshot" not in ins:
                    problems.append(f"{path.name}: apt-get install without versions or snapshot")
    return problems


def test_hadolint_passes_on_every_dockerfile():
    hadolint = shutil.which("hadolint") or str(REPO / ".venv" / "bin" / "hadolint")
    proc = subprocess.run([hadolint, "--config", str(REPO / ".hadolint.yaml"), *map(str, DOCKERFILES)],
                          check=False, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_no_dockerfile_installs_a_version_that_does_not_come_from_a_lock():
    problems = [p for f in DOCKERFILES for p in _install_problems(f)]
    assert problems == []


def test_the_install_check_catches_unpinned_installs(tmp_path):
    bad = tmp_path / "bad.Dockerfile"
    bad.write_text("FROM x\nRUN pip install torch\nRUN uv pip install -r req.txt\n"
                   "RUN apt-get update && apt-get install -y curl\nRUN apt-get install -y curl=8.5.0-2\n")
    problems = _install_problems(bad)
    assert len(problems) == 3, problems


def test_no_dockerfile_pulls_a_frontend_image():
    # A `# syntax=` line makes BuildKit pull the frontend from Docker Hub, unreachable here.
    for path in DOCKERFILES:
        assert not re.search(r"^#\s*syntax\s*=", path.read_text(), re.MULTILINE), path.name


_INSTALLS = re.compile(r"\bapt-get install\b|\bpip3? install\b|\buv pip install\b|overlay-install\.sh")


def test_every_step_that_installs_packages_keeps_its_cache_in_a_cache_mount():
    """apt, pip and uv caches live in BuildKit cache mounts: a rebuild downloads only what changed,
    and no cache lands in an image."""
    for path in DOCKERFILES:
        for ins in _instructions(path):
            if ins.upper().startswith("RUN ") and _INSTALLS.search(ins):
                assert "--mount=type=cache" in ins, f"{path.name}: {ins[:100]}"
                if re.search(r"\buv pip install\b|overlay-install", ins) and path.name != "rehearsal.Dockerfile":
                    # base.Dockerfile sets UV_NO_CACHE=1 for the image; the step turns it off inside the mount.
                    assert "UV_NO_CACHE=0" in ins and "target=/root/.cache/uv" in ins, f"{path.name}: {ins[:100]}"


def test_for_the_legacy_builder_each_cache_mount_becomes_a_folder_emptied_in_the_same_step():
    from bundle.images.legacy import without_mounts

    text = ("FROM x\n# RUN --mount=type=cache,target=/c stays a comment\n"
            "RUN --mount=type=cache,target=/var/cache/apt,sharing=locked \\\n"
            "    --mount=type=cache,target=/var/lib/apt/lists \\\n"
            "    apt-get update \\\n && apt-get install -y curl\n"
            "RUN echo no mount\n")
    assert without_mounts(text) == (
        "FROM x\n# RUN --mount=type=cache,target=/c stays a comment\n"
        "RUN apt-get update \\\n && apt-get install -y curl \\\n"
        " && rm -rf /var/cache/apt /var/lib/apt/lists && mkdir -p /var/cache/apt /var/lib/apt/lists\n"
        "RUN echo no mount\n")
    for path in LAYER_FILES:
        assert "--mount" not in without_mounts(path.read_text()), path.name


def test_for_the_legacy_builder_each_bind_mount_becomes_a_copy_before_the_step_removed_at_its_end():
    from bundle.images.legacy import without_mounts

    text = ("FROM x\n"
            "RUN --mount=type=cache,target=/root/.cache/uv \\\n"
            "    --mount=type=bind,source=docker/req.txt,target=/tmp/ctx/req.txt \\\n"
            "    --mount=target=/tmp/all \\\n"
            "    install /tmp/ctx/req.txt /opt/req.txt\n")
    assert without_mounts(text) == (
        "FROM x\n"
        "COPY docker/req.txt /tmp/ctx/req.txt\n"
        "COPY . /tmp/all\n"
        "RUN install /tmp/ctx/req.txt /opt/req.txt \\\n"
        " && rm -rf /tmp/ctx/req.txt /tmp/all && rm -rf /root/.cache/uv && mkdir -p /root/.cache/uv\n")


def test_a_mount_the_legacy_builder_cannot_emulate_is_refused_naming_the_file():
    from bundle.errors import BundleError
    from bundle.images.legacy import without_mounts

    with pytest.raises(BundleError) as caught:
        without_mounts("FROM x\nRUN --mount=type=secret,id=key cat /run/secrets/key\n", where="x.Dockerfile")
    assert caught.value.message.startswith("x.Dockerfile: `--mount=type=secret,id=key` cannot be built without")
    with pytest.raises(BundleError, match="from=build"):  # a bind from another stage: no COPY can stand in
        without_mounts("FROM x\nRUN --mount=type=bind,from=build,source=/a,target=/b ls /b\n")


def test_every_argument_a_layer_declares_comes_from_the_plan():
    plan = build.make_plan(load_lock())
    for lp in plan.layers:
        declared = set(re.findall(r"^ARG (\w+)", (REPO / lp.spec.dockerfile).read_text(), re.MULTILINE))
        assert declared == set(lp.build_args), (lp.name, declared ^ set(lp.build_args))


def test_layer_parents_chain_in_order():
    for path in LAYER_FILES[1:]:
        assert re.search(r"^FROM \$\{PARENT_IMAGE\}$", path.read_text(), re.MULTILINE), path.name
    assert re.search(r"^FROM \$\{BASE_IMAGE\}$", LAYER_FILES[0].read_text(), re.MULTILINE)


def test_no_dockerfile_pins_a_digest_of_its_own():
    for path in DOCKERFILES:
        assert "@sha256:" not in path.read_text(), f"{path.name}: digests belong in docker/lock.toml"


def test_bake_defaults_match_the_lock():
    lock = load_lock()
    bake = (REPO / "docker" / "docker-bake.hcl").read_text()
    defaults = dict(re.findall(r'variable "(\w+)" \{ default = "([^"]*)" \}', bake))
    expected = {**build._base_args(lock), **build._framework_args(lock),
                "OVERLAY_VERSION": lock.data["overlay"]["version"], "REPO": lock.image_repo}
    assert {k: defaults.get(k) for k in expected} == expected


@pytest.mark.docker
@pytest.mark.timeout(120)
def test_bake_file_parses_with_buildx():
    from bundle.stack import engine

    if not engine.buildx_available():
        missing("no docker buildx (docker/install-buildx.sh installs it)")
    proc = subprocess.run(["docker", "buildx", "bake", "-f", "docker/docker-bake.hcl", "--print", "validate"],
                          cwd=REPO, check=False, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    targets = json.loads(proc.stdout)["target"]
    assert set(targets) == set(build.LAYER_NAMES)
    assert targets["pd"]["contexts"] == {"parent": "target:framework"}


# ---- real builds on the local engine, on the session's stand-in chain (tests/conftest.py) ----


@pytest.fixture(scope="module")
def standin_project(tmp_path_factory, standin_chain):
    """A copy of the project's docker/ and kernels/ under its own image repo, removed afterwards. Its
    base, framework and pd layers are the session chain's images under the copy's tags (the copy's
    Dockerfiles, locks and files are the checkout's, byte for byte), so its builds start above them.
    The kernels layer too (the GPU image's real layer, compiled once per session, by the chain)."""
    root = tmp_path_factory.mktemp("project")
    shutil.copytree(REPO / "docker", root / "docker", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "kernels", root / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    repo = f"bundle-test/sglang-sm120-{uuid.uuid4().hex[:8]}"  # unique: other sessions share the engine
    lock_file = root / "docker" / "lock.toml"
    lock_file.write_text(re.sub(r'^repo = ".*"$', f'repo = "{repo}"', lock_file.read_text(), flags=re.MULTILINE))
    plan = build.make_plan(load_lock(lock_file), standin=True, root=root)
    for name in ("base", "framework", "pd", "kernels"):
        subprocess.run(["docker", "tag", standin_chain[name], plan.layer(name).tag], check=True, capture_output=True)
    yield root
    refs = subprocess.run(["docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}",
                           f"{repo}-standin"], check=False, capture_output=True, text=True).stdout.split()
    if refs:
        subprocess.run(["docker", "image", "rm", *refs], check=False, capture_output=True)


def _bundle_build(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**__import__("os").environ, "BUNDLE_HOME": str(root)}
    return subprocess.run([str(REPO / ".venv" / "bin" / "bundle"), "build", "--standin", *args],
                          check=False, capture_output=True, text=True, env=env, timeout=900)


@pytest.fixture(scope="module")
def built_copy(standin_project) -> subprocess.CompletedProcess:
    """The copy's overlay and runtime layers, built for real on the chain."""
    return _bundle_build(standin_project)


def _run(image: str, *cmd: str) -> str:
    proc = subprocess.run(["docker", "run", "--rm", "--entrypoint", cmd[0], image, *cmd[1:]],
                          check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_standin_layers_build_for_real_and_an_overlay_change_rebuilds_only_the_layers_above(
        standin_project, built_copy, monkeypatch):
    """Stand-in, not the real image: the CUDA base is replaced by Debian bookworm with CPython 3.12;
    every layer's instructions run for real (the session chain built base, framework with its
    207-package closure, and pd; the copy builds overlay and runtime on them, then again after a
    kernels/ change, which must leave every lower layer as it was)."""
    first = built_copy
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert re.search(r"kernels\s+reused", first.stdout) and re.search(r"overlay\s+built", first.stdout)
    monkeypatch.setenv("BUNDLE_HOME", str(standin_project))
    lock = load_lock(standin_project / "docker" / "lock.toml")
    plan = build.make_plan(lock, standin=True, root=standin_project)
    image = plan.layers[-1].extra_tags[0]
    assert image.endswith(f"-standin:lock-{lock.hash}")

    labels = json.loads(subprocess.run(["docker", "image", "inspect", image, "--format",
                                        "{{json .Config.Labels}}"], check=False, capture_output=True, text=True).stdout)
    assert labels[LOCK_HASH_LABEL] == lock.hash
    assert labels["org.opencontainers.image.version"] == "0.5.23"
    assert labels["org.opencontainers.image.revision"]
    assert json.loads(labels["io.sglang-bundle.pins"])["nixl-cu13"] == "1.5.1"

    assert _run(image, "id", "-u").strip() == "10001"
    versions = _run(image, "python", "-c", "import importlib.metadata as m, importlib.util, sys; print(sys.version_info[:2] == (3, 12), "
                    "m.version('torch'), m.version('sglang'), m.version('nixl-cu13'), m.version('smg'), "
                    "m.version('uv'), importlib.util.find_spec('sglang_router'))")
    # smg is the router; sglang-router (whose `smg` console script collides with it) is absent.
    assert versions.split() == ["True", "2.14.1", "0.5.23", "1.5.1", "1.13.0", "0.13.9", "None"]
    cache = _run(image, "sh", "-c", "echo $TRITON_CACHE_DIR; test -w $JIT_CACHE_ROOT && echo writable")
    assert cache.split() == [f"/var/cache/sglang/lock-{lock.hash}/triton", "writable"]
    # The shared entrypoint hands the compose secret to the server as --api-key.
    assert _run(image, "bundle-entrypoint", "echo", "serve").strip() == "serve"

    ids_before = {lp.name: subprocess.run(["docker", "image", "inspect", lp.tag, "--format", "{{.Id}}"],
                                          check=False, capture_output=True, text=True).stdout.strip()
                  for lp in plan.layers}
    (standin_project / "kernels" / "NOTE.txt").write_text("an overlay change\n")
    second = _bundle_build(standin_project)
    assert second.returncode == 0, second.stdout[-3000:]
    assert re.search(r"base\s+reused", second.stdout) and re.search(r"framework\s+reused", second.stdout)
    assert re.search(r"pd\s+reused", second.stdout) and re.search(r"kernels\s+reused", second.stdout)
    assert re.search(r"overlay\s+built", second.stdout) and re.search(r"runtime\s+built", second.stdout)
    new_plan = build.make_plan(lock, standin=True, root=standin_project)
    for name in ("base", "framework", "pd", "kernels"):
        assert new_plan.layer(name).tag == plan.layer(name).tag
        new_id = subprocess.run(["docker", "image", "inspect", new_plan.layer(name).tag, "--format",
                                 "{{.Id}}"], check=False, capture_output=True, text=True).stdout.strip()
        assert new_id == ids_before[name]
    assert new_plan.layer("overlay").tag != plan.layer("overlay").tag
    assert "NOTE.txt" in _run(image, "ls", "/opt/bundle/kernels")


@pytest.mark.docker
@pytest.mark.slow
# Left out of `make test` (CI's budget), run by `make test-heavy`: the classic builder copies the whole
# 11 GB image on fuse-overlayfs: 453 s alone in the 2026-12-02 warm run, 708 s beside the other heavy
# tests on 2026-12-03: 12 min on one worker of a cold CI run of about 44 min, past its 50-min goal.
@pytest.mark.heavy
@pytest.mark.timeout(1500)  # the classic builder copies the whole image on fuse-overlayfs: over 10 min when busy
def test_without_buildx_the_legacy_builder_builds_the_runtime_layer(standin_project, built_copy, monkeypatch):
    """The fallback for a CLI with no buildx: the same Dockerfile through `docker build` with
    DOCKER_BUILDKIT=0 (slow on fuse-overlayfs, so only the lightest layer is built here)."""
    from bundle.stack import engine

    assert built_copy.returncode == 0, built_copy.stdout[-3000:] + built_copy.stderr[-3000:]
    monkeypatch.setenv("BUNDLE_HOME", str(standin_project))
    lock = load_lock(standin_project / "docker" / "lock.toml")
    plan = build.make_plan(lock, standin=True, root=standin_project)
    monkeypatch.setattr(engine, "buildx_available", lambda: False)
    messages = []
    results = build.execute(plan, build.select_layers(plan, ["runtime"]), force=True,
                            report=messages.append)
    assert [r.action for r in results] == ["built"]
    assert "legacy builder" in messages[0]
    assert engine.image_facts(plan.layers[-1].extra_tags[0]).labels[LOCK_HASH_LABEL] == lock.hash
