"""Regenerate the /server_info samples the attestation tests read, from the pinned SGLang itself.

    .venv/bin/python tests/data/server_info/make_samples.py

Each sample is what `GET /server_info` returns: `ServerArgs.resolved_dict()` of the arguments the
compose files and the levers give each server (parsed by SGLang's own `prepare_server_args`), plus
the keys http_server.server_info adds. Resolution itself needs a GPU and the model, so the one field
it fills that attestation reads, `cuda_graph_config`, is set to the record SGLang's resolution
produces (`CudaGraphConfig` with a backend per phase, serialised by server_args._plain); `version`
comes from the installed SGLang. The API key in the samples is a marker the tests look for in
everything the driver writes.
"""

from __future__ import annotations

import json
from pathlib import Path

import sglang
from sglang.srt.model_executor.cuda_graph_config import CudaGraphConfig, PhaseConfig
from sglang.srt.server_args import _plain, prepare_server_args

HERE = Path(__file__).resolve().parent
API_KEY = "sk-SAMPLE-KEY-must-never-be-printed"
COMMON = ["--model-path", "/model", "--served-model-name", "deepseek-v4-flash", "--host", "0.0.0.0",
          "--port", "30000", "--tp-size", "4", "--kv-cache-dtype", "auto", "--moe-runner-backend", "marlin",
          "--disable-custom-all-reduce", "--api-key", API_KEY]
SAMPLES = {
    "tp4.json": COMMON + ["--base-gpu-id", "0"],
    "pd-prefill.json": COMMON + ["--base-gpu-id", "0", "--disaggregation-mode", "prefill",
                                 "--disaggregation-transfer-backend", "nixl",
                                 "--disaggregation-bootstrap-port", "8998"],
    "pd-decode.json": COMMON + ["--base-gpu-id", "4", "--disaggregation-mode", "decode",
                                "--disaggregation-transfer-backend", "nixl",
                                "--disaggregation-bootstrap-port", "8998"],
}


def sample(argv: list[str]) -> dict:
    args = prepare_server_args(argv)
    info = args.resolved_dict()
    info["cuda_graph_config"] = _plain(CudaGraphConfig(decode=PhaseConfig(backend="full", max_bs=256),
                                                       prefill=PhaseConfig(backend="breakable")))
    info.update({"launch_command": "python3 -m sglang.launch_server " + " ".join(
        "<redacted>" if a == API_KEY else a for a in argv), "version": sglang.__version__,
        "frontend": "python", "startup_time": 0.0, "internal_states": [{"last_gen_throughput": 0.0}]})
    return info


if __name__ == "__main__":
    for name, argv in SAMPLES.items():
        (HERE / name).write_text(json.dumps(sample(argv), indent=1, sort_keys=True, default=str) + "\n")
        print("wrote", HERE / name)
