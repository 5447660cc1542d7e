"""The timing loop of the tuning tools (``tools/*_sweep.py``): the bench's, with a device
synchronisation. Imported by the tools run as scripts from the repository root."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import numpy as np

from blasmp_array.bench.compare import _time


def synchronizer(be: Any) -> Callable[[], None]:
    """Wait for the backend's streams and, on a GPU, for the current CuPy stream (where the
    library baselines run)."""

    def sync() -> None:
        be.synchronize()
        if be.xp is not np:
            be.xp.cuda.get_current_stream().synchronize()

    return sync


def timed(fn: Callable[[], Any], sync: Callable[[], None], repeat: int) -> tuple[float, ...]:
    """Median, min and max of ``repeat`` synchronised calls after one warm-up (the bench's
    timing loop)."""
    ts = _time(fn, 1, repeat, sync)
    return statistics.median(ts), min(ts), max(ts)
