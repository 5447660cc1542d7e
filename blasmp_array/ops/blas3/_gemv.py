"""The local matrix-vector product of ``A @ x`` and ``x @ A`` (:mod:`ops.blas3.matvec` and its
exchange route, :mod:`ops.blas3._matvec_exchange`): the array module's own ``gemv``."""

from __future__ import annotations

from typing import Any

from ...backends.base import Backend
from ..engine._warmup import sample_matrix, warmup_kernels

__all__ = ["gemv"]


def gemv(xp: Any, a: Any, op: str, x: Any, y: Any = None) -> Any:
    """``y := op(a) @ x`` for vectors or ``n x 1`` columns ``x`` and ``y`` (``op`` 'N', 'T', 'C',
    or 'R' the conjugate), returned; ``y`` None: a new array of ``x``'s dimensions (host
    memory only: a device's local matrices come from the backend's symmetric heap):
    the array module's matrix-vector product, a BLAS ``gemv`` on the CPU (NumPy) and cuBLAS's
    on the GPU, the kernels of the reference ``a @ x``. The conjugations act on the vectors."""
    m = a.T if op in ("T", "C") else a
    if op in ("C", "R"):
        y = xp.matmul(m, xp.conj(x), out=y)
        return xp.conj(y, out=y)
    # NumPy's dot reaches gemv about 0.4 us sooner than its matmul, and sooner again without out=
    return xp.dot(m, x) if y is None else xp.dot(m, x, out=y)


@warmup_kernels
def _warm_gemv(backend: Backend, xp: Any, dtype: Any) -> None:
    """:func:`gemv` in each op (the conjugations launch their own kernels)."""
    a = sample_matrix(xp, dtype)
    x = xp.ones(a.shape[1], dtype)
    for op in ("N", "T", "C", "R"):
        gemv(xp, a, op, x, xp.empty(a.shape[0], dtype))
