"""`bundle upgrade`: the report logic on the recorded inputs of a real upgrade (SGLang 0.5.22 with its own
closure -> 0.5.23, both stand-ins built and audited; docs/upgrade.md has the run), the planted breaks,
the scratch lock, and `--check` against a saved PyPI index snapshot. Offline: no network, no Docker."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import pytest

from bundle.config.loader import load_config
from bundle.errors import BundleError
from bundle.lock import load_lock
from bundle.upgrade import check, compare, render, scratch
from tests.conftest import write_config

DATA = Path(__file__).resolve().parent / "data" / "upgrade"
RECORDED = DATA / "sglang-0.5.22-to-0.5.23"
COMMON_OPS = "sgl_kernel/sm100/common_ops.abi3.so"

pytestmark = pytest.mark.usefixtures("runs_dir")


def _side(name: str) -> dict:
    with gzip.open(RECORDED / f"{name}.json.gz", "rt") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def sides() -> tuple[dict, dict]:
    return _side("old"), _side("new")


@pytest.fixture(scope="module")
def recorded(sides):
    return compare.report(*sides, load_config(None), overrides={}, change="sglang==0.5.23")


def test_packages_are_the_closures_sglang_pins(recorded):
    changed = {p["name"]: (p["old"], p["new"], p["pinned_by_sglang"]) for p in recorded["packages"]["changed"]}
    assert changed["sglang"][:2] == ("0.5.22", "0.5.23")
    assert changed["flashinfer-python"] == ("0.7.1", "0.7.2", True)
    assert changed["sglang-kernel"] == ("0.4.9", "0.4.10", True)
    assert "torch" not in changed  # both releases pin torch 2.14.1
    assert recorded["packages"]["lock_pins"]["sglang-kernel"] == {"old": "0.4.9", "new": "0.4.10"}


def test_every_parser_difference_is_listed_and_none_touches_the_default_command_lines(recorded):
    server = recorded["command_line"]["parsers"]["sglang-server"]
    assert (server["old_version"], server["new_version"]) == ("0.5.22", "0.5.23")
    kinds = {(d["kind"], d["flag"]) for d in server["diff"]}
    assert ("added", "--enable-paged-experts") in kinds
    assert ("removed", "--speculative-skip-dp-mlp-sync") in kinds
    assert server["options"]["new"] - server["options"]["old"] == \
        sum(1 for d in server["diff"] if d["kind"] == "added") - sum(1 for d in server["diff"] if d["kind"] == "removed")
    assert recorded["command_line"]["breaks"] == []


def test_planted_removed_option_in_extra_args_breaks_with_file_and_line(tmp_path, sides):
    cfg = write_config(tmp_path, "tp4:\n  extra_args:\n    - --max-running-requests\n    - '64'\n"
                                 "    - --speculative-skip-dp-mlp-sync\n")
    out = compare.report(*sides, load_config(cfg), change="sglang==0.5.23")
    assert out["verdict"]["status"] == "breaks"
    hit = [b for b in out["verdict"]["breaks"] if "--speculative-skip-dp-mlp-sync" in b["what"]]
    assert hit and hit[0]["where"] == f"{cfg}:5", out["verdict"]["breaks"]
    assert f"breaks: {cfg}:5: tp4/server: --speculative-skip-dp-mlp-sync was removed" in render.text(out)


def _planted_audits(old: dict, new: dict, *, moe: str, old_arch: list[str], new_arch: list[str]) -> tuple[dict, dict]:
    """The recorded sides with a planted audit: every server predicts `moe`, common_ops carries `*_arch`."""
    old, new = copy.deepcopy(old), copy.deepcopy(new)
    for side, arch in ((old, old_arch), (new, new_arch)):
        predicted = {s: {"moe_runner_backend": moe, "attention_backend": "dsv4"}
                     for s in ("tp4/server", "pd/prefill", "pd/decode")}
        side["audit"] = {"predicted": predicted, "fails": [], "image": f"planted-{side['label']}",
                         "libraries": [{"path": "/opt/venv/lib/python3.12/site-packages/" + COMMON_OPS,
                                        "size": 1, "cubins": arch, "ptx": [],
                                        "runs_on_sm120": "sm_120a" in arch,
                                        "how": "cubin sm_120a" if "sm_120a" in arch else None}]}
    return old, new


def test_planted_lever_whose_kernel_library_loses_sm120_code_breaks_at_the_lever(tmp_path, sides):
    """levers.moe_runner: marlin runs on sglang-kernel's common_ops; a release whose common_ops has no
    sm_120 code any more breaks that lever, found at its line in bundle.yaml."""
    old, new = _planted_audits(*sides, moe="marlin", old_arch=["sm_90a", "sm_120a"], new_arch=["sm_90a", "sm_100a"])
    cfg = write_config(tmp_path, "project: x\nlevers:\n  moe_runner: marlin\n")
    out = compare.report(old, new, load_config(cfg), change="sglang==0.5.23")
    hit = [b for b in out["verdict"]["breaks"] if COMMON_OPS in b["what"]]
    assert hit and hit[0]["where"] == f"{cfg}:3" and "moe_runner_backend=marlin" in hit[0]["what"]
    assert out["verdict"]["status"] == "breaks"
    assert f"lost   {COMMON_OPS}" in render.text(out)


def test_a_library_that_loses_sm120_code_no_path_needs_is_only_attention(sides):
    old, new = _planted_audits(*sides, moe="flashinfer_mxfp4", old_arch=["sm_120a"], new_arch=["sm_100a"])
    for side in (old, new):  # a library nothing chosen loads
        side["audit"]["libraries"][0]["path"] = side["audit"]["libraries"][0]["path"].replace("common_ops", "spatial_ops")
    out = compare.report(old, new, load_config(None))
    assert not any("spatial_ops" in b["what"] for b in out["verdict"]["breaks"])
    assert any("spatial_ops" in a["what"] and "lost" in a["what"] for a in out["verdict"]["attention"])


def test_gained_sm120_code_is_a_finding(sides):
    old, new = _planted_audits(*sides, moe="flashinfer_mxfp4", old_arch=["sm_90a"], new_arch=["sm_90a", "sm_120a"])
    out = compare.report(old, new, load_config(None))
    assert any(COMMON_OPS in a["what"] and "gained" in a["what"] for a in out["verdict"]["attention"])


def test_a_guard_that_no_longer_holds_breaks(sides):
    new = copy.deepcopy(sides[1])
    new["guards"]["sm120_flashmla"]["compared"] = ["flashinfer", "triton", "b12x"]
    out = compare.report(sides[0], new, load_config(None))
    broken = [g for g in out["guards"] if not g["holds"]]
    assert [g["guard"] for g in broken] == ["SGLANG_SM120_FLASHMLA_BACKEND names"]
    assert any(b["where"] == "bundle/rules/backends.py" for b in out["verdict"]["breaks"])


def test_the_json_report_is_deterministic_for_diffing(sides):
    a = compare.report(*sides, load_config(None), change="sglang==0.5.23")
    b = compare.report(*sides, load_config(None), change="sglang==0.5.23")
    assert json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


# --- the scratch lock ----------------------------------------------------------------------------------

def test_edit_pins_changes_values_only_in_the_table_and_keeps_comments():
    text = load_lock().path.read_text()
    edited = scratch.edit_pins(text, "python", {"sglang": "0.5.22", "sglang-kernel": "0.4.9"})
    assert scratch.table_pins(edited, "python")["sglang"] == "0.5.22"
    assert scratch.table_pins(edited, "python")["torch"] == scratch.table_pins(text, "python")["torch"]
    assert [ln for ln in edited.splitlines() if ln.startswith("#")] == [ln for ln in text.splitlines() if ln.startswith("#")]
    assert len(edited.splitlines()) == len(text.splitlines())
    with pytest.raises(BundleError, match=r"\[python\] has no sglang-kernl"):
        scratch.edit_pins(text, "python", {"sglang-kernl": "1"})


def test_pins_to_take_follow_the_release_exact_pins():
    lock = {"torch": "2.14.1", "sglang": "0.5.23", "sglang-kernel": "0.4.10", "smg": "1.13.0"}
    requires = {"torch": "2.14.1", "sglang-kernel": "0.4.9", "flashinfer-python": "0.7.1"}
    assert scratch.pins_to_take(lock, "sglang", "0.5.22", requires) == {"sglang": "0.5.22", "sglang-kernel": "0.4.9"}


def test_scratch_copy_leaves_the_working_lock_untouched(tmp_path):
    lock = load_lock()
    before = {p.name: p.read_bytes() for p in [lock.path, *lock.requirement_locks]}
    new = scratch.make_scratch(lock.path.parent.parent, lock, tmp_path / "s",
                               scratch.edit_pins(lock.path.read_text(), "python", {"sglang": "0.5.22"}))
    assert scratch.table_pins(new.read_text(), "python")["sglang"] == "0.5.22"
    assert (tmp_path / "s" / "compose").resolve() == (lock.path.parent.parent / "compose").resolve()
    assert {p.name: p.read_bytes() for p in [lock.path, *lock.requirement_locks]} == before


def test_preferences_drop_the_old_releases_own_pins(tmp_path):
    req = tmp_path / "req"
    req.mkdir()
    (req / "framework.txt").write_text("# header\nsix==1.17.0 \\\n    --hash=sha256:aa\n"
                                       "cuda-tile==1.6.0 \\\n    --hash=sha256:bb\n")
    out = scratch.preferences(req, {"cuda-tile"}, tmp_path / "kept")
    assert (out / "framework.txt").read_text() == "# header\nsix==1.17.0 \\\n    --hash=sha256:aa\n"


# --- --check against the saved index snapshot -------------------------------------------------------------

@pytest.fixture(scope="module")
def index() -> dict:
    return check.load_index(DATA / "index-20261201.json")


def _rows(pins, index):
    return {r["name"]: r for r in check.answer(pins, index)}


def test_check_from_sglang_0522_names_the_release_that_requires_each_kernel(index):
    pins = {"torch": "2.14.1", "sglang": "0.5.22", "sglang-kernel": "0.4.9", "flashinfer-python": "0.7.1",
            "tilelang": "0.1.12", "nixl-cu13": "1.5.1", "smg": "1.13.0"}
    rows = _rows(pins, index)
    assert rows["sglang"]["newer"] == ["0.5.23"]
    assert "0.7.2 with sglang 0.5.23" in rows["flashinfer-python"]["answer"]
    assert "0.7.4" in rows["flashinfer-python"]["newer"] and rows["flashinfer-python"]["allowed"] == []
    assert "0.4.10 with sglang 0.5.23" in rows["sglang-kernel"]["answer"]
    assert "does not require nixl-cu13" in rows["nixl-cu13"]["answer"]


def test_check_on_the_working_lock_offline(index):
    pins = {k: str(v) for k, v in load_lock().data["python"].items()}
    rows = _rows(pins, index)
    assert rows["sglang"]["newer"] == []
    assert rows["torch"]["newer"] and rows["torch"]["allowed"] == []
    assert "only with an SGLang that requires it" in rows["torch"]["answer"]
    assert rows["tilelang"]["newer"] and not rows["tilelang"]["allowed"]


def test_check_refuses_a_file_that_is_not_a_snapshot(tmp_path):
    bad = tmp_path / "index.json"
    bad.write_text('{"meta": {}}')
    with pytest.raises(BundleError, match="projects: missing"):
        check.load_index(bad)


def test_a_package_sglang_pins_moves_only_with_an_sglang(index):
    from bundle.upgrade.service import refuse_if_pinned

    requires = index["projects"]["sglang"]["requires"]["0.5.23"]
    pins = {n: s[2:] for n, s in requires.items() if s.startswith("==")}
    with pytest.raises(BundleError, match=r"flashinfer-python 0.7.4: sglang 0.5.23 requires flashinfer-python==0.7.2"):
        refuse_if_pinned("flashinfer-python", "0.7.4", "0.5.23", pins)
    refuse_if_pinned("smg", "1.14.0", "0.5.23", pins)  # not an SGLang requirement: allowed


def test_apply_writes_the_new_lock_and_requirements_over_the_old(tmp_path):
    from bundle.upgrade.service import apply

    working = load_lock()
    old_path = scratch.make_scratch(working.path.parent.parent, working, tmp_path / "old", working.path.read_text())
    new_path = scratch.make_scratch(working.path.parent.parent, working, tmp_path / "new",
                                    scratch.edit_pins(working.path.read_text(), "python", {"smg": "1.14.0"}))
    (new_path.parent / "requirements" / "pd.txt").write_text("smg==1.14.0 \\\n    --hash=sha256:00\n")
    old, new = load_lock(old_path), load_lock(new_path)
    done = apply(old, new, {"parsers": {}})
    assert scratch.table_pins(old_path.read_text(), "python")["smg"] == "1.14.0"
    assert (old_path.parent / "requirements" / "pd.txt").read_text().startswith("smg==1.14.0")
    assert done["lock_hash"] == load_lock(new_path).hash != working.hash
    assert not any("parsers" in w for w in done["written"])  # not the project's own lock: snapshots stay
def test_predictions_are_compared_for_every_topology(recorded):
    assert set(recorded["predicted"]) == {"tp4", "pd", "dp"}
    for topo in recorded["predicted"].values():
        assert topo["servers"]
        for server, p in topo["new"].items():
            assert p["moe_runner_backend"] and p["attention_backend"], server
    text = render.text(recorded)
    assert "PREDICTED ON sm_120" in text and "tp4: " in text


def test_sm120_code_of_sglang_kernel_libraries_old_against_new(recorded):
    libs = {lib["path"]: lib for lib in recorded["libraries"]}
    kernel = {p: lib for p, lib in libs.items() if p.startswith("sgl_kernel/")}
    assert kernel and COMMON_OPS in kernel
    assert kernel[COMMON_OPS]["runs"] == {"old": True, "new": True}
    flash = kernel.get("sgl_kernel/flash_ops.abi3.so")
    assert flash is not None and flash["runs"]["new"] is False  # sm_80/86/90a only, as CONTEXT.md measured


