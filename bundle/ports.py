"""Is a host port free, and if not, who holds it (so the message can name the owner)."""

from __future__ import annotations

import socket


def is_free(host: str, port: int) -> bool:
    """True if a listener could bind host:port now (what compose's port mapping will need)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def owner(port: int) -> str | None:
    """'name (pid N)' of the process listening on `port`, where this user may see it."""
    try:
        import psutil
    except ImportError:
        return None
    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
                try:
                    return f"{psutil.Process(conn.pid).name()} (pid {conn.pid})"
                except psutil.Error:
                    return f"pid {conn.pid}"
    except psutil.Error:
        return None
    return None
