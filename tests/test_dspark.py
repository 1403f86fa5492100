"""levers.speculative: dspark end to end without Docker: rendered as SGLang's DSPARK flags and parsed;
refused in pd (sglang #33083), with DP-attention and with a checkpoint that has no draft, each naming
file, key path and fix; the checkpoint a folder holds (model check, doctor, the lock's two pins); the
simulator resolving DSPARK as _handle_dspark does; attestation reading the block size back; tune's
space ranking dspark for tp4 and skipping it for pd; the bench table's acceptance length."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bundle.cli import main
from bundle.config.loader import load_config
from bundle.config.source import parse_yaml
from bundle.doctor import checks_model
from bundle.doctor.context import HostContext
from bundle.findings import Level
from bundle.images import model
from bundle.lock import load_lock
from bundle.rehearsal.shared.env import simulated_model_dir
from bundle.rules import argspec, checkpoint
from bundle.rehearsal.simulator.resolve import DSparkRefused, resolve_like_sglang
from bundle.tune import plan as planner
from bundle.tune.space import load_space
from bundle.verify import attest, tables
from bundle.rehearsal import registry as modes
from tests.conftest import REPO, checked, render_for, write_config

pytestmark = pytest.mark.usefixtures("runs_dir")

SHIPPED = REPO / "bundle" / "images" / "audit" / "deepseek_v4_flash" / "config.json"


def original_folder(root: Path) -> Path:
    folder = root / "DeepSeek-V4-Flash"
    folder.mkdir()
    shutil.copy(SHIPPED, folder / "config.json")
    return folder


def folder_0731(root: Path, **draft) -> Path:
    """A 0731-like folder: the shipped V4-Flash config.json with SGLang's marks of a bundled DSpark draft."""
    folder = root / "DeepSeek-V4-Flash-0731"
    folder.mkdir()
    config = json.loads(SHIPPED.read_text()) | (draft or {"dspark_block_size": 7, "dspark_markov_rank": 1})
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def config(tmp_path, folder: Path, levers: str = "{speculative: dspark}", extra: str = "") -> Path:
    return write_config(tmp_path, f"model: {{path: {folder}}}\nlevers: {levers}\n{extra}")


# ---- render and parse ----------------------------------------------------------------------------
def test_render_tp4_with_dspark_and_a_0731_folder_carries_speculative_algorithm_dspark_and_parses(tmp_path, capsys):
    path = config(tmp_path, folder_0731(tmp_path))
    assert main(["render", "tp4", "-c", str(path)]) == 0
    assert "- --speculative-algorithm\n    - DSPARK" in capsys.readouterr().out.replace("      ", "    ")
    dep = load_config(path)
    args = render_for(dep, "tp4").server_args("server")
    at = args.index("--speculative-algorithm")
    assert args[at + 1] == "DSPARK" and "--speculative-dspark-block-size" not in args  # SGLang's choice
    assert argspec.check_arguments(argspec.SERVER_SPEC, args) is None
    assert checked(dep, "tp4").errors == []


def test_block_size_and_calibration_files_render_as_sglangs_flags_under_the_model_mount(tmp_path):
    folder = folder_0731(tmp_path)
    (folder / "dspark").mkdir()
    (folder / "dspark" / "sps.json").write_text("{}")
    path = config(tmp_path, folder, "{speculative: dspark, dspark: {block_size: 3, sps_table: dspark/sps.json}}")
    dep = load_config(path)
    args = render_for(dep, "tp4").server_args("server")
    assert args[args.index("--speculative-dspark-block-size") + 1] == "3"
    assert args[args.index("--speculative-dspark-sps-table-path") + 1] == "/model/dspark/sps.json"
    assert checked(dep, "tp4").errors == []
    missing = load_config(config(tmp_path, folder, "{speculative: dspark, dspark: {confidence_sts: ../x.json}}"))
    (error,) = checked(missing, "tp4").errors
    assert "levers.dspark.confidence_sts" in error and "inside the model folder" in error


# ---- refusals ------------------------------------------------------------------------------------
def test_dspark_in_pd_is_refused_naming_sglang_33083_the_key_and_mtp(tmp_path, capsys):
    path = config(tmp_path, folder_0731(tmp_path))
    assert main(["validate", "pd", "-c", str(path)]) == 3
    err = capsys.readouterr().err
    assert f"{path.name}:2: levers.speculative:" in err and "sglang #33083" in err
    assert "levers.speculative: mtp" in err
    # Allowed where the registry says the topology is not disaggregated.
    assert main(["validate", "tp4", "-c", str(path)]) == 0
    assert main(["validate", "dp", "-c", str(path)]) == 0


def test_dspark_with_a_checkpoint_without_a_draft_is_refused_naming_the_checkpoint(tmp_path, capsys):
    folder = original_folder(tmp_path)
    path = config(tmp_path, folder)
    assert main(["validate", "tp4", "-c", str(path)]) == 3
    err = capsys.readouterr().err
    assert f"{folder} holds DeepSeek-V4-Flash (no DSpark draft)" in err
    assert "DeepSeek-V4-Flash-0731" in err and "levers.speculative: mtp" in err
    # The same folder with mtp is fine.
    assert main(["validate", "tp4", "-c", str(config(tmp_path, folder, "{speculative: mtp}"))]) == 0


def test_dspark_cannot_be_slipped_in_through_extra_args(tmp_path):
    dep = load_config(write_config(tmp_path, f"model: {{path: {original_folder(tmp_path)}}}\n"
                                             "tp4: {extra_args: [--speculative-algorithm, DSPARK]}\n"))
    (error,) = checked(dep, "tp4").errors
    assert "tp4.extra_args[0]: --speculative-algorithm is set by the bundle itself" in error


def test_dspark_with_dp_attention_is_refused_at_the_flag(tmp_path):
    path = config(tmp_path, folder_0731(tmp_path), extra="tp4: {extra_args: [--enable-dp-attention]}\n")
    errors = checked(load_config(path), "tp4").errors
    assert any("tp4.extra_args[0]: DSpark speculative decoding is blocked with DP-attention (sglang #33083)" in e
               for e in errors), errors


# ---- the checkpoint a folder holds ---------------------------------------------------------------
def test_identify_tells_the_original_0731_bundled_0731_subfolder_and_v41_apart(tmp_path):
    assert checkpoint.identify(original_folder(tmp_path)).describe() == "DeepSeek-V4-Flash (no DSpark draft)"
    held = checkpoint.identify(folder_0731(tmp_path))
    assert (held.name, held.draft, held.block_size) == ("DeepSeek-V4-Flash-0731", "bundled", 7)
    sub = tmp_path / "sub"
    (sub / "dspark").mkdir(parents=True)
    shutil.copy(SHIPPED, sub / "config.json")
    (sub / "dspark" / "config.json").write_text('{"block_size": 5}')
    assert checkpoint.identify(sub).describe() == "DeepSeek-V4-Flash-0731 (DSpark draft dspark/ subfolder, block size 5)"
    v41 = tmp_path / "v41"
    v41.mkdir()
    (v41 / "config.json").write_text('{"model_type": "deepseek_v41"}')
    assert checkpoint.identify(v41).refused and "V4.1" in checkpoint.identify(v41).refused
    assert checkpoint.identify(tmp_path / "nothing") is None


def test_the_lock_pins_0731_beside_the_original_and_a_folder_is_checked_against_its_own(tmp_path, monkeypatch):
    lock_path = tmp_path / "lock.toml"
    shutil.copy(REPO / "docker" / "lock.toml", lock_path)
    before = load_lock(lock_path)
    assert model.model_pin(before).repo == "deepseek-ai/DeepSeek-V4-Flash"  # the default: the original
    assert model.model_pin(before, "0731").repo == "deepseek-ai/DeepSeek-V4-Flash-0731"
    manifest = {"config.json": "sha256:" + "b" * 64}
    model.write_pin(before, "1" * 40, manifest, "0731")
    model.write_pin(load_lock(lock_path), "2" * 40, {"config.json": "sha256:" + "c" * 64})
    after = load_lock(lock_path)
    assert model.model_pin(after, "0731") == model.ModelPin("deepseek-ai/DeepSeek-V4-Flash-0731", "1" * 40, manifest)
    assert model.model_pin(after).revision == "2" * 40
    assert after.hash == before.hash  # weights are not in the image
    assert model.pin_for_folder(after, folder_0731(tmp_path)).repo.endswith("-0731")
    assert model.pin_for_folder(after, original_folder(tmp_path)).repo.endswith("DeepSeek-V4-Flash")


def test_model_check_says_which_checkpoint_the_folder_holds_and_whether_it_has_a_draft(tmp_path, capsys):
    folder = folder_0731(tmp_path)
    # Nothing is pinned on this machine: it names the checkpoint, then says which table is not pinned.
    assert main(["model", "check", "--path", str(folder)]) == 3
    out = capsys.readouterr()
    assert f"{folder} holds DeepSeek-V4-Flash-0731 (DSpark draft bundled, block size 7)" in out.out
    assert "model_0731.revision is not pinned" in out.err and "--checkpoint 0731" in out.err


def test_doctor_names_the_checkpoint_and_its_draft(tmp_path):
    folder = folder_0731(tmp_path)
    (folder / "model.safetensors").write_bytes(b"\0" * 16)
    (folder / "tokenizer.json").write_text("{}")
    result = checks_model.model_files(HostContext(model_path=str(folder)))
    assert result.status is Level.OK and "DeepSeek-V4-Flash-0731 (DSpark draft bundled" in result.summary
    assert result.details["dspark_draft"] == "bundled"


# ---- the simulator and attestation ---------------------------------------------------------------
def test_the_simulator_resolves_dspark_as_handle_dspark_does_and_refuses_without_a_draft():
    fields = {"speculative_algorithm": "DSPARK", "model_path": "/model", "speculative_dspark_block_size": None}
    out, changed = resolve_like_sglang(dict(fields), {"architectures": ["DeepseekV4ForCausalLM"],
                                                      "dspark_block_size": 7})
    assert (out["speculative_num_steps"], out["speculative_eagle_topk"], out["speculative_num_draft_tokens"]) == (1, 1, 8)
    assert out["speculative_draft_model_path"] == "/model" and "speculative_num_draft_tokens" in changed
    out, _ = resolve_like_sglang(dict(fields, speculative_dspark_block_size=3),
                                 {"architectures": ["DeepseekV4ForCausalLM"], "dspark_block_size": 7})
    assert out["speculative_num_draft_tokens"] == 4
    with pytest.raises(DSparkRefused, match="requires setting --speculative-draft-model-path"):
        resolve_like_sglang(dict(fields), {"architectures": ["DeepseekV4ForCausalLM"]})


def _record(**fields):
    return attest.WorkerRecord(role="server", source="saved", fields={
        "speculative_algorithm": "DSPARK", "speculative_num_steps": 1, "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": 8, "speculative_dspark_block_size": None, **fields})


def test_attestation_reads_back_the_algorithm_and_the_block_size_the_server_resolved(tmp_path):
    folder = folder_0731(tmp_path)
    dep = load_config(config(tmp_path, folder))
    (exp,) = attest.expectations(dep, "tp4", model_folder=str(folder)).values()
    assert exp.dspark_block_size == 7  # the draft's own
    found = []
    attest._speculative(_record().fields, exp, lambda *a: found.append(a))
    assert found == [("OK", "speculative decoding",
                      "dspark: DSPARK, block size 7 (verify window 8, steps 1, top-k 1)")]
    found.clear()
    attest._speculative(_record(speculative_num_draft_tokens=4).fields, exp, lambda *a: found.append(a))
    assert found[0][0] == "FAIL" and "block size 7" in found[0][2] and "block size 3" in found[0][2]
    found.clear()
    attest._speculative(_record(speculative_algorithm="EAGLE").fields, exp, lambda *a: found.append(a))
    assert found[0][0] == "FAIL" and "asks for dspark; the server runs EAGLE" in found[0][2]


# ---- tune's space --------------------------------------------------------------------------------
def _plan(tmp_path, topology: str, model_folder: Path):
    user = parse_yaml("project: p\n", str(tmp_path / "bundle.yaml"))
    space = load_space(write_config(tmp_path, "levers: {speculative: [none, mtp, dspark]}\n", name="space.yaml"))
    return planner.make_plan(space, user, topology=topology, mode=modes.get("sim"), sim={},
                             extra_env={"MODEL_HOST_PATH": str(model_folder)}, budget_s=None, lock_hash="abc")


def test_tune_runs_dspark_for_tp4_and_dp_on_a_checkpoint_with_a_draft_and_skips_it_for_pd_with_the_reason(tmp_path):
    for topology in ("tp4", "dp"):
        plan = _plan(tmp_path, topology, simulated_model_dir())  # the rehearsal's model carries a draft
        assert "speculative=dspark" in [p.candidate.name for p in plan.to_run], topology
    skips = {p.candidate.name: p.candidate.skip for p in _plan(tmp_path, "pd", simulated_model_dir()).items}
    assert skips["speculative=mtp"] is None
    assert "rejected before launch" in skips["speculative=dspark"] and "sglang #33083" in skips["speculative=dspark"]
    plain = {p.candidate.name: p.candidate.skip for p in _plan(tmp_path, "tp4", original_folder(tmp_path)).items}
    assert "holds DeepSeek-V4-Flash (no DSpark draft)" in plain["speculative=dspark"]


def test_the_default_space_offers_dspark():
    from bundle.tune.space import DEFAULT_LEVERS

    assert "dspark" in DEFAULT_LEVERS["speculative"]


# ---- bench -----------------------------------------------------------------------------------------
def test_the_bench_table_shows_the_acceptance_length_sglang_reported_beside_throughput():
    record = {"levels": [{"concurrency": 1, "status": "ok", "failed_requests": 0, "unsent": 0,
                          "metrics": {"completed": 4, "output_throughput": 210.5, "accept_length": 3.42}}],
              "label": None, "run_id": "r", "topology": "tp4", "rehearsal": False,
              "config": {"input_len": 256, "output_len": 256}}
    from rich.console import Console

    console = Console(width=300, record=True)
    console.print(tables.bench_table(record))
    text = console.export_text()
    assert "accept len" in text and "3.42" in text and "210.5" in text
