"""The checkpoint in the lock: the manifest written by `bundle model pin` is valid lock TOML, and a
model folder is checked against it file by file (pin and fetch reach the Hub: not run here)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from bundle.errors import ConfigError
from bundle.images import model
from bundle.lock import load_lock

REPO = Path(__file__).resolve().parents[1]
REVISION = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def lock_copy(tmp_path):
    shutil.copytree(REPO / "docker", tmp_path / "docker")
    return tmp_path / "docker" / "lock.toml"


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "deepseek_v4"}')
    (folder / "model-00001-of-00002.safetensors").write_bytes(b"\1" * 1000)
    (folder / "model-00002-of-00002.safetensors").write_bytes(b"\2" * 500)
    return folder


def _manifest(folder: Path) -> dict[str, str]:
    files = [{"path": p.name, "size": p.stat().st_size,
              "lfs_sha256": hashlib.sha256(p.read_bytes()).hexdigest() if p.suffix == ".safetensors" else None}
             for p in sorted(folder.iterdir())]
    small = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()
             if model.is_small(p.name, p.stat().st_size)}
    return model.manifest_from(files, small)


def test_the_lock_names_the_checkpoint_and_leaves_it_out_of_the_image_hash(lock_copy):
    before = load_lock(lock_copy)
    pin = model.model_pin(before)
    assert pin.repo == "deepseek-ai/DeepSeek-V4-Flash" and not pin.pinned
    model.write_pin(before, REVISION, {"config.json": "sha256:" + "a" * 64, "x.safetensors": "size:12"})
    after = load_lock(lock_copy)
    assert model.model_pin(after) == model.ModelPin("deepseek-ai/DeepSeek-V4-Flash", REVISION,
                                                    {"config.json": "sha256:" + "a" * 64, "x.safetensors": "size:12"})
    # The weights are not in the image: pinning them must not rebuild it.
    assert after.hash == before.hash


def test_a_malformed_manifest_entry_is_refused_naming_its_key(lock_copy):
    lock = load_lock(lock_copy)
    model.write_pin(lock, REVISION, {"config.json": "md5:abc"})
    with pytest.raises(ConfigError) as err:
        load_lock(lock_copy)
    assert "model.files.config.json" in str(err.value)


def test_a_folder_that_matches_the_manifest_has_no_differences(tmp_path):
    folder = _folder(tmp_path)
    manifest = _manifest(folder)
    assert manifest["config.json"].startswith("sha256:")
    assert manifest["model-00001-of-00002.safetensors"].startswith("size:1000 sha256:")
    pin = model.ModelPin("r/m", REVISION, manifest)
    assert model.check_folder(folder, pin, shards_sha256=True) == []


def test_each_way_a_folder_differs_is_named(tmp_path):
    folder = _folder(tmp_path)
    pin = model.ModelPin("r/m", REVISION, _manifest(folder))
    (folder / "config.json").write_text('{"model_type": "deepseek_v41"}')
    (folder / "model-00001-of-00002.safetensors").write_bytes(b"\1" * 999)
    (folder / "model-00002-of-00002.safetensors").write_bytes(b"\3" * 500)  # same size, other bytes
    found = {d.path: d.what for d in model.check_folder(folder, pin)}
    assert found == {"config.json": "sha256 differs", "model-00001-of-00002.safetensors": "size 999 != 1000"}
    found = {d.path: d.what for d in model.check_folder(folder, pin, shards_sha256=True)}
    assert found["model-00002-of-00002.safetensors"] == "sha256 differs"
    (folder / "config.json").unlink()
    assert {d.path: d.what for d in model.check_folder(folder, pin)}["config.json"] == "missing"


def test_doctor_names_the_files_that_differ_from_the_pinned_checkpoint(tmp_path):
    from bundle.doctor import checks_model
    from bundle.doctor.context import HostContext
    from bundle.findings import Level

    folder = _folder(tmp_path)
    (folder / "tokenizer.json").write_text("{}")
    pin = model.ModelPin("deepseek-ai/DeepSeek-V4-Flash", REVISION, _manifest(folder))
    assert checks_model.model_files(HostContext(model_path=str(folder), model_pin=pin)).status == Level.OK
    (folder / "model-00002-of-00002.safetensors").write_bytes(b"\2" * 499)  # a download cut short
    result = checks_model.model_files(HostContext(model_path=str(folder), model_pin=pin))
    assert result.status == Level.FAIL
    assert "model-00002-of-00002.safetensors" in result.summary and "bundle model fetch" in result.remediation


def test_a_download_in_progress_is_measured_from_the_folder_against_the_manifest(tmp_path):
    folder = _folder(tmp_path)
    pin = model.ModelPin("r/m", REVISION, _manifest(folder))
    # Mid-download, as huggingface_hub leaves it: shard 2 still a partial file under .cache.
    (folder / "model-00002-of-00002.safetensors").unlink()
    partial = folder / ".cache" / "huggingface" / "download" / "model-00002-of-00002.safetensors.abc.incomplete"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(b"\2" * 200)
    progress = model.fetch_progress(folder, pin, seconds=2.0)
    assert (progress.total, progress.files_done, progress.files) == (1500, 2, 3)
    assert progress.received == 1000 + 200 + len('{"model_type": "deepseek_v4"}')
    assert progress.line().startswith("model: 0.0 GB of 0.0 GB (82%), 2 of 3 files, 0 MB/s, 0m02s elapsed")
