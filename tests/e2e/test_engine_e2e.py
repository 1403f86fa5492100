"""The CPU engine rehearsal end to end: the pinned SGLang server itself on CPU, behind the real smg, in
all three topologies of ONE project with the same trained model, one after the other (the tests of
this module run in order on one worker; each takes its topology down before the next starts).

- tp4: launch, smoke (every check), down.
- pd: launched once for the checks that only read it: smoke (every check, the PD path proven by SGLang's
  own counters), bench C=1 and C=8 with tiny sizes and `--profile 1` (SGLang's own profiler on both
  servers, CPU activities, reduced by kernel family), an independent client (inference-perf) through the
  published port beside `bundle bench`; then decode's server process SIGKILLed FROM THE HOST (tests/e2e/host_faults.py: a `docker kill` is an operator's stop, for
  which Docker skips the restart policy), the restart policy bringing it back, smoke again, down.
- dp: launch (two replicas), smoke (each replica generates a request sent straight to it, and smg
  lists both healthy), replica-0's server SIGKILLed from the host while replica-1 serves the front
  door, replica-0 back by its restart policy, smoke again, down leaving nothing.
- The greedy answers of the first smokes compared explicitly: a topology that gave none fails.
"""

from __future__ import annotations

import json
import subprocess
import time
from contextlib import contextmanager
from types import SimpleNamespace

import pytest
import requests

from bundle import topology as registry
from bundle.cli import main
from bundle.config.loader import load_config
from bundle.stack import docker, runstate
from bundle.stack.frontdoor import front_door
from tests import inference_perf_client as iperf
from tests.conftest import compose_project, missing, write_config
from tests.e2e.host_faults import sigkill
from tests.sim_process import free_port
from tests.test_inference_perf import served_with_usage

pytestmark = pytest.mark.docker
# Each wait's bound, and each test's timeout the sum of its waits (plus 2 min for the smokes and down):
# alone on 2 cores pd is ready in about 3.5 min, but `make test` runs another module beside it.
LAUNCH_S = 12 * 60
LAUNCH = ["--rehearsal", "engine", "--timeout", f"{LAUNCH_S}s"]
BENCH_LEVEL_S = 3 * 60  # each of the two tiny levels (8 output tokens)
BACK_S = 6 * 60  # a SIGKILLed server restarted by Docker and healthy again (the model loads again)
SMOKE_AGAIN_S = 2 * 60  # the router takes the restarted server back within its health checks
REST_S = 2 * 60
MODEL_S = 5 * 60  # the engine's model trained for this image, once (132 s from a fresh clone), then cached
TOPOLOGIES = ("tp4", "pd", "dp")
# topology -> {prompt: greedy answer} of its first smoke; filled by the tests as they run
ANSWERS: dict[str, dict[str, str]] = {}


@pytest.fixture(scope="module")
def engine(tmp_path_factory, rehearsal_image):
    """One project for the three topologies (runs/<project>-<topology>/), one runs folder, one config,
    and the model all three serve, trained first (the first test's bound carries MODEL_S for it)."""
    from bundle.rehearsal.engine.model import ensure_model

    ensure_model(rehearsal_image)
    folder = tmp_path_factory.mktemp("engine")
    with pytest.MonkeyPatch.context() as patch, compose_project("engine") as name:
        patch.setenv("BUNDLE_RUNS_DIR", str(folder / "runs"))
        config = write_config(folder, f"project: {name}\nnetwork:\n  front_port: {free_port()}\n")
        yield SimpleNamespace(project=name, config=config)


def _smoke(engine, topology, capsys) -> dict:
    capsys.readouterr()
    code = main(["smoke", topology, "-c", str(engine.config), "--json"])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    return json.loads(out)


def _keep_answers(topology: str, report: dict) -> None:
    ANSWERS[topology] = {a["prompt"]: a["answer"] for a in report["answers"] if a.get("answer") is not None}


def _inspect(project: str, service: str) -> dict:
    ids = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={project}",
                          "--filter", f"label=com.docker.compose.service={service}"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert ids, f"no {service} container in {project}"
    return json.loads(subprocess.run(["docker", "inspect", ids[0]], capture_output=True, text=True,
                                     check=True).stdout)[0]


def _back_healthy(project: str, service: str, restarts_before: int) -> None:
    deadline = time.monotonic() + BACK_S
    while True:
        now = _inspect(project, service)
        if now["RestartCount"] > restarts_before and now["State"].get("Health", {}).get("Status") == "healthy":
            return
        assert time.monotonic() < deadline, f"{service} did not come back healthy in {BACK_S} s: {now['State']}"
        time.sleep(5)


def _smoke_passes_again(engine, topology: str, capsys) -> dict:
    deadline = time.monotonic() + SMOKE_AGAIN_S
    while True:
        capsys.readouterr()
        code = main(["smoke", topology, "-c", str(engine.config), "--json"])
        out = capsys.readouterr().out
        if code == 0:
            return json.loads(out)
        assert time.monotonic() < deadline, f"smoke did not pass again within {SMOKE_AGAIN_S} s:\n{out[-3000:]}"
        time.sleep(5)


def _down_leaves_nothing(engine, topology: str) -> None:
    assert main(["down", topology, "-c", str(engine.config)]) == 0
    assert docker.project_containers(f"{engine.project}-{topology}") == []


@contextmanager
def _launched(engine, topology: str):
    """`bundle launch` of one topology; a test that fails midway still takes it down, so the next
    topology of the project finds the front port and the CPU free."""
    assert main(["launch", topology, "-c", str(engine.config), *LAUNCH]) == 0
    try:
        yield
    except BaseException:
        main(["down", topology, "-c", str(engine.config)])
        raise


def _loaded_in_shards_with_sglangs_bar(engine, launch_out: str) -> None:
    """The rehearsal model is an indexed multi-shard checkpoint, as DeepSeek-V4-Flash's is: SGLang's own
    loader printed its tqdm bar over every shard ("\\r" rewrites), and the readiness wait's reader takes
    the server's real log, bar and all, to its milestones in order. Which milestones the launch printed
    depends on where its polls fell (a 3-shard load on an idle machine is over between two polls), so the
    milestones are read here from the whole log by the same reader and table the wait uses."""
    import re

    from bundle.log_lines import stamped_lines
    from bundle.stack import milestones

    assert "ready in " in launch_out, launch_out[-2000:]
    server = f"{engine.project}-tp4-server-1"
    log = subprocess.run(["docker", "logs", "--timestamps", server], capture_output=True)
    raw = (log.stdout + log.stderr).decode(errors="replace")
    assert any("shards" in line and "\r" in line for line in raw.split("\n")), raw[-3000:]
    lines = stamped_lines(raw)
    assert all(line.stamp is not None for line in lines if line.complete), "a stamped line lost its stamp"
    bars = [line.text for line in lines if "shards" in line.text and re.search(r"\b(\d+)/\1 \[", line.text)]
    assert bars and int(re.search(r"\b(\d+)/\1 \[", bars[-1]).group(1)) >= 2, bars[-1:]
    passed = []
    for line in sorted((line for line in lines if line.stamp is not None), key=lambda line: line.stamp):
        index = milestones.reached(line.text, milestones.SERVER_MILESTONES)
        if index > (passed[-1] if passed else -1):
            passed.append(index)
    names = [milestones.SERVER_MILESTONES[i][0] for i in passed]
    assert names[:2] == ["loading weights", "weights loaded"] and names[-1] == "serving", names


@pytest.mark.timeout(MODEL_S + LAUNCH_S + REST_S)
def test_tp4_on_the_real_engine_serves_and_smokes(engine, capsys):
    with _launched(engine, "tp4"):
        _loaded_in_shards_with_sglangs_bar(engine, capsys.readouterr().out)
        report = _smoke(engine, "tp4", capsys)
        assert all(s["ok"] for s in report["steps"]), report["steps"]
        assert any(a.get("answer") and "Paris" in a["answer"] for a in report["answers"])
        _keep_answers("tp4", report)
        _down_leaves_nothing(engine, "tp4")


@pytest.fixture(scope="module")
def pd_stack(engine):
    """pd launched once for the checks that only read it (smoke and the KV path, bench, the independent
    client), in that order; the SIGKILL test breaks it last and takes it down. Whatever a failure left
    up is taken down at the module's end, before nothing: dp's test comes after and needs the port."""
    main(["down", "tp4", "-c", str(engine.config)])  # a failed tp4 test may have left it up
    assert main(["launch", "pd", "-c", str(engine.config), *LAUNCH]) == 0
    yield f"{engine.project}-pd"
    main(["down", "pd", "-c", str(engine.config)])


@pytest.mark.timeout(LAUNCH_S + REST_S)
def test_pd_on_the_real_engine_serves_and_smokes_through_the_kv_path(engine, pd_stack, capsys):
    report = _smoke(engine, "pd", capsys)
    steps = {s["name"]: s for s in report["steps"]}
    assert all(s["ok"] for s in report["steps"]), steps
    _keep_answers("pd", report)
    # The KV path proven by SGLang's own records, not only by the answers: decode received a KV cache
    # for every request it served (smoke's step fails otherwise), over NIXL (decode's own log).
    assert 'decode_transferred' in steps["through prefill and decode"]["detail"]
    decode_log = subprocess.run(["docker", "logs", _inspect(pd_stack, "decode")["Id"]], capture_output=True,
                                text=True, check=True)
    assert "NIXL KVManager initialized with backend: UCX" in decode_log.stdout + decode_log.stderr


@pytest.mark.timeout(3 * BENCH_LEVEL_S + REST_S)
def test_pd_on_the_real_engine_benches_every_level_and_profiles_one(engine, pd_stack, capsys):
    capsys.readouterr()
    assert main(["bench", "pd", "-c", str(engine.config), "--concurrency", "1", "8", "--input-len", "16",
                 "--output-len", "8", "--prompts-per-concurrency", "1", "--level-timeout", f"{BENCH_LEVEL_S}s",
                 "--profile", "1", "--json"]) == 0
    captured = capsys.readouterr()
    record = json.loads(captured.out)  # the run's JSON record (indented: the whole of stdout)
    assert [lv["status"] for lv in record["levels"]] == ["ok", "ok"]
    assert all(lv["metrics"]["completed"] == lv["concurrency"] for lv in record["levels"])
    _assert_profiled(pd_stack, record, captured.err)


# inference-perf 0.7.0 (the client llm-d's guides use; nobody here wrote it), offline (HF_HUB_OFFLINE=1,
# the rehearsal model's own tokenizer folder), on the host through the published port of pd's router.
IPERF_IN, IPERF_OUT = 32, 32
IPERF_STAGES = [(4, 1), (32, 8)]  # (requests, concurrency): bench_serving's 4 x C prompts at C=1 and C=8
IPERF_S = 10 * 60


@pytest.mark.timeout(IPERF_S + 2 * BENCH_LEVEL_S + REST_S)
def test_inference_perf_gets_every_request_served_with_the_servers_usage_counts(engine, pd_stack, tmp_path,
                                                                                capsys):
    """An independent client against the same pd front door: every request served, each with the usage
    counts the server reported (output tokens as asked: ignore_eos). `bundle bench` then measures the same
    stack from inside the Docker network; both figures are printed (docs/reading-a-bench.md says why
    they differ)."""
    if not iperf.EXECUTABLE.is_file():
        missing(f"inference-perf in {iperf.VENV} (make install makes it with a CPython 3.12)")
    dep = load_config(engine.config)
    env = runstate.load(pd_stack).env
    out = tmp_path / "reports"
    cfg = iperf.config(base_url=f"http://127.0.0.1:{dep.network.front_port}", model=env["SERVED_MODEL_NAME"],
                       tokenizer=env["MODEL_HOST_PATH"], out=out, stages=IPERF_STAGES, input_len=IPERF_IN,
                       output_len=IPERF_OUT)
    done = iperf.run(cfg, tmp_path, timeout=IPERF_S)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    reports = iperf.reports(out)
    served_with_usage(reports, requests=sum(n for n, _ in IPERF_STAGES), output_len=IPERF_OUT)
    client_tput = {f"C={c}": round(reports[f"stage_{i}_lifecycle_metrics.json"]["successes"]["throughput"]
                                   ["output_tokens_per_sec"], 1) for i, (_, c) in enumerate(IPERF_STAGES)}

    capsys.readouterr()
    assert main(["bench", "pd", "-c", str(engine.config), "--input-len", str(IPERF_IN), "--output-len",
                 str(IPERF_OUT), "--concurrency", *(str(c) for _, c in IPERF_STAGES), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    ours = {lv["concurrency"]: lv["metrics"]["output_throughput"] for lv in record["levels"]}
    with capsys.disabled():
        print(f"\ninference-perf (host, published port) output tok/s: {client_tput}")
        print(f"bundle bench (bench_serving in the Docker network) output tok/s by C: {ours}")


@pytest.mark.timeout(BACK_S + SMOKE_AGAIN_S + REST_S)
def test_pd_on_the_real_engine_recovers_from_a_sigkill(engine, pd_stack, capsys):
    restarts = _inspect(pd_stack, "decode")["RestartCount"]
    sigkill(pd_stack, "decode")  # a crash to Docker (exit 137), so its restart policy acts
    _back_healthy(pd_stack, "decode", restarts)
    _smoke_passes_again(engine, "pd", capsys)
    _down_leaves_nothing(engine, "pd")


def _assert_profiled(project: str, record: dict, printed: str) -> None:
    """`bench --profile 1`: SGLang's profiler on both servers, CPU activities (the servers say they run
    on CPU), decode's steps by kernel family from the pinned SGLang's own spans and frames, each table
    printed with the level's floor's parts and named not comparable with it (CPU ops, a CPU figure)."""
    from bundle.stack import runstate

    run_id = record["run_id"]
    profile = json.loads((runstate.project_dir(project) / run_id / "profile" / "profile.json").read_text())
    servers = {s["role"]: s for s in profile["servers"]}
    assert set(servers) == {"prefill", "decode"} and profile["level"]["status"] == "ok", profile
    for server in servers.values():
        assert server["activities"] == ["CPU"] and server["problem"] is None and server["profiles"], server
    decode = servers["decode"]["profiles"][0]
    assert decode["activities"] == "CPU" and decode["stage"] == "DECODE" and decode["steps"] >= 2, decode
    families = {f["family"] for f in decode["families"]}
    assert {"dense GEMM", "attention and indexer", "sampling"} <= families, families
    assert all(f["libraries"] for f in decode["families"])
    assert servers["prefill"]["profiles"][0]["stage"] == "EXTEND"  # pd's prefill server never decodes
    assert "CPU ops (torch's profiler, CPU activities only" in printed and "idle gaps" in printed
    rows = [line.split("  ")[1] for line in printed.splitlines() if line.startswith("  ") and len(line.split("  ")) > 2]
    assert all(f["family"] in rows for f in decode["families"]), printed  # a printed row per family of the table
    # every level scored as a CPU figure, its floor's parts in the record; the profiled level's printed
    # under each table, which is set against it only as not comparable (no ratio)
    parts = {lv["concurrency"]: lv["limit"]["parts"]["line"] for lv in record["levels"]}
    assert set(parts) == {1, 8} and all(line.startswith("weights ") and ", KV " in line for line in parts.values())
    against = [line for line in printed.splitlines() if line.startswith("  against the floor")]
    assert len(against) == sum(len(s["profiles"]) for s in servers.values()), printed  # one under each table
    assert all(line.endswith(f"; the floor of C=1: {parts[1]}") for line in against), against
    assert any("not comparable: CPU ops' self time on the host" in line for line in against), against
    assert any("not comparable: the floor is a decode step's; this table is of EXTEND steps" in line
               for line in against), against


# 231 s (2026-12-03, on two workers): two SGLang replicas on CPU, a SIGKILL and a model reload.
@pytest.mark.timeout(LAUNCH_S + BACK_S + SMOKE_AGAIN_S + REST_S)
def test_dp_on_the_real_engine_serves_from_both_replicas_and_one_survives_the_others_sigkill(engine, capsys):
    dp_project = f"{engine.project}-dp"
    with _launched(engine, "dp"):
        report = _smoke(engine, "dp", capsys)
        steps = {s["name"]: s for s in report["steps"]}
        assert all(s["ok"] for s in report["steps"]), steps
        served = steps["every replica serves"]["detail"]
        assert "replica-0 generated" in served and "replica-1 generated" in served and "lists those 2 healthy" in served
        _keep_answers("dp", report)

        # replica-0's server SIGKILLed: while it is down (restarting, its model loading again: a minute on
        # CPU), the front door answers from replica-1.
        dep = load_config(engine.config)
        front, check = front_door(dep, registry.get("dp")), dep.smoke.checks[0]  # what the model was trained on
        restarts = _inspect(dp_project, "replica-0")["RestartCount"]
        sigkill(dp_project, "replica-0")
        killed = time.monotonic()
        served_while_down = None
        while served_while_down is None and time.monotonic() - killed < SMOKE_AGAIN_S:
            # The router may still try replica-0 once before its health check takes it out of rotation.
            reply = requests.post(front.chat_url, json=front.chat_body(check.prompt, max_tokens=dep.smoke.max_tokens),
                                  headers=front.headers, timeout=60)
            down = _inspect(dp_project, "replica-0")["State"].get("Health", {}).get("Status") != "healthy"
            if reply.status_code == 200 and down:
                served_while_down = time.monotonic() - killed
                assert check.expect in reply.json()["choices"][0]["message"]["content"]
            time.sleep(1)
        assert served_while_down is not None, "the front door did not answer while replica-0 was down"
        print(f"dp: the front door answered from replica-1 {served_while_down:.1f} s after replica-0's SIGKILL")

        _back_healthy(dp_project, "replica-0", restarts)
        again = _smoke_passes_again(engine, "dp", capsys)
        served = {s["name"]: s for s in again["steps"]}["every replica serves"]["detail"]
        assert "replica-0 generated" in served and "replica-1 generated" in served, served
        _down_leaves_nothing(engine, "dp")


def test_the_topologies_give_the_same_greedy_answers(request):
    """Same image, same model, greedy: the topology must not change a token. Compared here, explicitly,
    for every topology whose test this session selected (all three in `make test` and when this file
    runs whole): a selected topology whose test failed has no answers, and that is a failure, not a
    pass."""
    selected = [t for t in TOPOLOGIES
                if any(item.name.startswith(f"test_{t}_on_the_real_engine") for item in request.session.items)]
    assert "tp4" in selected and len(selected) >= 2, f"only {selected} selected: nothing to compare"
    missing = [t for t in selected if not ANSWERS.get(t)]
    assert not missing, f"no smoke answers from {missing}: nothing to compare them with"
    reference = ANSWERS["tp4"]
    for topology in selected[1:]:
        assert set(ANSWERS[topology]) == set(reference), (topology, sorted(ANSWERS[topology]), sorted(reference))
        differ = {p: (reference[p], ANSWERS[topology][p]) for p in reference if ANSWERS[topology][p] != reference[p]}
        assert not differ, f"{topology} answered differently from tp4: {differ}"
