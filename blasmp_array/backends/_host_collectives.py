"""Host collectives over MPI shared by the backends (blocking; set-up, reductions, exchanges).

Both backends run them on a private duplicate ``_pcomm`` of their communicator, so they never
match a user's messages. Device arrays reach them through the backend's ``asnumpy``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")

#: exceptions that :meth:`HostCollectives.run_on_root` raises as themselves on the other ranks
#: (anything else arrives as a RuntimeError naming the root's exception)
_PORTABLE: tuple[type[Exception], ...] = (
    np.linalg.LinAlgError,
    ValueError,
    TypeError,
    MemoryError,
    NotImplementedError,
)

#: seconds between two tests of the waiting ranks in :meth:`HostCollectives.run_on_root`
IDLE_POLL_S = 0.0005

__all__ = ["HostCollectives", "MPI_OPS"]

#: the reduction names ``Backend.allreduce`` accepts and their MPI operations
MPI_OPS = {
    "sum": "SUM",
    "max": "MAX",
    "min": "MIN",
    "prod": "PROD",
    "land": "LAND",
    "lor": "LOR",
    "band": "BAND",
    "bor": "BOR",
}


def _immutable(obj: Any) -> bool:
    """Whether ``obj`` is a value no caller can change in place (None, a number, a string, a
    NumPy scalar, or a tuple of these): one process's collectives may return it as it is,
    where several processes return unpickled copies."""
    if obj is None or isinstance(obj, bool | int | float | complex | str | bytes | np.generic):
        return True
    return type(obj) is tuple and all(_immutable(x) for x in obj)


class HostCollectives:
    """``allreduce``, ``bcast`` and ``allgather`` of :class:`~.base.Backend` on ``self._pcomm``."""

    _pcomm: Any
    asnumpy: Any  # Backend.asnumpy (device backends move device arrays to the host)

    def allreduce(self, value: Any, op: str = "sum") -> Any:
        from mpi4py import MPI

        if op not in MPI_OPS:
            raise ValueError(f"op must be one of {sorted(MPI_OPS)}, got {op!r}")
        mop = getattr(MPI, MPI_OPS[op])
        if hasattr(value, "__cuda_array_interface__"):
            value = self.asnumpy(value)
        if isinstance(value, np.ndarray):
            send = np.ascontiguousarray(value)
            if send.dtype == np.bool_ and op in ("sum", "prod"):
                send = send.astype(np.int64)
            out = np.empty_like(send)
            self._pcomm.Allreduce(send, out, op=mop)
            return out.reshape(value.shape)
        if self._pcomm.Get_size() == 1 and _immutable(value):
            return value
        return self._pcomm.allreduce(value, op=mop)

    def bcast(self, obj: Any, root: int = 0) -> Any:
        return self._pcomm.bcast(obj, root=root)

    def allgather(self, obj: Any) -> list[Any]:
        if self._pcomm.Get_size() == 1:  # what the pickled round trip gives, without it
            if _immutable(obj):
                return [obj]
            if type(obj) is np.ndarray:
                return [obj.copy()]
        return self._pcomm.allgather(obj)

    def allgather_array(self, send: np.ndarray, counts: Sequence[int]) -> np.ndarray:
        send = np.ascontiguousarray(send)
        counts = [int(c) for c in counts]
        rank = self._pcomm.Get_rank()
        if send.ndim != 1 or send.shape[0] != counts[rank]:
            raise ValueError(
                f"allgather_array: rank {rank} sends shape {send.shape} where counts says "
                f"({counts[rank]},)"
            )
        out = np.empty(sum(counts), send.dtype)
        if len(counts) == 1:
            out[...] = send
            return out
        displs = np.concatenate(([0], np.cumsum(counts[:-1]))).tolist()
        self._pcomm.Allgatherv(send, [out, (counts, displs)])
        return out

    def run_on_root(self, fn: Callable[[], T], root: int = 0) -> T | None:
        """``fn()`` on rank ``root`` alone, which returns its result (None elsewhere).
        Collective.

        The other ranks wait idle -- a non-blocking barrier tested every
        :data:`IDLE_POLL_S` seconds between sleeps, not MPI's busy polling -- while the root
        computes with their share of the node too (:meth:`_root_threads`; the CPU backend's
        BLAS threads of every rank of the node). An exception of ``fn`` is raised on every rank:
        the same type for the :data:`_PORTABLE` ones, else a ``RuntimeError`` naming it.
        """
        result: T | None = None
        error: BaseException | None = None
        if self._pcomm.Get_rank() == root:
            try:
                with self._root_threads():
                    result = fn()
            except Exception as exc:
                error = exc
        request = self._pcomm.Ibarrier()
        while not request.Test():
            time.sleep(IDLE_POLL_S)
        message = self._pcomm.bcast(
            None if error is None else (type(error).__name__, str(error)), root=root
        )
        if message is not None:
            name, text = message
            kind = next((k for k in _PORTABLE if k.__name__ == name), None)
            if error is not None and kind is not None:
                raise error
            if kind is None:  # the same type on every rank, the root's original chained
                raise RuntimeError(f"rank {root}: {name}: {text}") from error
            raise kind(f"rank {root}: {text}")
        return result

    def _root_threads(self) -> Any:
        """The context :meth:`run_on_root` runs ``fn`` in on the root (a backend may lend it
        the idle ranks' cores); here: nothing."""
        return contextlib.nullcontext()
