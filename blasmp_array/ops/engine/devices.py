"""Which processes compute on one device: the test behind the gathered routes of the
factorisations and the panel leaders of the distributed LU.

Processes that share one device (several ranks on one GPU under MPS) gain nothing from a
distributed factorisation's exchanges and its redundant panel work: they run them on the same
hardware. The factorisations therefore gather such a matrix on process 0, factor it there with
the one-process kernels and scatter the factors (``ops/lapack/_qr_gathered.py``,
``ops/lapack/_lu_gathered.py``); processes on different devices keep the distributed pipelines.

Every function here is collective (one host ``allgather`` of the device keys) and answers the
same on every rank.
"""

from __future__ import annotations

from typing import Any

from ...backends.base import Backend

__all__ = ["ON_ONE_DEVICE", "MARGIN_BYTES", "device_key", "one_device", "device_groups"]

#: where False, every grid takes the distributed pipelines (their tests on one GPU)
ON_ONE_DEVICE = True

#: device bytes left beside a gathered route's work arrays (the libraries' workspaces)
MARGIN_BYTES = 512 << 20


def device_key(be: Backend) -> Any:
    """The device ``be`` computes on (a seam for tests that share devices on the CPU)."""
    return be.device_key()


def one_device(be: Backend, size: int, root_bytes: int = 0) -> bool:
    """Whether the ``size > 1`` processes of ``be`` all compute on one device, the gathered
    routes are on (:data:`ON_ONE_DEVICE`), and that device has ``root_bytes`` free for process
    0's work arrays beside what it holds (:meth:`Backend.device_bytes_free` plus a margin of
    :data:`MARGIN_BYTES`; not checked where the backend does not track it). False on one
    process. Where the memory is short, the distributed pipelines run instead: they need no
    whole copy of the matrix on one device."""
    if not ON_ONE_DEVICE or size == 1:
        return False
    free = be.device_bytes_free() if be.rank == 0 else None
    keys = be.allgather((device_key(be), free))
    if any(k[0] != keys[0][0] for k in keys):
        return False
    room = keys[0][1]
    return room is None or root_bytes + MARGIN_BYTES <= room


def device_groups(
    be: Backend,
) -> tuple[int, tuple[int, ...], tuple[tuple[int, tuple[int, ...]], ...]]:
    """``(leader, leaders, shared)``: the lowest rank on this process's device (its *leader*),
    the leaders of all devices, and ``(leader, other ranks)`` of every device that several
    ranks share."""
    keys = be.allgather(device_key(be))
    groups: dict[Any, list[int]] = {}
    for rank, key in enumerate(keys):
        groups.setdefault(key, []).append(rank)
    shared = tuple((g[0], tuple(g[1:])) for g in groups.values() if len(g) > 1)
    leaders = tuple(sorted(g[0] for g in groups.values()))
    return groups[keys[be.rank]][0], leaders, shared
