"""`bundle build`: the plan (layers, tags, keys, build arguments from the lock) and bad input."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from bundle.images import build
from bundle.cli import main
from bundle.errors import BundleError
from bundle.lock import LOCK_HASH_LABEL, load_lock

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A copy of docker/ and kernels/ that a test may change; BUNDLE_HOME points the driver at it."""
    shutil.copytree(REPO / "docker", tmp_path / "docker")
    shutil.copytree(REPO / "kernels", tmp_path / "kernels", ignore=shutil.ignore_patterns("build", "*.egg-info"))
    monkeypatch.setenv("BUNDLE_HOME", str(tmp_path))
    return tmp_path


def _plan(root: Path, standin: bool = False, kernels: list[str] | None = None) -> build.Plan:
    return build.make_plan(load_lock(root / "docker" / "lock.toml"), standin=standin, root=root, kernels=kernels)


def _keys(root: Path) -> dict[str, str]:
    return {lp.name: lp.key for lp in _plan(root).layers}


def test_layers_chain_in_order_and_take_their_versions_from_the_lock(project):
    plan = _plan(project)
    lock = plan.lock
    assert [lp.name for lp in plan.layers] == ["base", "framework", "pd", "kernels", "overlay", "runtime"]
    for lower, upper in zip(plan.layers, plan.layers[1:]):
        assert upper.build_args["PARENT_IMAGE"] == lower.tag
    base = plan.layer("base").build_args
    # The project's own base, here and on a GPU host: no registry image.
    assert base["BASE_IMAGE"] == build.STANDIN_BASE and base["PYTHON_VERSION"] == "3.12"
    assert base["CUDA_VERSION"] == lock.data["cuda"]["line"] == "13.0"
    assert base["TORCH_CUDA_ARCH_LIST"] == lock.pins["cuda_arch_list"]
    runtime = plan.layer("runtime")
    assert runtime.extra_tags == [lock.image_ref]
    assert runtime.labels[LOCK_HASH_LABEL] == lock.hash
    for lp in plan.layers:
        assert re.fullmatch(rf"{re.escape(lock.image_repo)}:{lp.name}-[0-9a-f]{{12}}", lp.tag)
        assert {"org.opencontainers.image.source", "org.opencontainers.image.revision",
                "org.opencontainers.image.version"} <= set(lp.labels)


def test_an_overlay_change_keeps_every_lower_layer_key(project):
    before = _keys(project)
    (project / "kernels" / "extra.txt").write_text("x\n")
    after = _keys(project)
    assert [n for n in before if before[n] != after[n]] == ["overlay", "runtime"]


def test_an_entrypoint_change_rebuilds_only_the_runtime_layer(project):
    before = _keys(project)
    entry = project / "docker" / "entrypoint.sh"
    entry.write_text(entry.read_text() + "# changed\n")
    after = _keys(project)
    assert [n for n in before if before[n] != after[n]] == ["runtime"]


def test_a_framework_lock_change_rebuilds_from_framework_up(project):
    before = _keys(project)
    req = project / "docker" / "requirements" / "framework.txt"
    req.write_text(req.read_text() + "\n")
    after = _keys(project)
    assert [n for n in before if before[n] != after[n]] == ["framework", "pd", "kernels", "overlay", "runtime"]


def test_build_outputs_in_the_overlay_folder_are_not_inputs(project):
    before = _keys(project)
    (project / "kernels" / "build").mkdir(exist_ok=True)
    (project / "kernels" / "build" / "junk.so").write_bytes(b"\0")
    assert _keys(project) == before


def test_a_standin_plan_builds_the_same_layers_and_never_uses_the_real_tags(project):
    plan = _plan(project, standin=True)
    real = _plan(project)
    assert [lp.name for lp in plan.layers] == [lp.name for lp in real.layers]
    base = plan.layer("base").build_args
    assert base["BASE_IMAGE"] == build.STANDIN_BASE and base["APT_SNAPSHOT"] == ""
    # The closure installs only on the lock's Python: the Debian root carries the same minor version.
    assert base["PYTHON_VERSION"] == plan.lock.data["base"]["python"] == "3.12"
    assert all("-standin:" in tag for lp in plan.layers for tag in lp.tags)
    assert [lp.key for lp in plan.layers[:1]] == [lp.key for lp in real.layers[:1]]
    assert {k: v for k, v in plan.layer("framework").build_args.items() if k != "PARENT_IMAGE"} == \
        {k: v for k, v in real.layer("framework").build_args.items() if k != "PARENT_IMAGE"}
    # A local build (CI) compiles the GPU image's real kernels layer, the fused MoE cut included, unless
    # told others: the same KERNELS, so the same layer content, only the tag's repository differs.
    assert plan.layer("kernels").build_args["KERNELS"] == real.layer("kernels").build_args["KERNELS"]
    assert "fused_moe_120=kernels_narrow:gen_fused_moe_120_module" in plan.layer("kernels").build_args["KERNELS"]
    sampling = _plan(project, standin=True, kernels=["sampling"]).layer("kernels").build_args["KERNELS"]
    assert sampling == "sampling=flashinfer.jit.sampling:gen_sampling_module"
    assert sampling in real.layer("kernels").build_args["KERNELS"].split()


def test_the_kernels_layer_compiles_every_module_the_choices_need_unless_narrowed(project):
    """By default every module of kernels_jit's table (FlashInfer's generators by name); --kernels
    narrows it (`--kernels norm`: the lent-GPU proof's one small module), which changes the kernels layer's key and those above only."""
    full = _plan(project)
    words = full.layer("kernels").build_args["KERNELS"].split()
    names = [w.split("=")[0] for w in words]
    assert {"sparse_mla_sm120", "fused_moe_120", "mxfp8_quantization_sm100", "sampling"} <= set(names)
    assert "norm" not in names
    assert "sparse_mla_sm120=flashinfer.jit.mla:gen_sparse_mla_sm120_module" in words
    narrow = _plan(project, kernels=["norm"])
    assert narrow.layer("kernels").build_args["KERNELS"] == "norm=flashinfer.jit.norm:gen_norm_module"
    changed = [lp.name for lp, other in zip(full.layers, narrow.layers) if lp.key != other.key]
    assert changed == ["kernels", "overlay", "runtime"]
    with pytest.raises(BundleError) as err:
        _plan(project, kernels=["nrom"])
    assert "unknown kernel module(s): nrom" in err.value.message and "norm" in err.value.hint


def test_an_unknown_layer_is_one_error_with_a_suggestion(project):
    with pytest.raises(BundleError) as err:
        build.select_layers(_plan(project), ["overlai"])
    assert "did you mean 'overlay'" in str(err.value) and err.value.exit_code == 3


def test_dry_run_lists_every_layer_tag_and_pin(project, capsys):
    assert main(["build", "--dry-run"]) == 0
    out = capsys.readouterr().out
    plan = _plan(project)
    for lp in plan.layers:
        assert lp.tag in out
    for pin in ("torch 2.14.1", "sglang 0.5.23", "sglang-kernel 0.4.10", "flashinfer-python 0.7.2",
                "tilelang 0.1.12", "nixl-cu13 1.5.1", "smg 1.13.0"):
        assert pin in out
    assert f"--build-arg BASE_IMAGE={build.STANDIN_BASE}" in out
    assert plan.lock.image_ref in out


def test_a_bad_lock_fails_the_build_before_anything_starts(project, capsys):
    lock = project / "docker" / "lock.toml"
    lock.write_text(lock.read_text().replace('torch = "2.14.1"', 'torch = "2.14"  # ok\ntorch2 = 1'))
    assert main(["build", "--dry-run"]) == 3
    err = capsys.readouterr().err
    assert "lock.toml" in err and "python.torch2" in err


def test_a_missing_requirement_lock_is_named_before_any_build(project):
    (project / "docker" / "requirements" / "pd.txt").unlink()
    plan = _plan(project)
    with pytest.raises(BundleError, match=r"docker/requirements/pd.txt: missing \(layer pd\)"):
        build.check_inputs(project, plan)


def test_no_engine_is_one_clear_error_and_nothing_is_tagged(project, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such-docker.sock")
    assert main(["build", "--standin"]) == 4
    err = capsys.readouterr().err
    assert "no Docker engine answers" in err and "fix:" in err
