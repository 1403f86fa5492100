"""Who listens on a TCP port, from /proc (Linux): the socket's inode, then the process holding it.

No psutil: the driver stays light, and /proc/net/tcp{,6} plus /proc/<pid>/fd is all psutil reads too.
Processes of other users cannot be looked into without root: their owner is then reported unknown.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass
from pathlib import Path

_LISTEN = "0A"


@dataclass(frozen=True)
class Listener:
    address: str  # "0.0.0.0", "127.0.0.1", "::"
    port: int
    inode: int
    pid: int | None = None
    process: str | None = None  # comm name, "docker-proxy"
    cmdline: str | None = None

    def describe(self) -> str:
        if self.pid is None:
            return f"{self.address}:{self.port} (owner unknown: another user's process; run as root to see it)"
        return f"{self.address}:{self.port} held by {self.process} (pid {self.pid})"


def _decode_address(hex_addr: str) -> str:
    raw = bytes.fromhex(hex_addr)
    # The kernel prints each 32-bit word in host (little-endian) order.
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


def parse_proc_net_tcp(text: str) -> list[Listener]:
    """LISTEN sockets of one /proc/net/tcp or tcp6 table."""
    listeners = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != _LISTEN:
            continue
        addr_hex, port_hex = fields[1].split(":")
        listeners.append(Listener(address=_decode_address(addr_hex), port=int(port_hex, 16),
                                  inode=int(fields[9])))
    return listeners


def _socket_owners(inodes: set[int], proc: Path = Path("/proc")) -> dict[int, int]:
    owners: dict[int, int] = {}
    wanted = {f"socket:[{i}]": i for i in inodes}
    for pid_dir in proc.iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            for fd in (pid_dir / "fd").iterdir():
                target = os.readlink(fd)
                if target in wanted:
                    owners[wanted[target]] = int(pid_dir.name)
        except OSError:
            continue  # gone, or another user's process
        if len(owners) == len(inodes):
            break
    return owners


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def listeners(port: int | None = None, proc: Path = Path("/proc")) -> list[Listener]:
    """Every TCP listener of this network namespace (on `port` only, if given), with its owner."""
    found = []
    for table in ("tcp", "tcp6"):
        found += parse_proc_net_tcp(_read(proc / "net" / table))
    if port is not None:
        found = [item for item in found if item.port == port]
    owners = _socket_owners({item.inode for item in found}, proc) if found else {}
    result = []
    for item in found:
        pid = owners.get(item.inode)
        process = _read(proc / str(pid) / "comm").strip() if pid else None
        cmdline = _read(proc / str(pid) / "cmdline").replace("\0", " ").strip() if pid else None
        result.append(Listener(item.address, item.port, item.inode, pid, process or None, cmdline or None))
    return result


def conflicts(host: str, port: int, proc: Path = Path("/proc")) -> list[Listener]:
    """Listeners that would stop a server binding host:port (a wildcard on either side overlaps all)."""
    wildcard = {"0.0.0.0", "::"}
    return [item for item in listeners(port, proc)
            if host in wildcard or item.address in wildcard or item.address == host]


def bind_free(host: str, port: int) -> bool:
    """Fallback where /proc is not there: try to bind (and release at once)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        # As a server would bind: a port merely in TIME_WAIT is free.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True
