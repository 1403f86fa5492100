"""bundle.yaml's `slurm:` section, typed: what `bundle render|launch --target slurm` adds to a topology
(the allocation, the containers, the nodes of each server role). Compose ignores it.

The wing owns its section: its schema (config.schema.json) and defaults (defaults.yaml) sit beside this
file, the config loader adds them to the core's, and the core keeps the merged section as the schema
checked it (Deployment.wing_section); only this module gives it a type, so deleting the wing's folder
leaves nothing of Slurm in the core."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Mapping

from bundle.targets.slurm import SECTION

if TYPE_CHECKING:
    from bundle.config.model import Deployment


@dataclass(frozen=True)
class Slurm:
    partition: str | None
    account: str | None
    time_limit: str
    gpus_per_node: int
    gres: str  # the GPUs' generic resource name: --gres=<gres>:<count>
    container_image: str | None  # null: image.ref, else the lock's image
    model_path: str  # the model folder as the nodes see it (model.path unless given)
    jit_cache_root: str
    log_dir: str
    ucx_net_devices: tuple[str, ...]
    dist_init_port: int
    router_port: int
    # A server's config_key (("pd", "decode")) -> nodes per copy; a key not given here is one node.
    role_nodes: Mapping[tuple[str, ...], int]

    def nodes(self, config_key: tuple[str, ...]) -> int:
        return self.role_nodes.get(tuple(config_key), 1)

    @staticmethod
    def key_path(config_key: tuple[str, ...]) -> tuple[str, ...]:
        """Where a role's node count lives in bundle.yaml, for messages."""
        return ("slurm", *config_key, "nodes")




def of(dep: Deployment) -> Slurm:
    """The deployment's `slurm:` section, typed."""
    return build(dep.wing_section(SECTION), model_path=dep.model_path)


def build(section: Mapping, *, model_path: str) -> Slurm:
    """The typed section of a merged, schema-valid config (`model_path`: model.path, its model_path's default)."""
    role_nodes: dict[tuple[str, ...], int] = {}

    def walk(node: dict, key: tuple[str, ...]) -> None:
        # {tp4: {nodes: 1}, pd: {prefill: {nodes: 1}, ...}}: every mapping holding `nodes` is a role.
        for name, value in node.items():
            if isinstance(value, dict):
                if "nodes" in value:
                    role_nodes[key + (name,)] = int(value["nodes"])
                else:
                    walk(value, key + (name,))

    walk({k: v for k, v in section.items() if isinstance(v, dict)}, ())
    return Slurm(partition=section["partition"], account=section["account"], time_limit=str(section["time_limit"]),
                 gpus_per_node=section["gpus_per_node"], gres=section["gres"],
                 container_image=section["container_image"],
                 model_path=section["model_path"] or model_path,
                 jit_cache_root=section["jit_cache_root"], log_dir=section["log_dir"],
                 ucx_net_devices=tuple(section["ucx_net_devices"]), dist_init_port=section["dist_init_port"],
                 router_port=section["router_port"], role_nodes=MappingProxyType(role_nodes))
