"""The CPU engine rehearsal: what it changes in the rendered env of the real topology, so the compose
file's own SGLang command line runs the pinned SGLang 0.5.23 server on CPU.

Every SGLang server of the topology (found through the registry's services and their env prefix,
never by topology name) keeps its GPU command line, plus the CPU overrides below appended through
its <PREFIX>_EXTRA_ARGS, and its <PREFIX>_TP_SIZE lowered to what a 2-core box holds in time.
The rest (SGLANG_USE_CPU_ENGINE, thread binding, NCCL kept out, SGLANG_HOST_IP) is environment set
by the overlay compose/rehearsal-engine-<topology>.yaml. docs/rehearsal.md lists every difference;
tests/test_rehearsal_engine.py checks that list against compose's resolved config.
"""

from __future__ import annotations

from pathlib import Path

from bundle.rehearsal.shared import env as rehearsal
from bundle.topology import DECODE, Topology

# The CPU engine: SGLang's CPU device with its plain-PyTorch attention; the overlap scheduler needs
# CUDA streams. The KV pool and context are sized for a 1 M-parameter model in a few hundred MB
# (SGLang would otherwise size the pool from the host's free memory, shared by every container).
# --sleep-on-idle is SGLang's own switch for an idle scheduler to wait on its sockets: without it each
# scheduler polls in a loop and holds a core while idle ("each GPU would otherwise pin one thread at
# 100% CPU usage", SGLang's IdleSleeper). On a 2-core rehearsal host that was both cores (2026-12-04).
CPU_SERVER_ARGS = ("--device", "cpu", "--attention-backend", "torch_native", "--disable-overlap-schedule",
                   "--max-total-tokens", "8192", "--context-length", "2048", "--sleep-on-idle")
# Decode's retraction backup defaults to pinned host memory through cudaHostRegister.
CPU_DECODE_ARGS = ("--disaggregation-decode-retraction-backup", "cpu_tensor")
# TP 4 per role on 2 cores: about 213 s to ready alone (docs/rehearsal.md); TP 1 per server keeps a
# pd start within the 4 minutes the rehearsal promises on this box.
ENGINE_TP_SIZE = "1"
# NIXL's bundled UCX without GPUs: shared memory and TCP only (cuda_ipc/cuda_copy need a GPU).
ENGINE_UCX_TLS = "sm,self,tcp"

# A CPU start is minutes, not the simulator's seconds: health waits sized for it. The router's own
# command line stays the GPU host's (none of its variables here).
ENGINE_HEALTH = {
    "HEALTH_INTERVAL": "5s",
    "HEALTH_TIMEOUT": "25s",
    "HEALTH_RETRIES": "3",
    "HEALTH_START_PERIOD": "10m",
    "ROUTER_HEALTHCHECK_INTERVAL": "3s",
    "ROUTER_HEALTH_START_PERIOD": "10m",
    "STOP_GRACE_PERIOD": "10s",
    "ROUTER_STOP_GRACE_PERIOD": "20s",
}


def server_arg_overrides(topology: Topology, rendered_env: dict[str, str]) -> dict[str, str]:
    """<PREFIX>_EXTRA_ARGS and <PREFIX>_TP_SIZE of every server: the rendered value plus the CPU args."""
    values = {}
    for service in topology.servers:
        extra = [rendered_env.get(f"{service.env_prefix}_EXTRA_ARGS", "").strip(), *CPU_SERVER_ARGS]
        if service.role == DECODE:
            extra += CPU_DECODE_ARGS
        values[f"{service.env_prefix}_EXTRA_ARGS"] = " ".join(a for a in extra if a)
        values[f"{service.env_prefix}_TP_SIZE"] = ENGINE_TP_SIZE
    return values


def env_values(image: str, model_dir: Path) -> dict[str, str]:
    """What the engine rehearsal adds to (or overrides in) the rendered env file of the real topology;
    the per-server arguments are render's (server_arg_overrides, from the values it rendered)."""
    values = {"REHEARSAL_IMAGE": image, "MODEL_HOST_PATH": str(model_dir), "UCX_TLS": ENGINE_UCX_TLS}
    values.update(rehearsal.engine_grantable_limits())
    values.update(ENGINE_HEALTH)
    return values
