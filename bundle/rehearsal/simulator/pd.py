"""Prefill/decode disaggregation, simulated with the same wiring as SGLang + NIXL.

The router (smg, PD mode) sends every request to both workers with bootstrap_host (the prefill
worker's host), bootstrap_port (from `--prefill URL PORT`) and a random bootstrap_room. On a GPU
host the decode worker connects to the prefill's bootstrap server on that port and receives the
KV cache for that room. Here the prefill worker runs a small HTTP bootstrap server on
--disaggregation-bootstrap-port and marks a room ready once its prefill time has passed; the decode
worker asks for the room there (GET /sim/kv/ROOM, served by
the prefill's own app on that port too) and only then produces tokens. So a wrong bootstrap port, an
unreachable prefill or a router that drops the fields fails a rehearsal just as it fails a GPU host
("connection refused" on 8998), and a completed request proves it passed through both workers.
"""

from __future__ import annotations

import asyncio
import logging
import time

import aiohttp

# SGLang's /health in PD mode uses this fake host (sglang.srt.disaggregation.utils): no transfer.
FAKE_BOOTSTRAP_HOST = "2.2.2.2"
# Rooms are forgotten after this long, so a long rehearsal does not grow without bound.
ROOM_TTL_SECS = 600.0

log = logging.getLogger("simulator.pd")


class KVTransferError(Exception):
    """Decode could not get the KV cache of a room (bootstrap unreachable, timeout)."""


class RoomBoard:
    """Prefill side: the rooms seen, and an event per room set when its KV cache is 'ready'."""

    def __init__(self):
        self._rooms: dict[int, tuple[float, asyncio.Event]] = {}

    def _event(self, room: int) -> asyncio.Event:
        now = time.monotonic()
        for old in [r for r, (t, _) in self._rooms.items() if now - t > ROOM_TTL_SECS]:
            del self._rooms[old]
        if room not in self._rooms:
            self._rooms[room] = (now, asyncio.Event())
        return self._rooms[room][1]

    def seen(self, room: int) -> None:
        self._event(room)

    def ready(self, room: int) -> None:
        self._event(room).set()

    async def wait(self, room: int, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self._event(room).wait(), timeout)
            return True
        except TimeoutError:
            return False


async def fetch_kv(host: str, port: int, room: int, timeout: float) -> None:
    """Decode side: block until prefill has the room's KV ready; KVTransferError if it never does."""
    url = f"http://{host}:{port}/sim/kv/{room}"
    client_timeout = aiohttp.ClientTimeout(total=timeout + 5, connect=10)
    try:
        async with aiohttp.ClientSession(timeout=client_timeout) as session, \
                session.get(url, params={"timeout": str(timeout)}) as resp:
            if resp.status != 200:
                raise KVTransferError(f"KV transfer of room {room} from {host}:{port} "
                                      f"failed: bootstrap server answered {resp.status}")
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        raise KVTransferError(f"KV transfer of room {room} from {host}:{port} failed: "
                              f"{type(exc).__name__}: {exc}") from None
