"""Where DSpark speculative decoding (levers.speculative: dspark; extra_args may not set
--speculative-algorithm, a lever flag) cannot run, refused before anything starts, each with the key
to change:

- a disaggregated topology (pd): DSpark with PD disaggregation is blocked (sglang #33083). In the
  pinned 0.5.23 the DSpark PD path is written for DeepSeek-V4.1's layouts ("DeepSeek-V4.1 DSpark PD
  requires ...", arg_groups/deepseek_v4_hook.py) and DSpark's deferred KV commit refuses PD
  ("PD disaggregation transfers KV between steps", dspark_components/dspark_deferred_commit.py);
- DP-attention (--enable-dp-attention): blocked with DSpark (sglang #33083); 0.5.23 also demands
  --enable-dp-lm-head and attention TP 1 for a MoE draft (_handle_dspark, dspark_worker_v2.py);
- a checkpoint without a DSpark draft: SGLang stops at start ("DSpark dense speculative decoding
  requires setting --speculative-draft-model-path"), minutes into a launch. The checkpoint is the
  folder compose mounts (MODEL_HOST_PATH: model.path, or a no-GPU mode's model).

tests/test_contract_defaults.py reads each of these from the pinned SGLang's source.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bundle import topology as registry
from bundle.config import levers
from bundle.config.model import Deployment, Role
from bundle.rules import argspec, checkpoint, guards

DP_ATTENTION_FLAG = "--enable-dp-attention"
PD_ISSUE = guards.cite(guards.DSPARK)


def check(dep: Deployment, rendered, roles: list[Role], error: Callable[[tuple, str], None]) -> None:
    if dep.levers.speculative != "dspark":
        return
    origin = ("levers", "speculative")
    topology = rendered.topology
    if topology.disaggregated:
        error(origin, f"DSpark speculative decoding is blocked with PD disaggregation ({PD_ISSUE}; the pinned "
                      f"SGLang's DSpark PD path is DeepSeek-V4.1's); use levers.speculative: mtp in "
                      f"{topology.name} (prefill and decode get the same settings), or dspark in a topology "
                      f"without disaggregation ({', '.join(_undisaggregated())})")
    _check_dp_attention(roles, error)
    _check_checkpoint(dep, rendered, origin, error)


def _undisaggregated() -> list[str]:
    return [t.name for t in registry.TOPOLOGIES.values() if not t.disaggregated]


def _check_dp_attention(roles: list[Role], error) -> None:
    dp_flags = set(argspec.aliases(argspec.SERVER_SPEC).get(DP_ATTENTION_FLAG, (DP_ATTENTION_FLAG,)))
    seen = set()
    for role in roles:
        if role.key_path in seen:  # dp's replicas share one section
            continue
        seen.add(role.key_path)
        for index, token in enumerate(role.extra_args):
            if str(token).split("=", 1)[0] in dp_flags:
                error(role.key_path + ("extra_args", index),
                      f"DSpark speculative decoding is blocked with DP-attention ({PD_ISSUE}); drop "
                      f"{DP_ATTENTION_FLAG}, or use levers.speculative: mtp with DP-attention")


def _check_checkpoint(dep: Deployment, rendered, origin: tuple, error) -> None:
    folder = Path(rendered.env.get("MODEL_HOST_PATH") or dep.model_path).expanduser()
    held = checkpoint.identify(folder)
    if held is not None and not held.refused and not held.has_draft:
        error(origin, f"{folder} holds {held.describe()}: DSpark needs the draft shipped with "
                      f"{checkpoint.V0731} (config.json {'/'.join(checkpoint.DSPARK_DRAFT_KEYS[:2])}..., or a "
                      f"{checkpoint.DSPARK_SUBFOLDER}/ subfolder); point model.path at {checkpoint.V0731} "
                      f"(`bundle model fetch --checkpoint 0731`), or use levers.speculative: mtp")
    # No config.json (the model may live only on the GPU host): the model check reports the folder;
    # a V4.1 checkpoint: the model check refuses it with its own words.
    for key in ("sps_table", "confidence_sts"):
        rel = getattr(dep.levers.dspark, key)
        if not rel:
            continue
        path = Path(rel)
        if path.is_absolute() or ".." in path.parts:
            error(("levers", "dspark", key), f"{rel!r} must be a path inside the model folder (it is mounted "
                                             f"at {levers.MODEL_MOUNT}), e.g. dspark/{key}.json")
        elif held is not None and not (folder / path).is_file():
            error(("levers", "dspark", key), f"{folder / path} does not exist; copy the file into the model "
                                             f"folder, or set levers.dspark.{key}: null")
