"""The CPU engine rehearsal's model: a tiny Llama trained here, inside the rehearsal image, offline and
deterministically (docker/engine/train_model.py), so its greedy answers pass every smoke check on the
real SGLang server. Cached on the host under .cache/rehearsal-model/<hash of its inputs>: the trainer,
the simulator's tokenizer folder it starts from, and the image (its torch and transformers); and kept
in the Docker engine as the image sglang-bundle/rehearsal-model:<the same hash>, from which another
checkout copies it instead of training again.

Its config.json carries registry.MODEL_MARKER; launch and doctor refuse such a folder outside a rehearsal,
so it never reaches a GPU host.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import time
from pathlib import Path

from bundle.errors import Failed
from bundle.paths import docker_dir, project_root
from bundle.rehearsal.shared.env import simulated_model_dir
from bundle.stack import engine

TRAINER_IN_IMAGE = "/opt/bundle/engine/train_model.py"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "bench-sharegpt.json")
MODEL_IMAGE_REPOSITORY = "sglang-bundle/rehearsal-model"
# The trainer saves in shards with an index (as a real checkpoint): the index is written last.
WEIGHTS_INDEX = "model.safetensors.index.json"


def model_key(image: str) -> str:
    digest = hashlib.sha256()
    trainer = docker_dir() / "engine" / "train_model.py"
    digest.update(trainer.read_bytes() + b"\0" + image.encode() + b"\0")
    for name in TOKENIZER_FILES:
        digest.update(name.encode() + b"\0" + (simulated_model_dir() / name).read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def model_dir(image: str) -> Path:
    return project_root() / ".cache" / "rehearsal-model" / model_key(image)


def model_image(image: str) -> str:
    """The trained folder, also kept in the Docker engine as a one-layer image beside the rehearsal
    image it was trained in: another checkout on this engine (a fresh clone, CI's next run) copies it
    in seconds instead of training for minutes, and it goes when the engine's images go."""
    return f"{MODEL_IMAGE_REPOSITORY}:{model_key(image)}"


def ensure_model(image: str, *, report=print) -> Path:
    """The trained model folder for `image`, trained now (a minute or a few on a busy box) if missing."""
    out = model_dir(image)
    if (out / WEIGHTS_INDEX).exists():
        return out
    with _one_trainer(out, report):
        if (out / WEIGHTS_INDEX).exists():  # trained by the process that held the lock before us
            return out
        if _copied_from_engine(image, out, report):
            return out
        _train(image, out, report)
        engine.folder_to_image(out, model_image(image), label=f"the rehearsal model trained in {image}")
        report(f"rehearsal: model kept in the engine as {model_image(image)}")
        return out


def _copied_from_engine(image: str, out: Path, report) -> bool:
    """The model another checkout trained on this engine (model_image), copied to `out`: False when the
    engine has none, or what it has lacks the weights (then it is trained again)."""
    ref = model_image(image)
    if not engine.image_exists(ref):
        return False
    work = _fresh_partial(out)
    engine.folder_from_image(ref, work)
    if not (work / WEIGHTS_INDEX).is_file():
        shutil.rmtree(work, ignore_errors=True)
        report(f"rehearsal: {ref} holds no {WEIGHTS_INDEX}; training again")
        return False
    work.rename(out)
    report(f"rehearsal: model copied from {ref}: {out}")
    return True


def _fresh_partial(out: Path) -> Path:
    """Where `out` is assembled before it is renamed into place (an earlier attempt's leftovers gone)."""
    work = out.with_name(out.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    return work


@contextlib.contextmanager
def _one_trainer(out: Path, report):
    """Held while `out` is trained: two launches (or two test workers) at once would otherwise both
    train into the one partial folder, and the second one's clean-up pulled the folder from under the
    first one's container (seen 2026-12-04: `FileNotFoundError: '/out/config.json'`). The second waits,
    then finds the model trained. The kernel drops the lock if its holder dies."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.with_name(out.name + ".lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            report("rehearsal: another process is training this model; waiting for it ...")
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _train(image: str, out: Path, report) -> Path:
    work = _fresh_partial(out)
    work.mkdir(parents=True)
    report(f"rehearsal: training the CPU engine's model in {image} (one thread, fixed seeds) ...")
    start = time.monotonic()
    # A name of its own, so an interrupted training is found and removed (`docker rm -f`) by name.
    def shown(line: str) -> None:
        if line.startswith("train:"):
            report(f"  {line[len('train: '):]} ({time.monotonic() - start:.0f} s)")

    code, tail = engine.run_streamed(image, ["python", TRAINER_IN_IMAGE, "/tokenizer", "/out"],
                                     name=f"rehearsal-model-train-{out.name}-{os.getpid()}",
                                     volumes=[(simulated_model_dir(), "/tokenizer", "ro"), (work, "/out", "rw")],
                                     on_line=shown)
    if code != 0:
        raise Failed("training the rehearsal model failed:\n  " + "\n  ".join(tail),
                     hint=f"see {docker_dir() / 'engine' / 'train_model.py'}; the partial folder is {work}")
    work.rename(out)
    report(f"rehearsal: model ready in {time.monotonic() - start:.0f} s: {out}")
    return out
