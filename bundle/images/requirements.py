"""The hashed Python locks of the image layers, generated from docker/lock.toml (`make lock`).

docker/requirements/<layer>.in is rendered from the lock's pins; <layer>.txt is its resolution for
CPython 3.12 on linux x86_64 (manylinux_2_36, glibc of Debian bookworm) with a sha256 for every file, installed in the image
with hashes required and `--no-deps` (the lock is the whole closure, so nothing unhashed gets in).

Layers and what they resolve:
- base:      uv (installs everything above it) and setuptools (the overlay's build backend)
- framework: torch, sglang, sglang-kernel, flashinfer, tilelang and their whole closure
- pd:        nixl (the `nixl` module SGLang imports; it brings nixl-cu13 and nixl-cu12) and smg (the
             router), resolved together with the framework's pins; pd.txt keeps
             only what the framework layer does not already hold, so the two never disagree.

`python -m bundle.images.requirements [--check]` regenerates (or, with --check, verifies) them.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import sys
import tempfile
from pathlib import Path

from bundle.errors import BundleError, ConfigError, EnvironmentProblem, Failed
from bundle.images.cuda_toolchain import wheel_pins
from bundle.lock import Lock, load_lock, requirements_dir
from bundle.run import run

LAYERS = ("base", "framework", "pd")
FRAMEWORK_PACKAGES = ("torch", "sglang", "sglang-kernel", "flashinfer-python", "flashinfer-cubin",
                      "flashinfer-jit-cache", "tilelang")
PD_PACKAGES = ("nixl", "nixl-cu13", "smg")
# The project's base is Debian bookworm (glibc 2.36), here and on a GPU host; sglang 0.5.23 ships
# manylinux_2_34 wheels only.
PLATFORM = "x86_64-manylinux_2_36"
INPUTS_MARK = "# inputs-sha256: "
_REQ_LINE = re.compile(r"^([A-Za-z0-9._-]+)==([^\s;\\]+)")


def _generated_header(layer: str) -> str:
    return (f"# Generated from docker/lock.toml by `make lock` ({layer} layer): do not edit.\n"
            f"# Change the pin in docker/lock.toml, then run `make lock`.\n")


def render_inputs(lock: Lock) -> dict[str, str]:
    """The text of each <layer>.in, exactly as `make lock` writes it."""
    py = lock.data["python"]
    # The CUDA toolchain ([cuda]) is installed by the base layer and repeated in the framework's inputs:
    # the framework closure must resolve to the same wheels (humming-kernels[cu13] asks for unpinned ones).
    cuda = [f"{name}=={version}" for name, version in wheel_pins(lock).items()]
    base = [f"uv=={lock.data['base']['uv']}", f"setuptools=={py['setuptools']}", *cuda]
    # setuptools again: the framework closure needs it too and must keep the base layer's version.
    framework = [f"{name}=={py[name]}" for name in (*FRAMEWORK_PACKAGES, "setuptools") if name in py] + cuda
    pd = [f"{name}=={py[name]}" for name in PD_PACKAGES]
    return {
        "base": _generated_header("base") + "\n".join(base) + "\n",
        "framework": _generated_header("framework") + "\n".join(framework) + "\n",
        # pd resolves against the framework's pins: its lock is pd's closure minus framework's.
        "pd": _generated_header("pd") + "-r framework.in\n" + "\n".join(pd) + "\n",
    }


def inputs_digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def parse_pins(text: str) -> dict[str, str]:
    """name -> version for every `name==version` requirement line (names normalised)."""
    pins = {}
    for line in text.splitlines():
        m = _REQ_LINE.match(line.strip())
        if m:
            pins[normalise(m.group(1))] = m.group(2)
    return pins


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _blocks(text: str) -> dict[str, str]:
    """name -> the whole requirement block (the pin line and its hash lines)."""
    blocks: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        m = _REQ_LINE.match(line)
        if m:
            current = normalise(m.group(1))
            blocks[current] = [line]
        elif current and line.startswith("    "):
            blocks[current].append(line)
        else:
            current = None
    return {k: "\n".join(v) for k, v in blocks.items()}


def _uv() -> str:
    found = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    if not Path(found).exists():
        raise EnvironmentProblem("`uv` is not installed",
                                 hint="run `make install` (requirements/dev.txt installs uv)")
    return found


def _compile(in_file: Path, out_file: Path, python_version: str, override: Path | None = None,
             constraint: Path | None = None) -> None:
    cmd = [_uv(), "pip", "compile", str(in_file.name), "--generate-hashes", "--quiet",
           "--python-version", python_version, "--python-platform", PLATFORM,
           "--only-binary", ":all:", "--no-header", "--no-annotate", "-o", str(out_file)]
    if override is not None:
        cmd += ["--override", str(override)]
    if constraint is not None:
        cmd += ["--constraint", str(constraint)]
    # uv resolves a layer in seconds from its cache, a minute or two cold; an hour means a hung index.
    proc = run(cmd, cwd=in_file.parent, timeout=3600, check=False)
    if proc.returncode != 0:
        raise Failed(f"{in_file}: the pins do not resolve together:\n{proc.stderr.strip()}",
                     hint="change the conflicting pin in docker/lock.toml, then `make lock`")


def compile_locks(lock: Lock, out_dir: Path | None = None, overrides: dict[str, str] | None = None,
                  keep_from: Path | None = None) -> dict[str, Path]:
    """Write <layer>.in and resolve <layer>.txt for every layer; return the .txt paths.

    `overrides` (name -> version, uv's --override) replaces a requirement of a dependency: `bundle
    upgrade` uses it for a release that pins a version with no wheel (SGLang 0.5.22: cuda-tile
    1.6.0rc5 is an sdist only); `make lock` never passes any.
    `keep_from` (a folder of hashed locks) keeps their versions wherever the new pins still allow them
    (uv reads an existing output file as preferences): an upgrade then changes what the new pins
    require, not every package that had a release since the last `make lock`."""
    out_dir = out_dir or requirements_dir(lock.path)
    out_dir.mkdir(parents=True, exist_ok=True)
    python_version = lock.data["base"]["python"]
    inputs = render_inputs(lock)
    written = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        for layer, text in inputs.items():
            (tmpdir / f"{layer}.in").write_text(text)
        override = None
        if overrides:
            override = tmpdir / "overrides.txt"
            override.write_text("".join(f"{name}=={version}\n" for name, version in sorted(overrides.items())))
        if keep_from is not None:
            kept = {layer: (keep_from / f"{layer}.txt").read_text() if (keep_from / f"{layer}.txt").is_file()
                    else "" for layer in LAYERS}
            kept["pd"] = kept["framework"] + kept["pd"]  # pd resolves the framework's closure too
            for layer, text in kept.items():
                (tmpdir / f"{layer}.full.txt").write_text(text)
        full = {}
        for layer in LAYERS:
            constraint = None
            if layer == "pd":
                # The pd layer installs on top of the framework layer and cannot change what it holds:
                # its resolution starts from the framework's versions, not from the index afresh (two
                # fresh resolutions diverged on 2026-12-02: httpx 0.29.0 for pd, 0.28.1 for framework).
                constraint = tmpdir / "framework.constraints.txt"
                constraint.write_text("".join(block.splitlines()[0].split()[0] + "\n"
                                              for block in _blocks(full["framework"]).values()))
            _compile(tmpdir / f"{layer}.in", tmpdir / f"{layer}.full.txt", python_version, override, constraint)
            full[layer] = (tmpdir / f"{layer}.full.txt").read_text()
        framework_blocks = _blocks(full["framework"])
        for layer in LAYERS:
            blocks = _blocks(full[layer])
            if layer == "pd":
                blocks = {k: v for k, v in blocks.items() if k not in framework_blocks}
                for name, block in _blocks(full["pd"]).items():
                    if name in framework_blocks and block.splitlines()[0] != framework_blocks[name].splitlines()[0]:
                        raise Failed(f"pd layer needs {block.splitlines()[0].split()[0]} but the "
                                     f"framework layer holds {framework_blocks[name].split()[0]}",
                                     hint="align the pins in docker/lock.toml, then `make lock`")
            body = "\n".join(blocks[k] for k in sorted(blocks)) + "\n"
            header = (_generated_header(layer)
                      + f"# Resolved by uv for CPython {python_version}, {PLATFORM}; install with "
                        f"--require-hashes --no-deps.\n"
                      + f"{INPUTS_MARK}{inputs_digest(inputs[layer])}\n")
            (out_dir / f"{layer}.in").write_text(inputs[layer])
            (out_dir / f"{layer}.txt").write_text(header + body)
            written[layer] = out_dir / f"{layer}.txt"
    return written


def check_locks(lock: Lock) -> list[str]:
    """Every way the hashed locks and their inputs disagree (empty when they agree)."""
    problems = []
    req_dir = requirements_dir(lock.path)
    expected = render_inputs(lock)
    fix = "run `make lock` and commit docker/requirements/"
    for layer in LAYERS:
        in_file, txt_file = req_dir / f"{layer}.in", req_dir / f"{layer}.txt"
        if not in_file.exists() or not txt_file.exists():
            problems.append(f"{req_dir}/{layer}.in/.txt: missing; fix: {fix}")
            continue
        in_text, txt = in_file.read_text(), txt_file.read_text()
        if in_text != expected[layer]:
            problems.append(f"{in_file}: does not match the pins in {lock.path}; fix: {fix}")
        mark = next((ln for ln in txt.splitlines() if ln.startswith(INPUTS_MARK)), None)
        if mark is None or mark.removeprefix(INPUTS_MARK) != inputs_digest(in_text):
            problems.append(f"{txt_file}: was not resolved from the current {in_file.name}; fix: {fix}")
        resolved = parse_pins(txt)
        wanted = parse_pins(in_text)
        if layer == "pd":
            wanted = {k: v for k, v in wanted.items() if k in {normalise(p) for p in PD_PACKAGES}}
        for name, version in wanted.items():
            if resolved.get(name) != version:
                problems.append(f"{txt_file}: {name} is {resolved.get(name, 'absent')}, the lock pins "
                                f"{version}; fix: {fix}")
        for name, block in _blocks(txt).items():
            if "--hash=sha256:" not in block:
                problems.append(f"{txt_file}: {name} has no sha256 hash; fix: {fix}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bundle.images.requirements", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="verify instead of regenerating")
    parser.add_argument("--lock", type=Path, default=None, help="path of lock.toml")
    parser.add_argument("--upgrade", action="store_true",
                        help="re-resolve every unpinned package to its newest allowed version (default: keep "
                             "the versions the hashed locks hold wherever the pins still allow them)")
    args = parser.parse_args(argv)
    try:
        lock = load_lock(args.lock)
        if args.check:
            problems = check_locks(lock)
            if problems:
                raise ConfigError(problems, source=str(requirements_dir(lock.path)))
            print(f"hashed locks agree with {lock.path} (lock hash {lock.hash})")
            return 0
        # Like `uv pip compile -o` and pip-compile with an existing output: a changed pin changes its own
        # closure, not every dependency that had a release since the last `make lock` (a new nixl pin
        # must not rebuild the framework layer).
        keep = None if args.upgrade else requirements_dir(lock.path)
        for layer, path in compile_locks(lock, keep_from=keep).items():
            print(f"{layer:<10} {len(parse_pins(path.read_text())):>4} packages  {path}")
        print(f"lock hash {load_lock(args.lock).hash}")
        return 0
    except BundleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
