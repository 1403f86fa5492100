"""`make test`'s second tier (tests/second-tier.sh) as the scheduler it is: the rehearsal image, then the
chain's upper layers, built in the background beside the tier, the tier told where each build's status lands, the build's cgroup
held to half the cores for its length and put back, a failed build turning a green tier red, and a tier that never
waits for the build stopping it. Driven with stand-ins for the venv's `python` and `bundle` (a real
`bundle build --standin` is the Docker tier's) and the real script; and the tier clock's verdict against a recorded table."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.tier_clock import compare

SCRIPT = REPO / "tests" / "second-tier.sh"


def _bin(tmp_path: Path, build: str, rehearsal: str) -> Path:
    """A venv bin folder whose `python -m bundle.rehearsal.shared.image image` prints a tag and whose
    `bundle build --standin` runs `build` (shell); and a `docker` whose `info` answers (the script's
    check for an engine), first on PATH."""
    folder = tmp_path / "bin"
    folder.mkdir()
    # `docker image inspect` finds an image only where IMAGES_PRESENT says so (a warm engine).
    (folder / "docker").write_text('#!/bin/sh\n[ "$1" = info ] && exit 0\n'
                                   '[ "$1 $2" = "image inspect" ] && [ -n "$IMAGES_PRESENT" ]\n')
    # Its progress goes to stderr, the tag to stdout (as bundle.rehearsal.shared.image's command line;
    # `tag` only prints it).
    (folder / "python").write_text('#!/bin/sh\n[ "$3" = tag ] || { ' + rehearsal + '\n}\necho sglang-bundle/rehearsal:test\n')
    # `bundle build --standin --dry-run`: the plan, each layer built or to build as IMAGES_PRESENT says.
    (folder / "bundle").write_text('#!/bin/bash\nif [ "$3" = --dry-run ]; then\n'
                                   '  state="(to build)"; [ -n "$IMAGES_PRESENT" ] && state="(built: will be reused)"\n'
                                   '  for l in base pd kernels; do echo "$l x $state"; done; exit 0\nfi\n'
                                   + textwrap.dedent(build))
    for f in folder.iterdir():
        f.chmod(0o755)
    return folder


REHEARSAL_BUILT = 'echo "rehearsal: built sglang-bundle/rehearsal:test in 1 s" >&2'


def _run(tmp_path: Path, build: str, tier: str, timeout: int = 60,
         rehearsal: str = REHEARSAL_BUILT, present: bool = False) -> subprocess.CompletedProcess:
    knob = tmp_path / "cg" / "buildkit"
    knob.mkdir(parents=True)
    (knob / "cpuset.cpus").write_text("0-7\n")
    (knob / "cpu.shares").write_text("1024\n")
    folder = _bin(tmp_path, build, rehearsal)
    # Not the statuses or worker count of a tier this one may run inside (the suite's own second tier).
    inherited = {k: v for k, v in os.environ.items()
                 if not k.startswith(("BUNDLE_CHAIN_BUILD", "BUNDLE_REHEARSAL_BUILD", "PYTEST_XDIST_AUTO"))}
    env = {**inherited, "PATH": f"{folder}:{os.environ['PATH']}", "BIN": str(folder), "CHAIN_CGROUPS": str(knob), "KNOB": str(knob / "cpuset.cpus"),
           "TMPDIR": str(tmp_path),  # the script's work folder (its status file and log) goes there
           "IMAGES_PRESENT": "1" if present else "", "TEST_WORKERS": "2", "WARM_TEST_WORKERS": "3"}
    return subprocess.run(["bash", str(SCRIPT), "bash", "-c", tier], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.timeout(120)
def test_the_tier_waits_for_the_background_build_held_to_half_the_cores_then_put_back(tmp_path):
    build = """
        echo "[4/6] kernels   building x" ; sleep 0.5
        echo "on cores $(cat "$KNOB") at weight $(cat "$(dirname "$KNOB")/cpu.shares") while building" >"$(dirname "$KNOB")/seen"
        echo "[4/6] kernels   built   x in 2 s"
    """
    # The tier: wait for the status the way the standin_chain fixture does, then report it.
    tier = 'while [ ! -e "$BUNDLE_CHAIN_BUILD_STATUS" ]; do sleep 0.2; done; echo "tier saw status $(cat "$BUNDLE_CHAIN_BUILD_STATUS")"'
    proc = _run(tmp_path, build, tier)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "tier saw status 0" in proc.stdout
    assert "[chain] [4/6] kernels   built   x in 2 s" in proc.stdout  # the layer lines are shown
    assert "its RUN steps on half the cores" in proc.stdout
    # Half the cores, the last ones (nproc here): the kernels layer's parallel jobs come from them.
    cores = os.cpu_count()
    half = max(1, cores // 2) if cores > 1 else 1
    expected = f"{cores - half}-{cores - 1}"
    # First on them: 8 times a container's weight.
    assert (tmp_path / "cg" / "buildkit" / "seen").read_text().strip() == f"on cores {expected} at weight 8192 while building"
    assert (tmp_path / "cg" / "buildkit" / "cpuset.cpus").read_text().strip() == "0-7"  # put back
    assert (tmp_path / "cg" / "buildkit" / "cpu.shares").read_text().strip() == "1024"


@pytest.mark.timeout(120)
def test_the_docker_tests_wait_for_the_rehearsal_image_only_which_is_built_before_the_upper_layers(tmp_path):
    # The upper layers take long: the tier's docker tests must not wait for them, only for step 1.
    build = 'echo "[4/6] kernels   building x"; sleep 5; echo "[4/6] kernels   built   x in 5 s"\n'
    tier = ('while [ ! -e "$BUNDLE_REHEARSAL_BUILD_STATUS" ]; do sleep 0.1; done; '
            'echo "rehearsal status $(cat "$BUNDLE_REHEARSAL_BUILD_STATUS"), chain done: $(test -e "$BUNDLE_CHAIN_BUILD_STATUS" && echo yes || echo no)"; '
            'while [ ! -e "$BUNDLE_CHAIN_BUILD_STATUS" ]; do sleep 0.2; done')
    proc = _run(tmp_path, build, tier)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rehearsal status 0, chain done: no" in proc.stdout
    lines = proc.stdout.splitlines()
    # Its progress shown as it came, once, before the upper layers' lines.
    assert lines.count("[chain] rehearsal: built sglang-bundle/rehearsal:test in 1 s") == 1
    assert lines.index("[chain] rehearsal: built sglang-bundle/rehearsal:test in 1 s") < lines.index(
        "[chain] [4/6] kernels   built   x in 5 s")


@pytest.mark.timeout(120)
def test_a_failed_rehearsal_image_fails_every_waiter_and_builds_nothing_above_it(tmp_path):
    rehearsal = 'echo "rehearsal: pip: no matching distribution" >&2; exit 4'
    build = 'touch "$(dirname "$KNOB")/upper-built"\n'
    tier = ('while [ ! -e "$BUNDLE_CHAIN_BUILD_STATUS" ]; do sleep 0.1; done; '
            'echo "statuses $(cat "$BUNDLE_REHEARSAL_BUILD_STATUS") $(cat "$BUNDLE_CHAIN_BUILD_STATUS")"')
    proc = _run(tmp_path, build, tier, rehearsal=rehearsal)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the tier passed; the build did not
    assert "statuses 4 4" in proc.stdout and "[chain] rehearsal: pip: no matching distribution" in proc.stdout
    assert not (tmp_path / "cg" / "buildkit" / "upper-built").exists()


@pytest.mark.timeout(120)
def test_a_failed_build_makes_a_green_tier_red_and_shows_its_log(tmp_path):
    build = 'echo "[4/6] kernels   building x"; echo "nvcc fatal: out of memory"; exit 3\n'
    tier = 'while [ ! -e "$BUNDLE_CHAIN_BUILD_STATUS" ]; do sleep 0.2; done; exit 0'
    proc = _run(tmp_path, build, tier)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "the build failed (exit 3)" in proc.stdout and "nvcc fatal: out of memory" in proc.stdout


@pytest.mark.timeout(120)
def test_a_tier_that_never_waits_stops_the_build_and_keeps_its_own_exit_code(tmp_path):
    build = 'echo "[4/6] kernels   building x"; sleep 600\n'
    proc = _run(tmp_path, build, "exit 0", timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no selected test needed the upper layers: stopping their build" in proc.stdout
    # Stopped mid-build, the knobs go back all the same.
    assert (tmp_path / "cg" / "buildkit" / "cpuset.cpus").read_text().strip() == "0-7"


@pytest.mark.timeout(120)
def test_on_a_warm_engine_nothing_builds_no_test_waits_and_the_tier_has_the_warm_worker_count(tmp_path):
    build = 'touch "$(dirname "$KNOB")/built"\n'
    tier = ('echo "statuses: [${BUNDLE_REHEARSAL_BUILD_STATUS:-none}] [${BUNDLE_CHAIN_BUILD_STATUS:-none}]'
            ' on $PYTEST_XDIST_AUTO_NUM_WORKERS workers"')
    rehearsal = 'touch "$(dirname "$KNOB")/rehearsal-built"'
    warm = _run(tmp_path / "warm", build, tier, rehearsal=rehearsal, present=True)
    assert warm.returncode == 0, warm.stdout + warm.stderr
    assert "statuses: [none] [none] on 3 workers" in warm.stdout  # WARM_TEST_WORKERS: nothing builds beside it
    assert "every image the tier stands on is built (the stand-in chain and sglang-bundle/rehearsal:test)" in warm.stdout
    assert not any((tmp_path / "warm" / "cg" / "buildkit" / name).exists() for name in ("built", "rehearsal-built"))
    # The same tier on an engine missing a layer: both builds run and the tier is told where they land.
    cold = _run(tmp_path / "cold", build, tier + '; while [ ! -e "$BUNDLE_CHAIN_BUILD_STATUS" ]; do sleep 0.1; done',
                rehearsal=rehearsal)
    assert cold.returncode == 0, cold.stdout + cold.stderr
    assert "statuses: [none]" not in cold.stdout and " on 2 workers" in cold.stdout
    assert all((tmp_path / "cold" / "cg" / "buildkit" / name).exists() for name in ("built", "rehearsal-built"))


def _record(seconds: float, modules: dict[str, float]) -> dict:
    return {"phase": "tier:docker", "seconds": seconds, "tests": 160, "modules": modules}


BASELINE = {"margin": 0.25, "tiers": {"docker": {"seconds": 1200, "tests": 160, "measured": "2026-12-06",
                                                  "modules": {"tests/e2e/a.py": 300, "tests/e2e/b.py": 100}}}}


def test_the_tier_clock_warns_naming_the_modules_that_grew_when_over_the_margin():
    lines = compare(_record(1600, {"tests/e2e/a.py": 310, "tests/e2e/b.py": 420, "tests/e2e/new.py": 90}), BASELINE)
    assert lines[0].startswith("tier clock: the docker tier took 26.7 min (160 tests) against 20.0 min recorded")
    assert lines[1].startswith("WARNING: the docker tier is 33% over its recorded time (margin 25%")
    # Biggest growth first; a module the record never had counts whole.
    assert "tests/e2e/b.py +320 s, tests/e2e/new.py +90 s, tests/e2e/a.py +10 s" in lines[1]


def test_the_tier_clock_only_reports_within_the_margin_and_without_a_record():
    assert len(compare(_record(1450, {"tests/e2e/a.py": 300}), BASELINE)) == 1
    fresh = compare(_record(1450, {}), {"tiers": {}})
    assert len(fresh) == 1 and "no recorded figure" in fresh[0]


_SERIAL = itertools.count()


class _Item:
    def __init__(self, path: str, timeout: float, fixtures: tuple[str, ...] = (), docker: bool = True):
        self.path, self.fixturenames, self._timeout, self._docker = Path(path), fixtures, timeout, docker
        self.nodeid = f"{path}::test_{next(_SERIAL)}"

    def get_closest_marker(self, name):
        if name == "timeout":
            return pytest.mark.timeout(self._timeout).mark
        return pytest.mark.docker.mark if name == "docker" and self._docker else None


class _Config:
    @staticmethod
    def getini(name):
        return 300


def test_while_the_images_build_the_containerless_modules_go_first_the_chains_last_each_longest_first(monkeypatch):
    from tests.conftest import _longest_modules_first

    def order(build_running: bool) -> list[str]:
        items = [_Item("audit.py", 1500, ("standin_chain",)), _Item("quick.py", 60), _Item("engine.py", 900),
                 _Item("dockerfiles.py", 600, ("standin_chain",)), _Item("engine.py", 120),
                 _Item("browser.py", 200, docker=False), _Item("kernels.py", 400, docker=False)]
        monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
        for var in ("BUNDLE_CHAIN_BUILD_STATUS", "BUNDLE_REHEARSAL_BUILD_STATUS"):
            if build_running:
                monkeypatch.setenv(var, "/tmp/status")
            else:
                monkeypatch.delenv(var, raising=False)
        _longest_modules_first(_Config(), items)
        return [item.path.name for item in items]

    assert order(True) == ["kernels.py", "browser.py", "engine.py", "engine.py", "quick.py", "audit.py",
                           "dockerfiles.py"]
    assert order(False) == ["audit.py", "engine.py", "engine.py", "dockerfiles.py", "kernels.py", "browser.py",
                            "quick.py"]


def test_the_modules_reading_the_shared_stacks_are_one_unit_placed_by_its_longest_test(monkeypatch):
    from tests.conftest import _longest_modules_first

    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    for var in ("BUNDLE_CHAIN_BUILD_STATUS", "BUNDLE_REHEARSAL_BUILD_STATUS"):
        monkeypatch.delenv(var, raising=False)
    items = [_Item("bench.py", 600, ("shared_rehearsal",)), _Item("engine.py", 1200), _Item("rehearsal.py", 900,
             ("shared_rehearsal",)), _Item("rehearsal.py", 600), _Item("quick.py", 60),
             _Item("smoke.py", 300, ("shared_rehearsal",))]
    _longest_modules_first(_Config(), items)
    # The unit's longest test is 900 s: after engine's 1200, before the rest; its modules together, in
    # their collection order; rehearsal.py's test that reads no shared stack is its module's own unit.
    assert [(item.path.name, bool(item.fixturenames)) for item in items] == [
        ("engine.py", False), ("bench.py", True), ("rehearsal.py", True), ("smoke.py", True), ("rehearsal.py", False),
        ("quick.py", False)]


PLANTED_CONFTEST = """
import os
import pytest
from tests.conftest import pytest_configure_node, pytest_xdist_make_scheduler  # noqa: F401  the suite's own
from tests.conftest import _longest_modules_first

@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    _longest_modules_first(config, items)

@pytest.fixture(scope="session")
def shared_rehearsal():
    return "stacks"

@pytest.fixture(autouse=True)
def _log(request):
    with open(os.environ["RUN_LOG"], "a") as f:
        f.write(f"{os.environ['PYTEST_XDIST_WORKER']} {request.node.path.name} {request.node.name}\\n")
"""


@pytest.mark.timeout(120)
def test_under_xdist_the_shared_stacks_unit_runs_whole_on_one_worker_in_a_row(tmp_path):
    """The real pytest-xdist with the suite's scheduler, on a planted suite: the three modules reading
    the shared stacks run on one worker, back to back, while the other worker takes the rest."""
    (tmp_path / "conftest.py").write_text(PLANTED_CONFTEST)
    reader = "import time\ndef test_{n}(shared_rehearsal):\n    time.sleep(0.5)\n"
    other = "import time, pytest\n@pytest.mark.timeout({t})\ndef test_alone():\n    time.sleep({s})\n"
    for name in ("bench", "rehearsal", "smoke"):
        (tmp_path / f"test_{name}.py").write_text("".join(reader.format(n=n) for n in range(3)))
    (tmp_path / "test_engine.py").write_text(other.format(t=1200, s=2))
    (tmp_path / "test_quick.py").write_text(other.format(t=60, s=0.2))
    (tmp_path / "test_slow.py").write_text(other.format(t=900, s=1))
    log = tmp_path / "run.log"
    env = {**os.environ, "PYTHONPATH": str(REPO), "RUN_LOG": str(log), "PYTEST_XDIST_AUTO_NUM_WORKERS": "2"}
    env.pop("PYTEST_XDIST_WORKER", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2", "--dist",
                           "loadfile", "-o", "timeout=300", str(tmp_path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=110)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = [line.split() for line in log.read_text().splitlines()]
    readers = [i for i, (_, module, _) in enumerate(runs) if module in ("test_bench.py", "test_rehearsal.py",
                                                                         "test_smoke.py")]
    assert len(readers) == 9 and len({runs[i][0] for i in readers}) == 1, runs
    worker = runs[readers[0]][0]
    on_it = [module for w, module, _ in runs if w == worker]
    first = on_it.index("test_bench.py")
    assert on_it[first:first + 9] == ["test_bench.py"] * 3 + ["test_rehearsal.py"] * 3 + ["test_smoke.py"] * 3, on_it


def test_a_docker_test_waits_for_the_rehearsal_images_status_and_fails_with_the_logs_tail(tmp_path, monkeypatch):
    from tests import conftest

    status, log = tmp_path / "rehearsal-status", tmp_path / "build.log"
    log.write_text("step 3/9: pip install\nERROR: no space left on device\n")
    monkeypatch.setenv("BUNDLE_REHEARSAL_BUILD_STATUS", str(status))
    monkeypatch.setenv("BUNDLE_CHAIN_BUILD_LOG", str(log))
    monkeypatch.setattr(conftest, "_BUILDS_SEEN", set())
    assert not conftest._waits_for_the_rehearsal_image(_Item("browser.py", 60, docker=False))
    assert conftest._waits_for_the_rehearsal_image(_Item("engine.py", 60))
    status.write_text("2\n")
    with pytest.raises(pytest.fail.Exception, match="the rehearsal image's background build failed .exit 2.(.|\n)*no space left"):
        conftest.pytest_runtest_setup(_Item("engine.py", 60))
    status.write_text("0\n")
    conftest.pytest_runtest_setup(_Item("engine.py", 60))  # built: no wait, no failure


def test_the_tier_clock_keeps_the_longest_tests_each_modules_start_and_how_busy_the_cores_were(tmp_path, monkeypatch):
    from tests import tier_clock

    stat = tmp_path / "stat"
    # user nice system idle iowait ...: 60 busy of 100 at the start.
    stat.write_text("cpu  40 0 20 30 10 0 0 0 0 0\ncpu0 1 2 3 4\n")
    monkeypatch.setattr(tier_clock, "cpu_ticks", lambda: tier_clock._read(stat))
    clock = tier_clock.TierClock("docker", cpu_at_start=tier_clock._read(stat))
    for nodeid, when, seconds in [("a.py::slow", "setup", 2.0), ("a.py::slow", "call", 30.0),
                                  ("b.py::quick", "call", 1.0), ("a.py::other", "call", 5.0)]:
        clock.add(nodeid, when, seconds)
    # 100 more ticks, 25 of them busy: the cores were a quarter busy during the tier.
    stat.write_text("cpu  55 0 30 90 25 0 0 0 0 0\n")
    record = clock.record()
    assert record["cpu_busy"] == 0.25
    assert list(record["longest_tests"].items()) == [("a.py::slow", 32.0), ("a.py::other", 5.0), ("b.py::quick", 1.0)]
    assert set(record["started"]) == {"a.py", "b.py"} and record["modules"] == {"a.py": 37.0, "b.py": 1.0}
    assert tier_clock._read(tmp_path / "missing") is None
