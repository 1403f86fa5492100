"""Shared fixtures. Outside CI a test whose dependency is missing here (the Docker engine, the
package index, a module of the dev install, a tool) skips, saying what is missing. Under CI (CI=true,
which `.ci/run` sets, or the older switches BUNDLE_REQUIRE_DOCKER=1 / BUNDLE_REQUIRE_NETWORK=1) each
of those skips is a failure naming what is missing: a CI run that skipped because the install is
broken would be green and prove nothing. Tests never call pytest.skip/importorskip themselves: they
call `missing`, `require_module` or `require_tool` below."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest

from bundle import modes
from bundle.config import loader
from bundle.rehearsal import registry as rehearsal_modes
from bundle.targets import sections

# The config loader stands below the wings: an entry point hands it their sections (bundle/cli.py does).
loader.install_sections(sections.SECTIONS)
modes.install(rehearsal_modes)

REPO = Path(__file__).resolve().parents[1]


def _engine_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                              timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _compose_works() -> bool:
    try:
        return subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def in_ci() -> bool:
    """The one switch: CI=true (what `.ci/run` and most CI services set) or the older per-kind
    switches, which `.ci/run` sets too."""
    return (os.environ.get("CI", "").lower() in ("1", "true", "yes")
            or os.environ.get("BUNDLE_REQUIRE_DOCKER") == "1")


def missing(what: str) -> NoReturn:
    """What this test needs is not here: skip, saying what; under CI fail instead, naming it."""
    if in_ci():
        pytest.fail(f"missing under CI: {what}", pytrace=False)
    pytest.skip(f"{what} (under CI=true this fails)")


def require_module(name: str, fix: str = "make install adds it") -> ModuleType:
    """`pytest.importorskip` that fails under CI: a broken dev install is a red run, not a green skip."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing(f"the module {name} cannot be imported ({exc}); {fix}")


def require_tool(name: str, fix: str) -> str:
    """The path of a command-line tool this test runs; missing: skip, or fail under CI."""
    path = shutil.which(name)
    if path is None:
        missing(f"the tool {name} is not on PATH; {fix}")
    return path


_ENGINE = None
# Session fixtures that build an image the first time a session asks for it, and how long a cold
# build may take on a busy 2-core machine (`bundle build --standin` alone: about 13 minutes; the
# rehearsal image: about 8).
BUILD_TIMEOUTS_S = {"standin_chain": 3600, "rehearsal_image": 1800}


# The tier clock (tests/tier_clock.py): on the controlling process only (under xdist the workers'
# reports reach it), and only for a tier the Makefile names.
_CLOCK = None


def pytest_sessionstart(session):
    global _CLOCK
    tier = os.environ.get("BUNDLE_TIER")
    if tier and os.environ.get("PYTEST_XDIST_WORKER") is None:
        from tests.tier_clock import TierClock

        _CLOCK = TierClock(tier)


def pytest_runtest_logreport(report):
    if _CLOCK is not None:
        _CLOCK.add(report.nodeid, report.when, report.duration)


def pytest_terminal_summary(terminalreporter):
    if _CLOCK is None:
        return
    from tests.tier_clock import append_record, compare, load_baseline

    record = _CLOCK.record()
    append_record(record)
    for line in compare(record, load_baseline()):
        terminalreporter.write_line(line, yellow=line.startswith("WARNING"))


def pytest_itemcollected(item):
    """Every test under tests/e2e/ is of the Docker tier, marked or not (before -m selects)."""
    if REPO / "tests" / "e2e" in Path(str(item.path)).parents and not item.get_closest_marker("docker"):
        item.add_marker(pytest.mark.docker)


@pytest.hookimpl(trylast=True)  # after -m/-k deselection: the first test left is the one that builds
def pytest_collection_modifyitems(config, items):
    _longest_modules_first(config, items)
    _skip_docker_tests_without_an_engine(config, items)
    _skip_network_tests_without_the_index(items)
    _time_for_the_builds(config, items)


def _package_index() -> str:
    """The index uv resolves against (`make lock`): its own setting, else PyPI."""
    return (os.environ.get("UV_DEFAULT_INDEX") or os.environ.get("UV_INDEX_URL")
            or "https://pypi.org/simple/")


def _index_answers(url: str) -> bool:
    """Whether the index is reachable: any HTTP answer counts (a 405 to HEAD, a 403 from a proxy: the
    network is there, and a test that then fails says why); only no answer at all (DNS, refused,
    timed out) is unreachable."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=10):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def _skip_network_tests_without_the_index(items):
    """`network` tests resolve against the live package index: skipped when it does not answer (offline,
    a firewall), unless under CI (CI=true or BUNDLE_REQUIRE_NETWORK=1), which fails the run instead."""
    needs = [item for item in items if item.get_closest_marker("network")]
    if not needs:
        return
    url = _package_index()
    if _index_answers(url):
        return
    if in_ci() or os.environ.get("BUNDLE_REQUIRE_NETWORK") == "1":
        raise pytest.UsageError(f"missing under CI: the package index {url} does not answer; "
                                f"{len(needs)} tests need it")
    skip = pytest.mark.skip(reason=f"the package index {url} does not answer (under CI=true this fails)")
    for item in needs:
        item.add_marker(skip)


def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` with three changes for modules that last minutes (tests/e2e/): the modules go in
    collection order (longest first, `_longest_modules_first`), not xdist's default by number of tests;
    the modules reading one session's shared stacks go to one worker as one unit (`UNITS`);
    and a worker gets its next module only when it is down to its last test, not with two still to
    run: a worker that took the next module early would hold it behind a test of ten minutes while
    the other worker sat idle. (The last test is held until the next module arrives: a worker runs a
    test only once it knows the one after it.)"""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LongestFirst(LoadFileScheduling):
        def __init__(self, config, log=None):
            super().__init__(config, log)
            config.option.loadscopereorder = False

        units: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            # A test of a work unit wider than its module: the unit the workers wrote down at collection
            # (`_units_of_shared_fixtures`; every worker has collected before the first scope is asked);
            # the rest go by module.
            if self.units is None:
                self.units = _read_units(config)
            return self.units.get(nodeid) or nodeid.split("::", 1)[0]

        def _reschedule(self, node):
            if node.shutting_down:
                return
            if not self.workqueue:
                node.shutdown()
                return
            if self._pending_of(self.assigned_work[node]) > 1:
                return
            self._assign_work_unit(node)

    return LongestFirst(config, log)


# Work units wider than a module: a session fixture -> the unit its tests form. The shared rehearsal
# stacks (tests/e2e/conftest.py) serve three modules; spread over both workers each worker launched its
# own tp4, pd and dp, and every stack stayed up, idle, to the session's end: an idle pd rehearsal holds
# about 8% of a core in health checks alone (3 containers, a probe every 2 s; 2026-12-06, kernel process
# accounting over 90 s). One unit launches each once, on one worker, and takes them down when it ends.
UNITS = {"shared_rehearsal": "shared-rehearsal"}
UNITS_FILE = "bundle_units_file"  # the workerinput key: where the workers write each test's unit


def pytest_configure_node(node):
    """xdist's controller, for each worker: the file the workers write the wider units to (the
    controller's scheduler knows only node ids; fixtures are known where the tests are collected)."""
    config = node.config
    if not hasattr(config, "_bundle_units_file"):
        import tempfile

        fd, path = tempfile.mkstemp(prefix="bundle-units-", suffix=".json")
        os.close(fd)
        config._bundle_units_file = path
        config.add_cleanup(lambda: Path(path).unlink(missing_ok=True))
    node.workerinput[UNITS_FILE] = config._bundle_units_file


def _read_units(config) -> dict[str, str]:
    import json

    path = getattr(config, "_bundle_units_file", None)
    try:
        return json.loads(Path(path).read_text() or "{}") if path else {}
    except (OSError, ValueError):
        return {}


def _units_of_shared_fixtures(config, items) -> dict:
    """Each test's work unit by node id: its module, or the unit of a shared fixture it uses. On an
    xdist worker the tests of a wider unit are written down for the controller's scheduler (every
    worker writes the same, atomically)."""
    units = {item.nodeid: next((name for fixture, name in UNITS.items()
                                if fixture in getattr(item, "fixturenames", ())), item.path) for item in items}
    path = getattr(config, "workerinput", {}).get(UNITS_FILE)
    if path:
        import json

        part = Path(f"{path}.{os.getpid()}")
        part.write_text(json.dumps({nodeid: unit for nodeid, unit in units.items() if isinstance(unit, str)}))
        os.replace(part, path)
    return units


def _bound(config, item) -> float:
    mark = item.get_closest_marker("timeout")
    return float(mark.args[0] if mark and mark.args else config.getini("timeout") or 0)


def _longest_modules_first(config, items):
    """Under pytest-xdist's `--dist loadfile` a worker takes the next module in collection order when
    it is free: a long module taken last leaves one worker busy and the other idle at the end. So the
    modules go in descending order of their longest test's bound (a test's timeout is its author's
    estimate of its length), each module's tests in their own order. Without xdist, order is untouched."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return
    units = _units_of_shared_fixtures(config, items)

    def unit(item):
        return units[item.nodeid]

    longest: dict = {}
    for item in items:
        longest[unit(item)] = max(longest.get(unit(item), 0.0), _bound(config, item))
    position = {key: i for i, key in enumerate(longest)}
    module = {path: i for i, path in enumerate(dict.fromkeys(item.path for item in items))}
    # While the images build beside the tier (tests/second-tier.sh): first the modules that start no
    # container (they run while the rehearsal image builds), then those standing on the rehearsal image,
    # last those standing on the whole chain (by then its build is done or nearly so).
    chain = {item.path for item in items if _waits_for_the_chain(item)}
    rehearsal = {item.path for item in items if _waits_for_the_rehearsal_image(item)}
    items.sort(key=lambda item: (item.path in chain, item.path in rehearsal, -longest[unit(item)], position[unit(item)],
                                 module[item.path]))


def _time_for_the_builds(config, items):
    """The first test (in run order) that asks for a building session fixture pays for the build: its
    own bound (its timeout mark, or the default) is raised by the build's; later tests keep theirs.
    Under pytest-xdist (`--dist loadfile`) each worker runs its own modules and any of them may be the
    one that builds or waits for the other's build: there the first such test of each module gets it."""
    workers = os.environ.get("PYTEST_XDIST_WORKER") is not None
    for fixture, seconds in BUILD_TIMEOUTS_S.items():
        needing = [item for item in items if fixture in getattr(item, "fixturenames", ())
                   or (fixture == "rehearsal_image" and _waits_for_the_rehearsal_image(item))]
        firsts = list({item.path: item for item in reversed(needing)}.values()) if workers else needing[:1]
        for first in firsts:
            first.add_marker(pytest.mark.timeout(seconds + _bound(config, first)), append=False)


# Set by tests/second-tier.sh while it builds the stand-in chain's upper layers (the real kernels
# layer: nvcc, about 15 minutes on 2 cores) beside the Docker tier: the file the build writes its exit
# status to when it ends, and its log.
CHAIN_BUILD_STATUS = "BUNDLE_CHAIN_BUILD_STATUS"
CHAIN_BUILD_LOG = "BUNDLE_CHAIN_BUILD_LOG"
# Set by tests/second-tier.sh while it builds the rehearsal image (and the chain's lower layers under
# it) in the background, before the upper layers: the file its exit status goes to. Until then only the
# tests that start no container run (the tier's `slow` and `network` ones: the kernels compiled on CPU,
# the docs in a browser, the simulator and the real router as processes); every `docker` test waits.
REHEARSAL_BUILD_STATUS = "BUNDLE_REHEARSAL_BUILD_STATUS"


def _waits_for_the_chain(item) -> bool:
    return bool(os.environ.get(CHAIN_BUILD_STATUS)) and "standin_chain" in getattr(item, "fixturenames", ())


def _waits_for_the_rehearsal_image(item) -> bool:
    return bool(os.environ.get(REHEARSAL_BUILD_STATUS)) and item.get_closest_marker("docker") is not None


_BUILDS_SEEN: set[str] = set()


def _wait_for_a_background_build(status_env: str, what: str) -> None:
    """Return once tests/second-tier.sh's background build named by `status_env` has ended; fail with
    its log's tail if it failed. The wait is bounded by the first such test's bound, which carries the
    build's (BUILD_TIMEOUTS_S)."""
    status = os.environ.get(status_env)
    if not status or status in _BUILDS_SEEN:
        return
    while not Path(status).exists():
        time.sleep(5)
    rc = Path(status).read_text().strip()
    if rc != "0":
        log = Path(os.environ.get(CHAIN_BUILD_LOG, ""))
        tail = log.read_text()[-3000:] if log.is_file() else "(no log)"
        pytest.fail(f"{what}'s background build failed (exit {rc}); its log ends:\n{tail}", pytrace=False)
    _BUILDS_SEEN.add(status)


def _wait_for_the_background_chain_build() -> None:
    _wait_for_a_background_build(CHAIN_BUILD_STATUS, "the stand-in chain")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before a `docker` test's fixtures: the rehearsal image it (or a launch it makes) stands on is
    built, by tests/second-tier.sh, not by this worker beside it."""
    if _waits_for_the_rehearsal_image(item):
        _wait_for_a_background_build(REHEARSAL_BUILD_STATUS, "the rehearsal image")


@contextmanager
def one_build_at_a_time(tmp_path_factory, name: str):
    """Held while a session fixture builds an image: pytest-xdist's workers are separate processes,
    each with its own session fixtures, and two of them building one tag at once would race on its
    tags. The lock file lies in the folder all workers of a run share; the second worker then finds
    the image built and reuses it."""
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    with FileLock(str(shared / f"{name}.build.lock")):
        yield


def _skip_docker_tests_without_an_engine(config, items):
    global _ENGINE
    needs = [item for item in items if item.get_closest_marker("docker")]
    if not needs:
        return
    if _ENGINE is None:
        _ENGINE = _engine_answers()
    if _ENGINE:
        return
    if in_ci():
        raise pytest.UsageError(f"missing under CI: no Docker engine answers; {len(needs)} tests need one")
    skip = pytest.mark.skip(reason="no Docker engine (under CI=true this fails)")
    for item in needs:
        item.add_marker(skip)


@pytest.fixture(scope="session")
def standin_chain(tmp_path_factory) -> dict[str, str]:
    """The stand-in image chain of this checkout's lock, built once per session by the README's own
    command (`bundle build --standin`: every layer, framework included, on Debian bookworm + CPython
    3.12; each layer whose tag exists is reused, so a warm engine answers in seconds). Shared by the
    audit, the Dockerfile tests and anything built FROM one of its layers. Returns each layer's tag by
    name, and "image": the runtime layer's `lock-<hash>` tag."""
    from bundle.images import build
    from bundle.lock import load_lock

    _wait_for_the_background_chain_build()  # then the build below finds every layer and returns at once
    with one_build_at_a_time(tmp_path_factory, "standin-chain"):
        proc = subprocess.run([str(REPO / ".venv" / "bin" / "bundle"), "build", "--standin"], cwd=REPO,
                              capture_output=True, text=True, timeout=3600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    plan = build.make_plan(load_lock(), standin=True)
    return {**{lp.name: lp.tag for lp in plan.layers}, "image": plan.layers[-1].extra_tags[0]}


@pytest.fixture(scope="session")
def compose_available() -> bool:
    return _compose_works()


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def runs_dir(tmp_path, monkeypatch) -> Path:
    """Every test writes its rendered env files and reports under its own folder."""
    path = tmp_path / "runs"
    monkeypatch.setenv("BUNDLE_RUNS_DIR", str(path))
    return path


def write_config(tmp_path: Path, text: str, name: str = "bundle.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def render_for(dep, topology: str, **kwargs):
    """The one render a command makes, with the checkout's lock for the image and its hash."""
    from bundle import topology as registry
    from bundle.lock import load_lock
    from bundle.render.compose import render

    lock = load_lock()
    return render(dep, registry.get(topology), image=lock.image_ref, lock_hash=lock.hash, **kwargs)


def checked(dep, topology: str, *, require_model: bool = False):
    """The rules' findings for one topology of `dep`, as every command gets them."""
    from bundle.rules.check import check

    return check(dep, render_for(dep, topology), require_model=require_model)


@contextmanager
def compose_project(prefix: str):
    """A unique project name for a test; afterwards every topology of it is taken down with
    `down -v --remove-orphans`, whatever a failed assertion left behind."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    try:
        yield name
    finally:
        for topology in ("tp4", "pd", "dp"):
            subprocess.run(["docker", "compose", "-p", f"{name}-{topology}", "down", "-v", "--remove-orphans",
                            "-t", "2"], capture_output=True)


@pytest.fixture(scope="session")
def docs_site(tmp_path_factory) -> Path:
    """The documentation site of this checkout, built once per test process (mkdocs build --strict, the
    reference pages generated): every test that reads the built site shares it (read-only; a test that
    plants something copies it first)."""
    from tests.docs_site_build import build_site

    out = tmp_path_factory.mktemp("site")
    build_site(REPO, out)
    return out
