"""Host collectives over MPI shared by the backends (blocking; set-up, reductions, exchanges).

Both backends run them on a private duplicate ``_pcomm`` of their communicator, so they never
match a user's messages. Device arrays reach them through the backend's ``asnumpy``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

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
        return self._pcomm.allreduce(value, op=mop)

    def bcast(self, obj: Any, root: int = 0) -> Any:
        return self._pcomm.bcast(obj, root=root)

    def allgather(self, obj: Any) -> list[Any]:
        return self._pcomm.allgather(obj)
