"""`bundle model pin|fetch|check`: the checkpoint in the lock (docker/lock.toml [model]).

- pin [--revision SHA]: read the repo's files at that revision (default: main) from the Hub and
  write the revision and the manifest into the lock (then commit it).
- fetch [--path DIR]: download exactly the pinned revision into model.path, then check it.
- check [--path DIR] [--sha256]: compare the model folder with the manifest (sizes of the shards;
  their sha256 too with --sha256), naming each file that differs.

pin and fetch reach the Hugging Face Hub (HF_TOKEN for a gated repo) with huggingface_hub from the
image; they have not run on the development machine, which cannot reach the Hub.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bundle.commands._common import add_config_argument

HELP = "the checkpoint pinned in docker/lock.toml: pin its manifest, fetch it, check a model folder"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = sub.add_parser("pin", help="write the repo's revision and file manifest into docker/lock.toml")
    p.add_argument("--revision", metavar="SHA", help="the commit to pin (default: the Hub's main)")
    p.add_argument("--image", metavar="REF", help="image whose huggingface_hub is used (default: the lock's)")
    f = sub.add_parser("fetch", help="download exactly the pinned revision into the model folder")
    f.add_argument("--path", metavar="DIR", help="where (default: model.path of the config)")
    f.add_argument("--image", metavar="REF", help="image whose huggingface_hub is used (default: the lock's)")
    add_config_argument(f)
    c = sub.add_parser("check", help="compare the model folder with the lock's manifest")
    c.add_argument("--path", metavar="DIR", help="the folder (default: model.path of the config)")
    c.add_argument("--sha256", action="store_true", help="also hash every shard (minutes for ~150 GB)")
    add_config_argument(c)


def run(args: argparse.Namespace) -> int:
    from bundle.commands._common import load
    from bundle.errors import EXIT_CONFIG, BundleError
    from bundle.images import model
    from bundle.images.lock import load_lock

    lock = load_lock()
    pin = model.model_pin(lock)
    if pin is None:
        raise BundleError(f"{lock.path}: no [model] table", exit_code=EXIT_CONFIG,
                          hint='add [model] with repo = "deepseek-ai/DeepSeek-V4-Flash", revision = "" and '
                               "[model.files], then `bundle model pin`")
    image = getattr(args, "image", None) or lock.image_ref
    if args.action == "pin":
        revision, manifest = model.pin(image, pin, args.revision)
        model.write_pin(lock, revision, manifest)
        print(f"pinned {pin.repo}@{revision}: {len(manifest)} files written to {lock.path} [model.files]")
        return 0
    folder = Path(args.path or load(args).model_path).expanduser()
    if args.action == "fetch":
        differences = model.fetch(image, pin, folder)
    else:
        if not pin.pinned:
            raise BundleError(f"{lock.path}: model.revision is not pinned for {pin.repo}: nothing to check against",
                              exit_code=EXIT_CONFIG, hint="run `bundle model pin` on a host that reaches the Hub")
        differences = model.check_folder(folder, pin, shards_sha256=args.sha256)
    for d in differences:
        print(f"{folder}/{d.path}: {d.what}")
    if differences:
        print(f"{len(differences)} file(s) differ from {pin.repo}@{pin.revision[:12]} (docker/lock.toml [model.files])")
        return 1
    print(f"{folder} matches {pin.repo}@{pin.revision[:12]} ({len(pin.files)} files)")
    return 0
