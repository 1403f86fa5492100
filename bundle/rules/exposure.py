"""The front door opened beyond this host without an API key: said as a warning, never refused.

smg 1.13.0 without a key serves the model to anyone who reaches its port and also its control plane:
POST /workers and PUT/PATCH/DELETE /workers/{id} register or remove backends by URL (its own log says
so: "SECURITY POSTURE: this gateway runs without authentication"). With a key it refuses callers
without it (401, checked). `network.expose_without_key: true` states the choice and quiets the warning.
"""

from __future__ import annotations

import ipaddress

from bundle.config.model import Deployment
from bundle.topology import Topology

LOOPBACK_NAMES = {"localhost", "ip6-localhost", "ip6-loopback"}
QUIET_KEY = ("network", "expose_without_key")


def is_loopback(address: str) -> bool:
    """Whether `address` keeps the port on this host: 127.0.0.0/8, ::1 or localhost. A host name or an
    address of an interface is reachable from elsewhere."""
    if address.strip().lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


def unkeyed(dep: Deployment, topology: Topology, listens: str) -> str | None:
    """The warning's words when the front door (`listens`: where it is reachable) has no key and the
    choice was not stated; None when there is nothing to say."""
    if dep.api_key_file is not None or dep.network.expose_without_key:
        return None
    exposed, verb = "the model", "is"
    if topology.has_router:
        verb = "are"
        exposed += (" and the router's worker registration (POST /workers, PUT/PATCH/DELETE /workers/{id}: "
                    "anyone can add or remove backends by URL)")
    return (f"the {topology.name} front door {listens} without api_key_file: {exposed} {verb} open to anyone "
            f"who reaches it; set api_key_file (a file holding the key), or {'.'.join(QUIET_KEY)}: true "
            f"if that is meant")
