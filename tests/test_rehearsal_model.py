"""The CPU engine rehearsal's model is trained once per image, even when two launches (or two test
workers) ask for it at the same moment: the second waits for the first and reuses its folder; and it
is trained once per Docker engine: kept there as an image, another checkout copies it instead of
training. The training container is replaced by a writer that takes as long as it is told (the real
training runs in the engine e2e tests)."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from bundle.rehearsal.engine import model as rehearsal_model
from bundle.stack import engine


def _writer(runs: list[str], delay_s: float = 0.0):
    """Stands in for the training container: records its name, takes `delay_s`, writes a model."""
    def training(image, command, *, name, volumes, on_line):
        runs.append(name)
        work = next(host for host, inside, _ in volumes if inside == "/out")
        time.sleep(delay_s)
        (work / "config.json").write_text('{"rehearsal": true}')
        (work / "model-00001-of-00001.safetensors").write_bytes(b"weights")
        (work / rehearsal_model.WEIGHTS_INDEX).write_text('{"weight_map": {}}')
        return 0, []
    return training


def test_two_launches_at_once_train_the_model_once_and_both_get_it(tmp_path, monkeypatch):
    out = tmp_path / "rehearsal-model" / "abc123"
    monkeypatch.setattr(rehearsal_model, "model_dir", lambda image: out)
    runs = []
    # 1 s: long enough for the second caller to arrive while it runs
    monkeypatch.setattr(rehearsal_model.engine, "run_streamed", _writer(runs, delay_s=1.0))
    monkeypatch.setattr(rehearsal_model.engine, "image_exists", lambda ref: False)
    kept = []
    monkeypatch.setattr(rehearsal_model.engine, "folder_to_image", lambda folder, ref, label: kept.append(ref))
    said: dict[int, list[str]] = {0: [], 1: []}
    got: dict[int, object] = {}

    def launch(i: int) -> None:
        got[i] = rehearsal_model.ensure_model("img", report=said[i].append)

    first = threading.Thread(target=launch, args=(0,))
    first.start()
    time.sleep(0.3)
    second = threading.Thread(target=launch, args=(1,))
    second.start()
    first.join(10)
    second.join(10)

    assert len(runs) == 1, runs
    assert kept == [rehearsal_model.model_image("img")]  # kept in the engine once, by the one trainer
    assert got[0] == got[1] == out and (out / "model-00001-of-00001.safetensors").read_bytes() == b"weights"
    assert any("another process is training this model" in line for line in said[1]), said[1]
    assert not out.with_name(out.name + ".partial").exists()


@pytest.mark.docker
def test_another_checkout_on_the_same_engine_copies_the_kept_model_instead_of_training(tmp_path, monkeypatch):
    """Two checkouts (two model folders) on one real engine: the first trains and keeps the model as an
    image; the second copies that image's folder and never trains. Once the image is gone, a third
    trains again."""
    image = f"img-{uuid.uuid4().hex[:8]}"  # a key of its own: no other test's kept model is reused
    runs: list[str] = []
    monkeypatch.setattr(rehearsal_model.engine, "run_streamed", _writer(runs))
    try:
        first, second, third = (tmp_path / f"checkout{i}" / "abc123" for i in (1, 2, 3))
        monkeypatch.setattr(rehearsal_model, "model_dir", lambda _image: first)
        rehearsal_model.ensure_model(image, report=lambda line: None)
        assert len(runs) == 1 and engine.image_exists(rehearsal_model.model_image(image))

        said: list[str] = []
        monkeypatch.setattr(rehearsal_model, "model_dir", lambda _image: second)
        assert rehearsal_model.ensure_model(image, report=said.append) == second
        assert len(runs) == 1, "the second checkout trained again"
        shard = "model-00001-of-00001.safetensors"
        assert (second / shard).read_bytes() == (first / shard).read_bytes()
        assert (second / "config.json").read_text() == '{"rehearsal": true}'
        assert any("model copied from sglang-bundle/rehearsal-model:" in line for line in said), said
        assert not second.with_name(second.name + ".partial").exists()

        engine.remove_image_ref(rehearsal_model.model_image(image))
        monkeypatch.setattr(rehearsal_model, "model_dir", lambda _image: third)
        rehearsal_model.ensure_model(image, report=lambda line: None)
        assert len(runs) == 2
    finally:
        if engine.image_exists(rehearsal_model.model_image(image)):
            engine.remove_image_ref(rehearsal_model.model_image(image))
