"""An independent client against the CPU engine rehearsal's front door: inference-perf 0.7.0 (the client
llm-d's guides use; nobody here wrote it), offline (HF_HUB_OFFLINE=1, the rehearsal model's own tokenizer
folder), on the host through the published port of pd's router, the real SGLang servers on CPU behind it.
Every request must be served, and each with the usage counts the server reported (output tokens as asked:
ignore_eos). `bundle bench` then measures the same stack from inside the Docker network; both figures
are printed (docs/reading-a-bench.md says why they differ)."""

from __future__ import annotations

import json

import pytest

from bundle.cli import main
from bundle.config.loader import load_config
from bundle.stack import runstate
from tests import inference_perf_client as client
from tests.conftest import compose_project, missing, write_config
from tests.sim_process import free_port
from tests.test_inference_perf import served_with_usage

pytestmark = pytest.mark.docker

LAUNCH_S = 12 * 60
IN, OUT = 32, 32
STAGES = [(4, 1), (32, 8)]  # (requests, concurrency): bench_serving's 4 x C prompts at C=1 and C=8
CLIENT_S = 10 * 60


@pytest.fixture(scope="module")
def pd(tmp_path_factory, rehearsal_image):
    if not client.EXECUTABLE.is_file():
        missing(f"inference-perf in {client.VENV} (make install makes it with a CPython 3.12)")
    from bundle.rehearsal.engine.model import ensure_model

    ensure_model(rehearsal_image)
    folder = tmp_path_factory.mktemp("inference-perf")
    with pytest.MonkeyPatch.context() as patch, compose_project("iperf") as name:
        patch.setenv("BUNDLE_RUNS_DIR", str(folder / "runs"))
        port = free_port()
        config = write_config(folder, f"project: {name}\nnetwork:\n  front_port: {port}\n")
        assert main(["launch", "pd", "-c", str(config), "--rehearsal", "engine", "--timeout", f"{LAUNCH_S}s"]) == 0
        try:
            dep = load_config(config)
            yield {"config": config, "folder": folder, "port": port, "dep": dep,
                   "launch": runstate.load(dep.project_name("pd"))}
        finally:
            main(["down", "pd", "-c", str(config)])


@pytest.mark.timeout(LAUNCH_S + CLIENT_S + 6 * 60)
def test_inference_perf_gets_every_request_served_with_the_servers_usage_counts(pd, capsys):
    env = pd["launch"].env
    out = pd["folder"] / "reports"
    cfg = client.config(base_url=f"http://127.0.0.1:{pd['port']}", model=env["SERVED_MODEL_NAME"],
                        tokenizer=env["MODEL_HOST_PATH"], out=out, stages=STAGES, input_len=IN, output_len=OUT)
    done = client.run(cfg, pd["folder"], timeout=CLIENT_S)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    reports = client.reports(out)
    served_with_usage(reports, requests=sum(n for n, _ in STAGES), output_len=OUT)
    client_tput = {f"C={c}": round(reports[f"stage_{i}_lifecycle_metrics.json"]["successes"]["throughput"]
                                   ["output_tokens_per_sec"], 1) for i, (_, c) in enumerate(STAGES)}

    capsys.readouterr()
    assert main(["bench", "pd", "-c", str(pd["config"]), "--input-len", str(IN), "--output-len", str(OUT),
                 "--concurrency", *(str(c) for _, c in STAGES), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    ours = {lv["concurrency"]: lv["metrics"]["output_throughput"] for lv in record["levels"]}
    with capsys.disabled():
        print(f"\ninference-perf (host, published port) output tok/s: {client_tput}")
        print(f"bundle bench (bench_serving in the Docker network) output tok/s by C: {ours}")
