"""A Docker engine of a test's own: a `dockerd` host process on its own socket, data root, exec root
(its own supervised containerd under it) and pid file, inside a network namespace of its own (its
bridges, iptables rules, address pool and published ports live there), so nothing it does can reach or
clash with the machine's engine. In the host's namespace a second dockerd deletes the machine's docker0
at its start when given `--bridge none` (seen here), shares it otherwise, rewrites the machine's DOCKER
iptables chains, or with --iptables=false sees its bridges' traffic dropped by the host FORWARD policy.
A test runs the bundle in that namespace (`run_bundle`: the CLI, as users run it) with DOCKER_HOST at
its socket (the docker CLI, compose and python-on-whales all honour it), stops it with SIGTERM as a
reboot's shutdown does, and starts it again on the same data root.

    with own_engine() as eng:                   # started; stopped and its folders removed afterwards
        eng.run_bundle("launch", "pd", ...)
        eng.stop()                              # SIGTERM, waits for dockerd to exit
        eng.start()                             # the same data root again

The image the rehearsal runs there (small_rehearsal_image) is built in that engine from the project's
own Debian root plus the worker simulator, smg and the packages they import, copied from the dev
install (the full rehearsal image holds SGLang's 11 GB closure: too slow to copy for this)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import missing, require_tool

REPO = Path(__file__).resolve().parents[2]
BASE_IMAGE = "sglang-bundle/debian-root:bookworm"  # docker/debian-root.sh's default tag
# What the worker simulator and smg import (bundle/rehearsal/simulator; `python3 -m smg.launch_router`), with their
# dependencies; and the pinned SGLang itself without its own (torch and the rest): the simulator reports
# the SGLang installed beside it, which the launch's attestation holds against the lock (its
# server-argument parser needs torch: the simulator's fallback parses). SGLang's 10,500 files go in as one
# zip on PYTHONPATH (pure Python: imports and importlib.metadata read it there): on fuse-overlayfs a file
# costs, and they were two thirds of the image's build time.
SIMULATOR_AND_ROUTER = ("fastapi", "uvicorn", "aiohttp", "orjson", "tokenizers", "prometheus-client", "tqdm", "smg")
ZIPPED = ("sglang",)
BRIDGE, BRIDGE_ADDRESS = "bde0", "10.213.250.1/24"  # inside the engine's own network namespace
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 150  # the router's drain and the servers' stop grace come first


@dataclass
class OwnEngine:
    root: Path  # short: containerd's socket path under it must stay below 108 bytes
    log: Path  # outside `root`: kept for a failed test to read
    netns: str  # its network namespace (`ip netns`), made by own_engine()
    proc: subprocess.Popen | None = None  # the running dockerd (`nsenter` execs it: the same process)
    # time.monotonic() by which every command must have ended: a stuck one fails the test while there is
    # still time to clean up (pytest-timeout's end skips `finally` and would leave this engine running).
    deadline: float = float("inf")

    def time_left(self, wanted: float) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the test's time budget for its own engine is spent")
        return min(wanted, left)

    @property
    def host(self) -> str:
        return f"unix://{self.root}/docker.sock"

    @property
    def pid_file(self) -> Path:
        return self.root / "docker.pid"

    def env(self) -> dict[str, str]:
        return {**os.environ, "DOCKER_HOST": self.host}

    def docker(self, *args: str, check: bool = True, extra_env: dict[str, str] | None = None,
               timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(["docker", *args], env={**self.env(), **(extra_env or {})}, capture_output=True,
                              text=True, check=check, timeout=self.time_left(timeout))

    def start(self) -> None:
        config = self.root / "daemon.json"
        config.write_text("{}")  # never the machine's /etc/docker/daemon.json (its data root, its bridge)
        storage = _machine_storage_driver()
        cmd = [*self.in_netns(),
               "dockerd", "--config-file", str(config), "--host", self.host,
               "--data-root", str(self.root / "data"), "--exec-root", str(self.root / "exec"),
               "--pidfile", str(self.pid_file), "--bridge", BRIDGE,
               "--cgroup-parent", f"/{self.root.name}"] + (["--storage-driver", storage] if storage else [])
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while self.docker("version", check=False).returncode != 0:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"own dockerd did not answer (exit code {self.proc.poll()}):\n{self.log_tail()}")
            time.sleep(0.25)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> float:
        """SIGTERM to dockerd, as a reboot's shutdown sends it; returns the seconds it took to exit."""
        began = time.monotonic()
        if self.proc is None or self.proc.poll() is not None:
            return 0.0
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"own dockerd still up {timeout:.0f} s after SIGTERM:\n{self.log_tail()}") from None
        return time.monotonic() - began

    def in_netns(self) -> list[str]:
        """The command prefix that runs a program in the engine's network namespace, nothing else changed
        (`ip netns exec` would also mount a fresh /sys, where dockerd then finds no cgroup)."""
        return ["nsenter", f"--net=/run/netns/{self.netns}"]

    def run_bundle(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        """`bundle ARGS` in the engine's network namespace (its published ports are there), DOCKER_HOST
        at its socket; stdout and stderr together."""
        return subprocess.run([*self.in_netns(), sys.executable, "-m", "bundle", *args],
                              env={**self.env(), "PYTHONPATH": str(REPO), "NO_COLOR": "1", "COLUMNS": "200"},
                              cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=self.time_left(timeout))

    def killed_on_stop(self) -> set[str]:
        """Ids of the containers the last shutdown killed (SIGKILL) because they had not exited within
        their stop timeout of SIGTERM: their exit code is then 137, not their own."""
        text = self.log.read_text(errors="replace")
        last = text[text.rfind("Processing signal 'terminated'"):]
        return set(re.findall(r'failed to exit within \d+s of signal 15 - using the force" container=(\w+)', last))

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def containers(self, project: str) -> dict[str, dict]:
        """service -> {id, state, exit_code, restart_policy} of every container of compose project `project`."""
        ids = self.docker("ps", "-aq", "--filter", f"label=com.docker.compose.project={project}").stdout.split()
        if not ids:
            return {}
        out = {}
        for c in json.loads(self.docker("inspect", *ids).stdout):
            out[c["Config"]["Labels"]["com.docker.compose.service"]] = {
                "id": c["Id"], "state": c["State"]["Status"], "exit_code": c["State"]["ExitCode"],
                "restart_policy": c["HostConfig"]["RestartPolicy"]["Name"]}
        return out

    def remove(self) -> None:
        """Stop it (SIGKILL past the wait) and remove its folders; what it mounted goes with it."""
        try:
            self.stop(timeout=60)
        except RuntimeError:
            pass
        # What a killed dockerd leaves running: its containerd, the shims and the containers' processes
        # (found by this engine's own root in their command lines, and its cgroup parent).
        for _ in range(3):  # what a kill lets go of (a shim's container, a mount's FUSE daemon) goes next round
            for pid in _processes_of(self.root):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.5)
        # Mounts a killed dockerd or its containerd may have left under the root (fuse-overlayfs, shm, netns).
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()
                  if line.split()[1].startswith(str(self.root) + "/")]
        for mount in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)
        subprocess.run(["ip", "netns", "delete", self.netns], capture_output=True)
        # The cgroups its --cgroup-parent made (dockerd leaves the parents behind), deepest first.
        for parent in Path("/sys/fs/cgroup").glob(f"*/{self.root.name}"):
            for folder in sorted((d for d in parent.rglob("*") if d.is_dir()), key=lambda d: len(d.parts),
                                 reverse=True) + [parent]:
                try:
                    folder.rmdir()
                except OSError:
                    pass


@contextmanager
def own_engine(log: Path, *, budget_s: float):
    """A started engine of the test's own, whose commands must all end within `budget_s` (keep it below the
    test's pytest timeout by the cleanup's minute or two); always stopped and removed afterwards."""
    require_tool("dockerd", "docker.io (Debian) or docker-ce provides it")
    require_tool("ip", "iproute2 provides it")
    require_tool("nsenter", "util-linux provides it")
    if os.geteuid() != 0:
        missing("a dockerd of the test's own and its network namespace need root")
    root = Path(tempfile.mkdtemp(prefix="bde-", dir="/tmp"))
    engine = OwnEngine(root, log, root.name, deadline=time.monotonic() + budget_s)
    try:
        subprocess.run(["ip", "netns", "add", engine.netns], check=True, capture_output=True)
        # Its default bridge is one made here, inside the namespace: never `--bridge none` (dockerd then
        # deletes a docker0 it finds) and never docker0 (the machine's engine's, in the host's namespace).
        for step in (["ip", "link", "set", "lo", "up"], ["ip", "link", "add", BRIDGE, "type", "bridge"],
                     ["ip", "addr", "add", BRIDGE_ADDRESS, "dev", BRIDGE], ["ip", "link", "set", BRIDGE, "up"]):
            subprocess.run(["ip", "netns", "exec", engine.netns, *step], check=True, capture_output=True)
        engine.start()
        yield engine
    finally:
        engine.remove()


def _processes_of(root: Path) -> set[int]:
    found = set()
    for cgroup in Path("/sys/fs/cgroup").glob(f"*/{root.name}/**/cgroup.procs"):
        try:
            found |= {int(pid) for pid in cgroup.read_text().split()}
        except OSError:
            continue  # removed while being read
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if str(root).encode() in (proc / "cmdline").read_bytes():
                found.add(int(proc.name))
        except OSError:
            continue
    return found - {os.getpid()}


def _machine_storage_driver() -> str | None:
    """The machine's engine's storage driver (fuse-overlayfs where overlay2 cannot mount, as here),
    read from its daemon.json, not asked of it."""
    try:
        return json.loads(Path("/etc/docker/daemon.json").read_text()).get("storage-driver")
    except (OSError, ValueError):
        return None


# ---- the small rehearsal image ----

def _closure(names) -> list[metadata.Distribution]:
    """The installed distributions `names` need, their dependencies' dependencies included."""
    seen: dict[str, metadata.Distribution] = {}
    todo = list(names)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        dist = metadata.distribution(name)
        seen[name] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(seen.values())


def _installed_files(dist: metadata.Distribution):
    """(path inside site-packages, file on this host) of each file the distribution's RECORD lists there;
    console scripts (outside it) and bytecode (made again) left out."""
    base = Path(dist.locate_file(""))
    for entry in dist.files or []:
        rel = Path(str(entry))
        if rel.parts[0] != ".." and "__pycache__" not in rel.parts and (base / rel).is_file():
            yield rel, base / rel


def _copy_installed(dists, site: Path) -> None:
    for dist in dists:
        for rel, src in _installed_files(dist):
            (site / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, site / rel)


def _zip_installed(dists, archive: Path) -> None:
    archive.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as out:
        for dist in dists:
            for rel, src in _installed_files(dist):
                out.write(src, str(rel))


# One COPY of a prepared tree, no RUN: on a fuse-overlayfs engine every layer's commit walks the whole
# tree below it, so one layer is the cheap shape (docker/rehearsal.Dockerfile says the same).
# SIM_ARG_PARSER=fallback: SGLang's server-argument parser needs torch, which this image leaves out.
DOCKERFILE = """\
FROM {base}
COPY tree/ /
ENV PYTHONPATH=/opt/site:/opt/sglang.zip:/opt/simulator PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 SIM_ARG_PARSER=fallback
ENTRYPOINT ["bundle-entrypoint"]
"""
LAUNCHER = '#!/bin/sh\n# The worker simulator; takes `python3 -m sglang.launch_server ARGS` as its arguments.\n' \
           'exec python3 -m bundle.rehearsal.simulator "$@"\n'


def base_image_into(engine: OwnEngine) -> str:
    """The project's Debian root in `engine`: copied from the machine's engine when it has it (read
    only: `docker save`), else made there by docker/debian-root.sh itself (debootstrap, minutes)."""
    machine = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    if subprocess.run(["docker", "image", "inspect", BASE_IMAGE], env=machine, capture_output=True).returncode == 0:
        save = subprocess.Popen(["docker", "save", BASE_IMAGE], env=machine, stdout=subprocess.PIPE)
        loaded = subprocess.run(["docker", "load", "-q"], env=engine.env(), stdin=save.stdout, capture_output=True,
                                text=True)
        save.stdout.close()
        if save.wait() != 0 or loaded.returncode != 0:
            raise RuntimeError(f"docker save | docker load of {BASE_IMAGE}: {loaded.stderr[-500:]}")
    else:
        subprocess.run(["bash", str(REPO / "docker" / "debian-root.sh"), BASE_IMAGE], env=engine.env(), check=True,
                       capture_output=True)
    return BASE_IMAGE


def small_rehearsal_image(engine: OwnEngine, tag: str) -> dict[str, float]:
    """Build the small rehearsal image in `engine` and tag it `tag` (the tag `--rehearsal sim` asks for);
    returns the seconds its base and its build took."""
    began = time.monotonic()
    base = base_image_into(engine)
    took = {"base image": time.monotonic() - began}
    with tempfile.TemporaryDirectory(prefix="small-rehearsal-") as tmp:
        context = Path(tmp)
        tree = context / "tree"
        _copy_installed(_closure(SIMULATOR_AND_ROUTER), tree / "opt" / "site")
        _zip_installed([metadata.distribution(n) for n in ZIPPED], tree / "opt" / "sglang.zip")
        # As docker/rehearsal.Dockerfile lays it out: the simulator package and the two __init__ above it.
        sim_root = tree / "opt" / "simulator"
        shutil.copytree(REPO / "bundle" / "rehearsal" / "simulator", sim_root / "bundle" / "rehearsal" / "simulator",
                        ignore=shutil.ignore_patterns("__pycache__"))
        for package in ("bundle", "bundle/rehearsal"):
            shutil.copy(REPO / package / "__init__.py", sim_root / package / "__init__.py")
        bin_dir = tree / "usr" / "local" / "bin"
        bin_dir.mkdir(parents=True)
        shutil.copy(REPO / "docker" / "entrypoint.sh", bin_dir / "bundle-entrypoint")
        (bin_dir / "sglang-worker-simulator").write_text(LAUNCHER)
        for script in bin_dir.iterdir():
            script.chmod(0o755)
        (context / "Dockerfile").write_text(DOCKERFILE.format(base=base))
        built = engine.docker("build", "-q", "-t", tag, str(context), check=False,
                              extra_env={"DOCKER_BUILDKIT": "0"})
        if built.returncode != 0:
            raise RuntimeError(f"small rehearsal image: {built.stderr[-2000:]}")
    took["image build"] = time.monotonic() - began - took["base image"]
    return took
