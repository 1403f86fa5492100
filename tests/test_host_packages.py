"""docker/host-packages.sh (what `make install` runs first) waits for the package manager's lock instead
of failing: a fresh cloud VM runs unattended upgrades in its first minutes, exactly when a newcomer types
`make install`. The real apt-get runs here against a package database of its own in a temporary folder
(APT_CONFIG: its state, cache, sources and dpkg's admin dir), and a second process holds that database's
locks the way apt and dpkg take them (fcntl write locks on lists/lock, dpkg's lock-frontend and lock).
Nothing is installed: the temporary sources list is empty, so once past the locks apt-get stops at
"Unable to locate package", which proves it got past them."""

from __future__ import annotations

import os
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import REPO, missing, require_tool

SCRIPT = REPO / "docker" / "host-packages.sh"
# What the script checks for; hidden from its PATH so that it finds every package missing.
COMMANDS = ("debootstrap", "patchelf", "docker-registry", "promtool", "chromium")
# Slow tier: each test waits seconds for a lock on purpose (about 20 s in all).
pytestmark = pytest.mark.slow


@pytest.fixture
def apt_root(tmp_path: Path) -> Path:
    """An empty apt/dpkg world under tmp_path, named by an apt.conf that APT_CONFIG points at."""
    require_tool("apt-get", "the script's lock handling is apt's (Debian/Ubuntu hosts)")
    if os.geteuid() != 0:
        missing("root: the script installs only as root (otherwise it prints the sudo command)")
    for sub in ("state/lists/partial", "cache/archives/partial", "etc/apt.conf.d", "etc/preferences.d",
                "etc/sources.list.d", "etc/trusted.gpg.d", "dpkg/updates", "dpkg/info"):
        (tmp_path / sub).mkdir(parents=True)
    (tmp_path / "dpkg" / "status").touch()
    (tmp_path / "etc" / "sources.list").touch()
    (tmp_path / "apt.conf").write_text(
        f'Dir::State "{tmp_path}/state";\nDir::State::status "{tmp_path}/dpkg/status";\n'
        f'Dir::Cache "{tmp_path}/cache";\nDir::Etc "{tmp_path}/etc";\nDir::Log "{tmp_path}";\n')
    return tmp_path


def _path_without_the_packages(tmp_path: Path) -> str:
    """A PATH holding every command of the host's but the ones the script would install."""
    shadow = tmp_path / "bin"
    shadow.mkdir()
    for directory in ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"):
        if not os.path.isdir(directory):
            continue
        for name in os.listdir(directory):
            if name not in COMMANDS and not (shadow / name).exists():
                (shadow / name).symlink_to(os.path.join(directory, name))
    return str(shadow)


@contextmanager
def held(*locks: Path):
    """Hold `locks` from another process (as apt-get or unattended-upgrades would) until the block ends."""
    code = ("import fcntl, os, sys, time\nfds = []\n"
            "for p in sys.argv[1:]:\n"
            "    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o640); fcntl.lockf(fd, fcntl.LOCK_EX); fds.append(fd)\n"
            "print('held', flush=True)\ntime.sleep(3600)\n")
    holder = subprocess.Popen(["python3", "-c", code, *map(str, locks)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.kill()
        holder.wait()


def _start(apt_root: Path, timeout_s: int) -> subprocess.Popen:
    env = {**os.environ, "APT_CONFIG": str(apt_root / "apt.conf"), "APT_LOCK_TIMEOUT": str(timeout_s),
           "PATH": _path_without_the_packages(apt_root)}
    return subprocess.Popen(["bash", str(SCRIPT)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


@pytest.mark.parametrize("which", ["lists", "dpkg"])
def test_waits_for_a_held_lock_then_proceeds(apt_root: Path, which: str):
    """The lists' lock (held during another `apt-get update`) and dpkg's (held while another installs):
    the script says it waits, and once the other process lets go it carries on to the install."""
    locks = ([apt_root / "state" / "lists" / "lock"] if which == "lists"
             else [apt_root / "dpkg" / "lock-frontend", apt_root / "dpkg" / "lock"])
    with held(*locks) as holder:
        script = _start(apt_root, timeout_s=60)
        time.sleep(4)
        assert script.poll() is None, f"did not wait for the held {which} lock:\n{script.communicate()[0]}"
    out, _ = script.communicate(timeout=60)
    assert holder.returncode is not None
    assert "for the package manager's lock: Could not get lock" in out, out
    assert f"held by process {holder.pid}" in out, out
    # Past every lock: the empty sources list has no such package (nothing gets installed).
    assert "Unable to locate package" in out, out
    assert "gave up" not in out, out


@pytest.mark.parametrize("which", ["lists", "dpkg"])
def test_gives_up_after_the_time_limit_naming_the_lock(apt_root: Path, which: str):
    locks = ([apt_root / "state" / "lists" / "lock"] if which == "lists"
             else [apt_root / "dpkg" / "lock-frontend", apt_root / "dpkg" / "lock"])
    with held(*locks):
        started = time.monotonic()
        script = _start(apt_root, timeout_s=3)
        out, _ = script.communicate(timeout=60)
        took = time.monotonic() - started
    assert script.returncode == 1, out
    # The script counts bash's SECONDS (whole seconds): its 3 s can end after 2.x s of real time.
    assert took >= 2.0, f"gave up after {took:.1f} s, before its 3 s limit:\n{out}"
    assert "lock" in out and "APT_LOCK_TIMEOUT" in out, out
    assert "for the package manager's lock: Could not get lock" in out, out  # it said it waited
    if which == "lists":
        assert "gave up after 3 s waiting for the package manager's lock" in out, out
    else:
        assert "Unable to acquire the dpkg frontend lock" in out and "held it for 3 s" in out, out
