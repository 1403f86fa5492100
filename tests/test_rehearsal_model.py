"""The CPU engine rehearsal's model is trained once per image, even when two launches (or two test
workers) ask for it at the same moment: the second waits for the first and reuses its folder. The
training container is replaced by a writer that takes as long as it is told (the real training runs
in the engine e2e tests)."""

from __future__ import annotations

import threading
import time

from bundle.images import rehearsal_model


def test_two_launches_at_once_train_the_model_once_and_both_get_it(tmp_path, monkeypatch):
    out = tmp_path / "rehearsal-model" / "abc123"
    monkeypatch.setattr(rehearsal_model, "model_dir", lambda image: out)
    runs = []

    def training(image, command, *, name, volumes, on_line):
        runs.append(name)
        work = next(host for host, inside, _ in volumes if inside == "/out")
        time.sleep(1.0)  # long enough for the second caller to arrive while it runs
        (work / "config.json").write_text("{}")
        (work / "model.safetensors").write_bytes(b"weights")
        return 0, []

    monkeypatch.setattr(rehearsal_model.engine, "run_streamed", training)
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
    assert got[0] == got[1] == out and (out / "model.safetensors").read_bytes() == b"weights"
    assert any("another process is training this model" in line for line in said[1]), said[1]
    assert not out.with_name(out.name + ".partial").exists()
