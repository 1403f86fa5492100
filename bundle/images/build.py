"""Plan and build the layered images from the lock: base -> framework -> pd -> kernels -> overlay -> runtime.

Each layer is tagged `<repo>:<layer>-<key>`, where the key is a sha256 over everything the layer
is made of: its Dockerfile, its build arguments (taken from the lock, the parent's tag included)
and the files it copies. A layer whose tag exists is reused, so a change to an upper layer (the
kernel overlay, the entrypoint) never rebuilds a lower one (CUDA, torch, SGLang); a change to a
lower one changes every key above it. The runtime layer is also tagged `Lock.image_ref`
(`<repo>:lock-<hash>`) and labelled with the lock hash.

A failed build leaves no tag for the layer that failed (Docker tags only on success); the layers
below it are complete and kept, to be reused by the next attempt.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bundle import __version__, paths
from bundle.errors import CommandFailed, DockerFailed, EnvironmentProblem, InputError, did_you_mean
from bundle.images import kernels_jit, legacy
from bundle.lock import LOCK_HASH_LABEL, Lock
from bundle.run import run
from bundle.images.reference import local_name
from bundle.images.root_script import run_root_script

LAYER_LABEL = "io.sglang-bundle.layer"
LAYER_KEY_LABEL = "io.sglang-bundle.layer-key"
PINS_LABEL = "io.sglang-bundle.pins"
KEY_LENGTH = 12
# The stand-in for the CUDA base where no registry can be reached (CI, the development machine):
# Debian bookworm with CPython 3.12 under /usr/local, made by docker/standin-root.sh. Every layer is
# built on it, framework included, with the same Dockerfiles and hashed locks as on a GPU host
# (docs/images.md, "The stand-in base", says what differs and why it does not matter to the tests).
STANDIN_BASE = "sglang-bundle/standin-base:bookworm-py3.12"
STANDIN_SCRIPT = "docker/standin-root.sh"


@dataclass(frozen=True)
class LayerSpec:
    name: str
    holds: str  # one line for the plan and the docs
    inputs: tuple[str, ...]  # project-relative files and folders the Dockerfile copies
    args: Callable[[Lock], dict[str, str]]

    @property
    def dockerfile(self) -> str:
        return f"docker/{self.name}.Dockerfile"


def _base_args(lock: Lock) -> dict[str, str]:
    """The project's own base (no registry base, here and on a GPU host): the Debian root with
    CPython 3.12 (BUNDLE_STANDIN_BASE picks another local one), the [cuda] toolchain above it."""
    base = lock.data["base"]
    return {"BASE_IMAGE": os.environ.get("BUNDLE_STANDIN_BASE", STANDIN_BASE), "APT_SNAPSHOT": "",
            "PYTHON_VERSION": base["python"], "CUDA_VERSION": lock.data["cuda"]["line"],
            "TORCH_CUDA_ARCH_LIST": base["cuda_arch_list"]}


def _framework_args(lock: Lock) -> dict[str, str]:
    sglang = lock.data["sglang"]
    return {"SGLANG_SOURCE": sglang["source"], "SGLANG_GIT_REPO": sglang["git_repo"],
            "SGLANG_GIT_COMMIT": sglang.get("git_commit", "") if sglang["source"] == "git" else ""}


LAYERS: tuple[LayerSpec, ...] = (
    LayerSpec("base", "Debian bookworm + CPython 3.12, g++/ninja, the CUDA 13.0 toolkit wheels as "
                      "/usr/local/cuda (driver link stub), NVIDIA_* env, uv",
              ("docker/requirements/base.txt", "docker/cuda-home.sh", "docker/cuda-stub.py"), _base_args),
    LayerSpec("framework", "torch (cu130), SGLang, sglang-kernel, FlashInfer, tilelang + closure",
              ("docker/requirements/framework.txt",), _framework_args),
    LayerSpec("pd", "nixl (nixl-cu13 with its UCX) and smg (the router)",
              ("docker/requirements/pd.txt",), lambda lock: {}),
    LayerSpec("kernels", "FlashInfer's JIT modules for the predicted choices (the fused MoE cut to MXFP8 x "
                         "MXFP4), compiled for 12.0a into flashinfer/data/aot/ (bundle/images/kernels_jit.py), "
                         "and SGLang's TileLang indexer kernels into /opt/bundle/tilelang-cache",
              ("docker/kernels-build.py", "docker/kernels_narrow.py", "docker/tilelang-prebuild.py"),
              lambda lock: {"KERNELS": kernels_jit.build_arg(kernels_jit.default_modules())}),
    LayerSpec("overlay", "the kernel overlay (kernels/)",
              ("docker/overlay-install.sh", "@overlay"),
              lambda lock: {"OVERLAY_VERSION": lock.data["overlay"]["version"]}),
    LayerSpec("runtime", "non-root user, entrypoint, healthcheck, sm_120 env, JIT cache paths, SBOM",
              ("docker/entrypoint.sh", "docker/lock.toml"),
              # SBOM_SHA256 is filled in at build time from the overlay image (see _with_sbom); the
              # SBOM follows from the layers below, so it is not part of the layer key.
              lambda lock: {"LOCK_HASH": lock.hash, "SBOM_SHA256": ""}),
)
LAYER_NAMES = tuple(spec.name for spec in LAYERS)


@dataclass
class LayerPlan:
    spec: LayerSpec
    tag: str
    key: str
    build_args: dict[str, str]
    labels: dict[str, str]
    inputs: list[str]  # resolved project-relative paths, "@overlay" replaced
    extra_tags: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def tags(self) -> list[str]:
        return [self.tag, *self.extra_tags]


@dataclass
class Plan:
    lock: Lock
    layers: list[LayerPlan]
    standin: bool

    def layer(self, name: str) -> LayerPlan:
        return next(lp for lp in self.layers if lp.name == name)


def _git(*args: str) -> str:
    try:
        out = run(["git", *args], cwd=paths.project_root(), timeout=10, check=False)
    except CommandFailed:  # no git, or it hung: the label says so instead
        return ""
    return out.stdout.strip() if out.ok else ""


def oci_labels(lock: Lock) -> dict[str, str]:
    source = _git("remote", "get-url", "origin") or "sglang-sm120-bundle (local checkout)"
    revision = _git("rev-parse", "HEAD") or "unknown"
    sglang = lock.data["sglang"]
    version = lock.pins["sglang"]
    if sglang["source"] == "git":
        version = f"{version}+git.{sglang['git_commit'][:12]}"
    return {
        "org.opencontainers.image.source": source,
        "org.opencontainers.image.revision": revision,
        "org.opencontainers.image.version": version,
        "org.opencontainers.image.title": "SGLang for sm_120 (RTX PRO 6000 Blackwell)",
        "io.sglang-bundle.driver-version": __version__,
    }


# Build outputs left in an input folder (kernels/ after a local `pip install -e`) are not inputs:
# they would change layer keys and ship stale binaries.
_NOT_INPUTS = {"__pycache__", "build", "dist", ".pytest_cache", ".mypy_cache"}


def _files_of(root: Path, rel: str) -> list[Path]:
    path = root / rel
    if path.is_file():
        return [path]
    if path.is_dir():
        return sorted(p for p in path.rglob("*")
                      if p.is_file() and p.suffix != ".pyc"
                      and not any(part in _NOT_INPUTS or part.endswith(".egg-info")
                                  for part in p.relative_to(path).parts))
    return []


def layer_key(root: Path, spec: LayerSpec, build_args: dict[str, str], inputs: list[str]) -> str:
    digest = hashlib.sha256()
    digest.update(spec.name.encode() + b"\0")
    digest.update((root / spec.dockerfile).read_bytes() + b"\0")
    digest.update(json.dumps(build_args, sort_keys=True).encode() + b"\0")
    for rel in inputs:
        for path in _files_of(root, rel):
            digest.update(str(path.relative_to(root)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:KEY_LENGTH]


def make_plan(lock: Lock, *, standin: bool = False, root: Path | None = None,
              kernels: list[str] | None = None) -> Plan:
    """Every layer with its tag, key, build arguments and labels; asks Docker nothing. `kernels`
    narrows the kernels layer to those modules (default: kernels_jit.default_modules(), a `standin`
    build too: CI builds and audits the GPU image's real kernels layer)."""
    root = root or paths.project_root()
    # A stand-in build is never pushed: it is named without the registry host.
    repo = f"{local_name(lock.image_repo)}-standin" if standin else lock.image_repo
    labels = oci_labels(lock)
    layers: list[LayerPlan] = []
    parent_tag = None
    for spec in LAYERS:
        args = dict(spec.args(lock))
        if "KERNELS" in args and kernels:
            args["KERNELS"] = kernels_jit.build_arg(kernels)
        if parent_tag is not None:
            args["PARENT_IMAGE"] = parent_tag
        inputs = [lock.data["overlay"]["path"] if rel == "@overlay" else rel for rel in spec.inputs]
        key = layer_key(root, spec, args, inputs)
        layer_labels = {**labels, LAYER_LABEL: spec.name, LAYER_KEY_LABEL: key}
        extra = []
        if spec.name == "runtime":
            layer_labels[LOCK_HASH_LABEL] = lock.hash
            layer_labels[PINS_LABEL] = json.dumps(lock.pins, sort_keys=True, separators=(",", ":"))
            extra = [f"{repo}:{lock.image_tag}"]
        tag = f"{repo}:{spec.name}-{key}"
        layers.append(LayerPlan(spec=spec, tag=tag, key=key, build_args=args, labels=layer_labels,
                                inputs=inputs, extra_tags=extra))
        parent_tag = tag
    return Plan(lock=lock, layers=layers, standin=standin)


def select_layers(plan: Plan, names: list[str] | None) -> list[LayerPlan]:
    """The layers to build, in build order; a BundleError for an unknown or left-out name."""
    if not names:
        return list(plan.layers)
    present = [lp.name for lp in plan.layers]
    problems = []
    for name in names:
        if name not in LAYER_NAMES:
            near = did_you_mean(name, LAYER_NAMES)
            problems.append(f"unknown layer {name!r}" + (f" ({near})" if near else ""))
    if problems:
        raise InputError("; ".join(problems) + f"; layers are: {', '.join(present)}",
                         hint="bundle build --layer NAME [NAME ...], or no "
                              "--layer to build every layer")
    return [lp for lp in plan.layers if lp.name in names]


def stage_context(root: Path, layer: LayerPlan, into: Path) -> Path:
    """A build context holding only the layer's Dockerfile and inputs (paths kept): small to send
    to the legacy builder, and exactly what the layer key covers."""
    if into.exists():
        shutil.rmtree(into)
    into.mkdir(parents=True)
    for rel in [layer.spec.dockerfile, *layer.inputs]:
        for path in _files_of(root, rel):
            target = into / path.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    return into


def check_inputs(root: Path, plan: Plan) -> None:
    """Every Dockerfile and required input present, before anything is built."""
    problems = []
    for lp in plan.layers:
        if not (root / lp.spec.dockerfile).is_file():
            problems.append(f"{lp.spec.dockerfile}: missing")
        for rel in lp.inputs:
            if rel == plan.lock.data["overlay"]["path"]:
                continue  # an absent overlay folder is an empty overlay
            if not (root / rel).exists():
                problems.append(f"{rel}: missing (layer {lp.name})")
    if problems:
        raise InputError("cannot build: " + "; ".join(problems),
                         hint="restore the files from git; for docker/requirements/*.txt run `make lock`")


DEFAULT_STANDIN_PYTHON = "/root/.pyenv/versions/3.12.1"  # standin-root.sh's default (STANDIN_PYTHON)


def standin_python_prefix() -> Path:
    return Path(os.environ.get("STANDIN_PYTHON") or DEFAULT_STANDIN_PYTHON)


def choose_standin_source(python_image: str, *, pulled: Callable[[], bool], local_python: Path) -> str:
    """How to make the stand-in base: "python-image" (the lock's pinned python:3.12-slim-bookworm,
    on the engine already or pulled now: `pulled()` tries), else "standin-root" (standin-root.sh
    with the CPython 3.12 at `local_python`). Neither: one BundleError naming every way out."""
    if pulled():
        return "python-image"
    if (local_python / "bin" / "python3.12").is_file():
        return "standin-root"
    raise EnvironmentProblem(
        f"cannot make the stand-in base: {python_image} (docker/lock.toml [standin]) is not on this engine "
        f"and no registry gave it, and there is no CPython 3.12 at {local_python} for {STANDIN_SCRIPT}",
        hint=f"where a registry is reachable: `docker pull {python_image}`; elsewhere build CPython 3.12 on "
             f"Debian bookworm with --enable-shared (e.g. `pyenv install 3.12.1`) and set STANDIN_PYTHON to its "
             f"prefix; or set BUNDLE_STANDIN_BASE to a local image with CPython 3.12 under /usr/local")


def ensure_standin_base(ref: str, lock: Lock, report: Callable[[str], None] = print) -> None:
    """Make the stand-in base `ref` when the engine does not have it: the lock's pinned python image
    tagged as `ref` where a registry is reachable, else docker/standin-root.sh (debootstrap + a
    local CPython 3.12, minutes on a fresh host); a BundleError naming the fixes when neither can be had."""
    from bundle.stack import engine

    if engine.image_facts(ref) is not None:
        return
    python_image = lock.table("standin")["python_image"]

    def pulled() -> bool:
        if engine.image_facts(python_image) is not None:
            return True
        report(f"stand-in base: pulling {python_image} ...")
        try:
            engine.pull_image(python_image)
        except DockerFailed as exc:
            report(f"stand-in base: no registry gave it ({exc.message.splitlines()[-1][:120]})")
            return False
        return True

    source = choose_standin_source(python_image, pulled=pulled, local_python=standin_python_prefix())
    if source == "python-image":
        engine.tag_image(python_image, ref)
        report(f"stand-in base {ref}: {python_image}")
        return
    script = paths.project_root() / STANDIN_SCRIPT
    report(f"making the stand-in base {ref} with {STANDIN_SCRIPT} (debootstrap + CPython 3.12 from "
           f"{standin_python_prefix()}) ...")
    # Minutes on a fresh host (debootstrap downloads and unpacks a Debian root): its lines are the progress.
    returncode, tail = run_root_script(script, ref, label="stand-in base", report=report)
    if returncode != 0:
        detail = " / ".join(tail)
        raise EnvironmentProblem(f"{STANDIN_SCRIPT}: the stand-in base {ref} could not be made: {detail}",
                                 hint=f"run `sudo {STANDIN_SCRIPT}` once (needs root, `apt-get install debootstrap "
                                      "patchelf` and a CPython 3.12 built on bookworm: STANDIN_PYTHON=PREFIX)")


def _with_sbom(plan: Plan, runtime: LayerPlan, context: Path, report: Callable[[str], None]
               ) -> tuple[dict[str, str], dict[str, str]]:
    """Write the CycloneDX SBOM of the overlay image's venv (which the runtime layer does not change)
    into the runtime layer's context as docker/sbom.cdx.json; its sha256 becomes a build argument
    and the io.sglang-bundle.sbom-sha256 label (`bundle audit` checks the file against it)."""
    from bundle.images.audit import sbom_of
    from bundle.images.audit.checks_sbom import SBOM_LABEL

    overlay = plan.layer("overlay")
    report(f"      writing the SBOM of {overlay.tag} (cyclonedx-bom) ...")
    data = sbom_of(overlay.tag)
    (context / "docker" / "sbom.cdx.json").write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    return ({**runtime.build_args, "SBOM_SHA256": digest}, {**runtime.labels, SBOM_LABEL: digest})


@dataclass
class LayerResult:
    name: str
    tag: str
    action: str  # "reused" or "built"
    seconds: float
    image_id: str


def execute(plan: Plan, layers: list[LayerPlan], *, use_cache: bool = True, force: bool = False,
            report: Callable[[str], None] = print, on_line: Callable[[str], None] | None = None,
            progress: Callable[[str], None] | None = print,
            with_sbom: bool = True) -> list[LayerResult]:
    """Build `layers` in order; reuse a layer whose tag exists unless `force` (named with --layer)
    or no cache was asked. Checks the engine, buildx and every input before the first build."""
    import time

    from bundle.stack import engine

    root = paths.project_root()
    check_inputs(root, plan)
    engine.require_engine()
    use_buildx = engine.buildx_available()
    if not use_buildx:
        report("buildx is not installed: building with the legacy builder (no BuildKit; slower, "
               "no `docker buildx bake`). Install it with docker/install-buildx.sh.")
    if layers[0].name == "base":
        ensure_standin_base(plan.layer("base").build_args["BASE_IMAGE"], plan.lock, report)
    first = plan.layers.index(layers[0])
    if first > 0:
        parent = plan.layers[first - 1]
        if engine.image_facts(parent.tag) is None:
            raise InputError(f"layer {layers[0].name} builds on {parent.name} ({parent.tag}), which "
                             f"is not built",
                             hint=f"build it first: bundle build --layer {parent.name} {layers[0].name}, "
                                  f"or `bundle build` for every layer")
    results = []
    total = len(layers)
    for i, lp in enumerate(layers, 1):
        started = time.monotonic()
        facts = engine.image_facts(lp.tag)
        if facts is not None and use_cache and not force:
            for extra in lp.extra_tags:
                engine.tag_image(lp.tag, extra)
            report(f"[{i}/{total}] {lp.name:<9} reused  {lp.tag}")
            results.append(LayerResult(lp.name, lp.tag, "reused", 0.0, facts.id))
            continue
        report(f"[{i}/{total}] {lp.name:<9} building {lp.tag}")
        context = stage_context(root, lp, root / ".cache" / "build-context" / lp.name)
        if not use_buildx:  # no RUN --mount there: the cache mounts become emptied folders
            legacy.rewrite(context / lp.spec.dockerfile)
        build_args, labels = lp.build_args, lp.labels
        if lp.name == "runtime" and with_sbom:
            build_args, labels = _with_sbom(plan, lp, context, report)
        image_id = engine.build_image(context=context, dockerfile=context / lp.spec.dockerfile,
                                      tags=lp.tags, build_args=build_args, labels=labels,
                                      use_cache=use_cache, use_buildx=use_buildx, on_line=on_line,
                                      progress=progress)
        seconds = time.monotonic() - started
        report(f"[{i}/{total}] {lp.name:<9} built   {lp.tag} in {seconds:.0f} s")
        results.append(LayerResult(lp.name, lp.tag, "built", seconds, image_id))
    return results
