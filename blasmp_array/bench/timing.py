"""The bench's timing loop: warm-up, then timed calls that start together after a barrier; each
time is the slowest rank's (until the backend's streams are drained)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["time_collective"]


def time_collective(
    call: Callable[[], Any],
    backend: Any,
    warmup: int,
    repeat: int,
    before: Callable[[], None] | None = None,
    after: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Time ``call`` on every rank (collective); ``before`` and ``after`` run around each call
    (warm-up ones too), outside the timed region (restoring inputs; removing what a call wrote).
    The call's return value is dropped after the clock stops, so that freeing it is not timed.

    Returns ``warmup``, ``repeat``, ``times_s`` (the slowest rank's time of each call),
    ``median_s``, ``min_s``, ``max_s`` and ``rank_median_s`` (each rank's own median).
    """
    for _ in range(warmup):
        if before is not None:
            before()
        call()
        backend.synchronize()
        if after is not None:
            after()
    times, local = [], []
    for _ in range(repeat):
        if before is not None:
            before()
        backend.barrier()
        t0 = time.perf_counter()
        out = call()
        backend.synchronize()
        dt = time.perf_counter() - t0
        del out
        local.append(dt)
        times.append(backend.allreduce(dt, op="max"))
        if after is not None:
            after()
    per_rank = backend.allgather(float(np.median(local)))
    return {
        "warmup": warmup,
        "repeat": repeat,
        "times_s": times,
        "median_s": float(np.median(times)),
        "min_s": float(min(times)),
        "max_s": float(max(times)),
        "rank_median_s": per_rank,
    }
