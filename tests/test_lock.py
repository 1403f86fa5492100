"""docker/lock.toml: every pin exact and present, the hash, and the hashed requirement locks."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from bundle.errors import ConfigError
from bundle.images.cuda_toolchain import line_of, wheel_pins
from bundle.lock import load_lock, requirements_dir
from bundle.images.requirements import check_locks, compile_locks, parse_pins

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "docker" / "lock.toml"


@pytest.fixture
def lock_copy(tmp_path) -> Path:
    """A copy of docker/lock.toml with its requirement locks, safe to edit."""
    shutil.copy(LOCK, tmp_path / "lock.toml")
    shutil.copytree(REPO / "docker" / "requirements", tmp_path / "requirements")
    return tmp_path / "lock.toml"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def test_the_committed_lock_pins_the_measured_stack():
    lock = load_lock()
    assert re.fullmatch(r"[0-9a-f]{12}", lock.hash)
    assert lock.image_tag == f"lock-{lock.hash}"
    assert lock.image_ref == f"{lock.image_repo}:lock-{lock.hash}"
    assert {k: lock.pins[k] for k in ("torch", "sglang", "sglang-kernel", "flashinfer-python",
                                       "tilelang", "nixl-cu13", "smg")} == {
        "torch": "2.14.1", "sglang": "0.5.23", "sglang-kernel": "0.4.10",
        "flashinfer-python": "0.7.2", "tilelang": "0.1.12", "nixl-cu13": "1.5.1",
        "smg": "1.13.0"}
    assert lock.pins["python"] == "3.12" and lock.pins["cuda"].startswith("13.0.")


def test_the_router_is_smg_in_every_lock_and_sglang_router_in_none():
    # Both install an `smg` console script: one environment must never hold both.
    locks = [*(REPO / "docker" / "requirements").glob("*.txt"), *(REPO / "requirements").glob("*.txt")]
    holding = {path.name for path in locks if "smg" in parse_pins(path.read_text())}
    assert {"pd.txt", "dev.txt"} <= holding
    for path in locks:
        pins = parse_pins(path.read_text())
        assert "sglang-router" not in pins, f"{path} pins sglang-router"
        if "smg" in pins:
            assert pins["smg"] == load_lock().pins["smg"], path


def test_every_cuda_component_is_of_the_one_release_line_and_every_layer_resolves_to_it():
    """One toolchain: [cuda]'s wheels are all of its line, and the base and framework locks hold exactly
    those versions (humming-kernels[cu13]'s unpinned nvidia-cuda-* resolved to 13.5 before the pin)."""
    lock = load_lock()
    pins = wheel_pins(lock)
    assert {"nvidia-cuda-nvcc", "nvidia-cuda-crt", "nvidia-nvvm", "nvidia-cuda-cccl", "nvidia-cuda-runtime",
            "nvidia-cuda-nvrtc", "nvidia-nvjitlink"} == set(pins)
    assert {line_of(v) for v in pins.values()} == {lock.data["cuda"]["line"]} == {"13.0"}
    for layer in ("base", "framework"):
        resolved = parse_pins((requirements_dir(lock.path) / f"{layer}.txt").read_text())
        assert {name: resolved.get(name) for name in pins} == pins, layer
        # No other toolkit component (cupti, ...) of another line slipped in.
        toolkit = {n: v for n, v in resolved.items() if n.startswith(("nvidia-cuda-", "nvidia-nvjitlink", "nvidia-nvvm"))}
        assert {line_of(v) for v in toolkit.values()} == {"13.0"}, toolkit


def test_hash_ignores_where_the_image_is_published(lock_copy):
    before = load_lock(lock_copy).hash
    _edit(lock_copy, 'published_digest = ""', f'published_digest = "sha256:{"ab" * 32}"')
    after = load_lock(lock_copy)
    assert after.hash == before
    assert after.published_digest == f"sha256:{'ab' * 32}"


def test_hash_changes_with_a_pin_and_with_a_requirement_lock(lock_copy):
    before = load_lock(lock_copy).hash
    _edit(lock_copy, 'version = "0.0.0"', 'version = "0.0.1"')
    assert load_lock(lock_copy).hash != before
    mid = load_lock(lock_copy).hash
    req = lock_copy.parent / "requirements" / "pd.txt"
    req.write_text(req.read_text() + "\n")
    assert load_lock(lock_copy).hash != mid


@pytest.mark.parametrize("old,new,key", [
    ('torch = "2.14.1"\n', "", "python.torch: missing"),
    ('torch = "2.14.1"', 'torch = ">=2.14"', 'python.torch: ">=2.14" is not an exact version'),
    ('smg = "1.13.0"', 'smg = "1.13.*"', "python.smg"),
    # The frozen router is no longer part of the stack (its `smg` script collides with smg's).
    ('smg = "1.13.0"', 'smg = "1.13.0"\nsglang-router = "0.3.2"', "python.sglang-router: not a package"),
    ('cuda = "13.0.2"', "cuda = 13", "base.cuda: expected string, got integer 13"),
    ('nvcc = "13.0.88"', 'nvcc = "13.0"', 'cuda.nvcc: "13.0" is not a release version'),
    ('source = "pypi"', 'source = "git"', 'sglang.git_commit: "" is not a full 40-hex commit'),
    ('tilelang = "0.1.12"', 'tilelang = "0.1.12"\ntorchvision = "0.29.2"', "python.torchvision: not a package"),
    ('published_digest = ""', 'published_digest = "latest"', "image.published_digest"),
])
def test_a_missing_or_malformed_pin_names_file_key_and_fix(lock_copy, old, new, key):
    _edit(lock_copy, old, new)
    with pytest.raises(ConfigError) as err:
        load_lock(lock_copy)
    message = str(err.value)
    assert str(lock_copy) in message and key in message and "fix:" in message
    assert err.value.exit_code == 3


def test_a_problem_names_the_line_it_is_on(lock_copy):
    _edit(lock_copy, 'torch = "2.14.1"', 'torch = "latest"')
    line = next(i for i, text in enumerate(lock_copy.read_text().splitlines(), 1) if text.startswith("torch ="))
    with pytest.raises(ConfigError) as err:
        load_lock(lock_copy)
    assert f"{lock_copy}:{line}: python.torch:" in err.value.problems[0]


def test_every_problem_is_reported_at_once(lock_copy):
    _edit(lock_copy, 'torch = "2.14.1"', 'torch = "latest"')
    _edit(lock_copy, 'uv = "0.13.9"', 'uv = ""')
    with pytest.raises(ConfigError) as err:
        load_lock(lock_copy)
    assert len(err.value.problems) == 2


def test_a_missing_or_broken_lock_file_is_one_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_lock(tmp_path / "nope.toml")
    bad = tmp_path / "lock.toml"
    bad.write_text("[base\nimage = 1\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_lock(bad)


def test_hashed_locks_agree_with_the_lock():
    assert check_locks(load_lock()) == []


def test_every_requirement_line_is_exact_and_hashed():
    for txt in sorted((REPO / "docker" / "requirements").glob("*.txt")):
        pins = parse_pins(txt.read_text())
        assert pins, txt
        blocks = re.split(r"\n(?=[A-Za-z0-9])", txt.read_text().split("\n", 4)[-1])
        for block in blocks:
            if block.strip() and not block.startswith("#"):
                assert "==" in block.splitlines()[0] and "--hash=sha256:" in block, block[:80]


def test_a_pin_changed_without_make_lock_is_caught(lock_copy):
    _edit(lock_copy, 'tilelang = "0.1.12"', 'tilelang = "0.1.13"')
    problems = "\n".join(check_locks(load_lock(lock_copy)))
    assert "framework.in: does not match the pins" in problems and "make lock" in problems


def test_a_hand_edited_requirement_lock_is_caught(lock_copy):
    txt = lock_copy.parent / "requirements" / "framework.txt"
    txt.write_text(txt.read_text().replace("torch==2.14.1", "torch==2.14.0"))
    problems = "\n".join(check_locks(load_lock(lock_copy)))
    assert "torch is 2.14.0, the lock pins 2.14.1" in problems


def test_an_input_edited_without_resolving_is_caught(lock_copy):
    inp = lock_copy.parent / "requirements" / "pd.in"
    inp.write_text(inp.read_text() + "# touched\n")
    problems = "\n".join(check_locks(load_lock(lock_copy)))
    assert "pd.txt: was not resolved from the current pd.in" in problems


@pytest.mark.network
@pytest.mark.slow
def test_the_pins_resolve_together_against_the_index_today(lock_copy, tmp_path):
    """`make lock` into a scratch folder: the pins resolve, and to the same versions as committed."""
    out = tmp_path / "resolved"
    written = compile_locks(load_lock(lock_copy), out_dir=out)
    for layer, path in written.items():
        fresh = parse_pins(path.read_text())
        committed = parse_pins((REPO / "docker" / "requirements" / f"{layer}.txt").read_text())
        lock = load_lock()
        for name in ("torch", "sglang", "sglang-kernel", "flashinfer-python", "tilelang",
                     "nixl-cu13", "smg", "uv"):
            if name in committed:
                assert fresh[name] == committed[name] == lock.pins.get(name, lock.pins["uv"])
