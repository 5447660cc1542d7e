"""The pooled symmetric slots and signals of the dependency-chain operators (TRSM, Cholesky).

Allocation of symmetric memory is collective and slow, so each such operator keeps, per
backend, one symmetric buffer per dtype and one signal set, grown on demand (collectively:
every rank asks for the same sizes) and reused by its next call. Between calls each process
zeroes the signal words it used, after ``synchronize()`` (every signal sent to it was waited
for), and a barrier separates the calls. A call that fails leaves signal values unknown: it
drops its pool (:func:`drop`) so that it is never reused.

The SUMMA panels and the one-sided exchange pool their buffers the same way
(``ops/panels.py``'s workspace is a :class:`SlotPool`) but never reset their signals: they keep
monotonic signal bases instead. Moving TRSM and Cholesky onto that exchange would leave only
that discipline.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["SlotPool", "pool", "drop", "free"]


class SlotPool:
    """One symmetric buffer per dtype and one signal set of one operator on one backend."""

    def __init__(self, backend: Any, name: str) -> None:
        self.backend = backend
        self.name = name
        self.bufs: dict[np.dtype, Any] = {}
        self.sig: Any = None

    def buffer(self, dtype: Any, size: int) -> Any:
        """A symmetric buffer of at least ``size`` elements of ``dtype`` (collective when it
        grows: the old one is freed, the new one at least doubles)."""
        dtype = np.dtype(dtype)
        buf = self.bufs.get(dtype)
        if buf is not None and buf.handle is not None and buf.size >= size:
            return buf
        if buf is not None and buf.handle is not None:
            self.backend.free(buf)
        cap = max(int(size), 2 * (buf.size if buf is not None else 0), 1024)
        buf = self.bufs[dtype] = self.backend.alloc_symmetric(
            cap, dtype, name=f"{self.name}.{dtype}"
        )
        return buf

    def signals(self, count: int) -> Any:
        """A signal set of at least ``count`` words (collective when it grows)."""
        sig = self.sig
        if sig is not None and sig.handle is not None and sig.count >= count:
            return sig
        if sig is not None and sig.handle is not None:
            self.backend.free(sig)
        cap = max(int(count), 2 * (sig.count if sig is not None else 0), 64)
        self.sig = self.backend.alloc_signals(cap, name=f"{self.name}.signals")
        return self.sig

    def finish(self, used: int) -> None:
        """Drain, zero the ``used`` signal words of this process, and barrier (collective)."""
        be = self.backend
        be.synchronize()
        for i in range(used):
            be.signal_op(self.sig, i, 0, be.rank, "set", be.compute)
        be.barrier()


_POOLS: dict[tuple[int, str], SlotPool] = {}


def pool(backend: Any, name: str) -> SlotPool:
    """The pool of operator ``name`` on ``backend`` (created empty on first use)."""
    p = _POOLS.get((id(backend), name))
    if p is None or p.backend is not backend:
        p = _POOLS[(id(backend), name)] = SlotPool(backend, name)
    return p


def drop(backend: Any, name: str) -> None:
    """Forget the pool after a failed call (its signal values are unknown); not collective."""
    _POOLS.pop((id(backend), name), None)


def free(backend: Any, name: str) -> None:
    """Release the pool's symmetric buffers and signals (collective)."""
    p = _POOLS.pop((id(backend), name), None)
    if p is not None:
        for obj in [*p.bufs.values(), p.sig]:
            if obj is not None and obj.handle is not None:
                backend.free(obj)
