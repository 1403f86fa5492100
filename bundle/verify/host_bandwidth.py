"""The host's memory bandwidth, from a short copy probe: the CPU engine's stand-in for a GPU's peak.

A buffer larger than the caches is copied a few times into a second one whose pages are already mapped
(slice assignment is one memmove; a fresh destination would time page faults instead); a copy reads
and writes every byte, so the bandwidth counted is 2 x size / time, the best of the rounds. It is a
floor-of-the-peak figure (one thread, no streaming stores), which makes the CPU engine's MBU read
higher than a tuned STREAM figure would: it is marked as a CPU figure wherever it shows. About 50 ms.
"""

from __future__ import annotations

import time
from functools import lru_cache

PROBE_MIB = 64  # beyond the last-level cache of the hosts this runs on
ROUNDS = 3


@lru_cache(maxsize=1)
def probe_gb_s(size_mib: int = PROBE_MIB, rounds: int = ROUNDS) -> float:
    """Bytes moved per second by a plain copy, best of `rounds` (GB/s, 1e9)."""
    source = bytearray(b"\x5a") * (size_mib * 1024 * 1024)
    target = bytearray(len(source))
    target[:] = source  # maps the target's pages before the timed rounds
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        target[:] = source
        best = min(best, time.perf_counter() - t0)
    return 2 * len(source) / best / 1e9
