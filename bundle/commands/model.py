"""`bundle model pin|fetch|check`: the checkpoint in the lock (docker/lock.toml [model]).

- pin [--checkpoint original|0731] [--revision SHA]: read the repo's files at that revision (default:
  main) from the Hub and write the revision and the manifest into the lock (then commit it).
- fetch [--checkpoint original|0731] [--path DIR]: download exactly the pinned revision into
  model.path, then check it.
- check [--path DIR] [--sha256]: say which checkpoint the folder holds (DeepSeek-V4-Flash or -0731,
  with or without a DSpark draft, from its config.json and files), then compare it with that
  checkpoint's manifest (sizes of the shards; their sha256 too with --sha256), naming each file that
  differs.

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
    _checkpoint_argument(p)
    p.add_argument("--image", metavar="REF", help="image whose huggingface_hub is used (default: the lock's)")
    f = sub.add_parser("fetch", help="download exactly the pinned revision into the model folder")
    f.add_argument("--path", metavar="DIR", help="where (default: model.path of the config)")
    _checkpoint_argument(f)
    f.add_argument("--image", metavar="REF", help="image whose huggingface_hub is used (default: the lock's)")
    add_config_argument(f)
    c = sub.add_parser("check", help="compare the model folder with the lock's manifest")
    c.add_argument("--path", metavar="DIR", help="the folder (default: model.path of the config)")
    c.add_argument("--sha256", action="store_true", help="also hash every shard (minutes for ~150 GB)")
    add_config_argument(c)


def _checkpoint_argument(parser: argparse.ArgumentParser) -> None:
    from bundle.service.model import CHECKPOINT_TABLES, DEFAULT_CHECKPOINT

    parser.add_argument("--checkpoint", choices=sorted(CHECKPOINT_TABLES), default=DEFAULT_CHECKPOINT,
                        help="original: DeepSeek-V4-Flash ([model], the default); 0731: DeepSeek-V4-Flash-0731 "
                             "with its DSpark draft ([model_0731])")


def run(args: argparse.Namespace) -> int:
    from bundle.service import model as service
    from bundle.service.model import DEFAULT_CHECKPOINT

    # check has no --checkpoint (the folder names its own), pin no --path, no -c and no --sha256.
    request = service.ModelRequest(checkpoint=getattr(args, "checkpoint", None) or DEFAULT_CHECKPOINT,
                                   path=Path(args.path) if getattr(args, "path", None) else None,
                                   config=getattr(args, "config", None), revision=getattr(args, "revision", None),
                                   image=getattr(args, "image", None), sha256=getattr(args, "sha256", False))
    if args.action == "pin":
        pinned = service.pin(request)
        found = pinned.checkpoint
        print(f"pinned {found.pin.repo}@{pinned.revision}: {pinned.files} files written to {found.lock.path} "
              f"[{found.table}.files]")
        return 0
    if args.action == "fetch":
        return _print(service.fetch(request, report=print))
    identified = service.identify(request)
    info = identified.info
    print(f"{identified.checkpoint.folder} holds " + (info.describe() if info else "no readable config.json"))
    if identified.refused:
        print(identified.refused)
        return 1
    return _print(service.compare(request, identified))


def _print(compared) -> int:
    found = compared.checkpoint
    folder, pin = found.folder, found.pin
    for d in compared.differences:
        print(f"{folder}/{d.path}: {d.what}")
    if compared.differences:
        print(f"{len(compared.differences)} file(s) differ from {pin.repo}@{pin.revision[:12]} "
              f"(docker/lock.toml [{found.table}.files])")
        return 1
    print(f"{folder} matches {pin.repo}@{pin.revision[:12]} ({len(pin.files)} files)")
    return 0
