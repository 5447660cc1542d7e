"""A tall QR panel factored by CholeskyQR2 and Householder reconstruction: the panel of the
one-process QR with look-ahead (:mod:`ops.lapack._qr_local`) where the backend's SYRK, TRSM and
GEMM outrun its ``geqrf`` (the GPU).

Why: cuSOLVER's ``geqrf`` of a ``16384 x 512`` panel runs at about 1 TFLOP/s (its inner
columns are narrow GEMMs); the panels then bound the look-ahead QR (docs/qr.md). Here every
flop of a panel but a ``512 x 512`` LU is a GEMM, SYRK or TRSM of the panel's full width.

Algorithm (Ballard, Demmel, Grigori, Jacquelin, Knight and Nguyen, "Reconstructing Householder
vectors from tall-skinny QR", IPDPS 2014; LAPACK ``xORHR_COL``), for the ``m x b`` panel
``P``, ``m >= b``:

1. CholeskyQR2: ``P = Q R``, ``Q`` orthonormal; each pass is ``G = X^H X`` (HERK), ``G = R_i^H
   R_i`` (Cholesky), ``R_i^{-1}`` (a TRSM of the identity) and ``X R_i^{-1}`` (one GEMM);
   ``R = R_2 R_1``;
2. the LU without pivoting of ``Q_1 - D`` (``Q_1`` the top ``b x b`` of ``Q``), the signs
   ``D = diag(+-1)`` chosen column by column as ``-sign(Re u_jj)`` so that ``|u_jj| >= 1``:
   ``Q_1 - D = L U`` (blocked here; the leaf is ``Backend.modified_lu``);
3. ``V = [L; Q_2 U^{-1}]`` (unit lower trapezoidal; ``U^{-1}`` explicit, then one GEMM),
   ``T = -U D L^{-H}`` (upper triangular) and ``R_H = D R``: ``P = (I - V T V^H) [R_H; 0]``,
   the reflectors of LAPACK's ``xgeqrf`` for ``P`` (``tau = diag(T)``), which also fixes the
   signs of ``R``'s diagonal as ``xgeqrf`` does.

``Q`` is as orthonormal as CholeskyQR2 makes it while ``kappa(P) <~ u^{-1/2}`` (docs/qr.md,
"Stability limits"), and the reconstruction is then stable (Ballard et al., Theorem 6.3). Past
it the panel must go to ``geqrf``: :func:`factor` writes a device flag, 1 where both Cholesky
factorisations succeeded and the first pass left ``delta = ||Q_1^H Q_1 - I||_F <=``
:data:`ops.lapack._cholqr.DELTA_MAX` (``_cholqr``'s criterion), else 0; the caller reads it
after the panel's event and factors the panel again from its source where it is 0.

Stream protocol: everything is enqueued on the one stream given (the look-ahead's comm stream),
in order; no host synchronisation, no event. The workspace (:class:`Workspace`) is shared by
every panel of one factorisation: the stream runs them one after another, and only it touches
the workspace. The panel, ``tau``, ``T`` and the flag are the caller's outputs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...backends._host_copy import assign
from ...backends.base import Backend
from ..engine._warmup import warmup_kernels
from ._cholqr import DELTA_MAX, departure_squared, identity_into

__all__ = ["Workspace", "factor", "modified_lu", "LEAF"]

#: columns per leaf of the blocked modified LU (``Backend.modified_lu``: one thread block)
LEAF = 32


class Workspace:
    """The scratch of :func:`factor` for panels of at most ``rows x width``: two row-major
    copies of the panel, ``b x b`` matrices, the signs, the INFOs and the departure."""

    def __init__(self, xp: Any, rows: int, width: int, dtype: Any) -> None:
        self.xp = xp
        self.x = xp.empty(rows * width, dtype)
        self.y = xp.empty(rows * width, dtype)
        self.g = xp.empty((width, width), dtype)
        self.r = xp.empty((width, width), dtype)
        self.inv = xp.empty((width, width), dtype)
        self.d = xp.empty(width, dtype)
        self.info = xp.zeros(2, np.int32)
        self.delta = xp.zeros(1, np.float64)


def factor(
    be: Backend, ws: Workspace, panel: Any, tau: Any, t: Any, flag: Any, stream: Any
) -> None:
    """Enqueue on ``stream`` the QR of the ``m x b`` ``panel`` (``m >= b``) in place in
    LAPACK's ``xgeqrf`` layout, its ``b`` scalars into ``tau``, the ``b x b`` ``T`` of ``I - V T
    V^H`` into ``t`` (as ``xgeqrt``) and the verdict into ``flag`` (one ``int32``: 1, or 0 where
    CholeskyQR2 was out of its range and the outputs must not be used). See the module
    docstring."""
    m, b = panel.shape
    xp = ws.xp
    x = ws.x[: m * b].reshape(m, b)
    y = ws.y[: m * b].reshape(m, b)
    g, r, inv, d = ws.g[:b, :b], ws.r[:b, :b], ws.inv[:b, :b], ws.d[:b]
    be.launch(stream, assign, x, panel)
    _pass(be, stream, x, y, g, inv, ws.info[0:1])  # Q_1 = P R_1^{-1} into y
    be.launch(stream, assign, r, g)  # R_1 (upper; zeros below)
    be.syrk(1, y, 0, g, "U", "C", stream)
    be.launch(stream, _departure, xp, g, ws.delta)
    _pass(be, stream, y, x, g, inv, ws.info[1:2], gram=False)  # Q = Q_1 R_2^{-1} into x
    be.trmm(1, g, r, "L", "U", "N", "N", stream)  # R = R_2 R_1
    top = x[:b]
    modified_lu(be, top, d, stream)  # Q_1 - D = L U over the top of Q
    be.launch(stream, identity_into, xp, inv)
    be.trsm(1, top, inv, "L", "U", "N", "N", stream)
    if m > b:
        be.gemm(1, x[b:], inv, 0, y[b:], "N", "N", stream)  # V_2 = Q_2 U^{-1}
    be.launch(stream, _minus_u_d, xp, top, d, t)
    be.trsm(1, top, t, "R", "L", "C", "U", stream)  # T = -U D L^{-H}
    be.launch(stream, _write, xp, panel, top, r, d, y, t, tau, ws.info, ws.delta, flag)


def modified_lu(be: Backend, a: Any, d: Any, stream: Any) -> None:
    """``a - D = L U`` in place for the square ``a`` (``Backend.modified_lu``, blocked
    right-looking in leaves of :data:`LEAF` columns: the leaf on the columns' rows from the
    diagonal down, a TRSM for the leaf's rows of ``U`` right of it, a GEMM for the rest);
    ``d`` receives ``D``'s diagonal. Enqueued on ``stream``."""
    n = a.shape[1]
    for j0 in range(0, n, LEAF):
        j1 = min(j0 + LEAF, n)
        be.modified_lu(a[j0:, j0:j1], d[j0:j1], stream)
        if j1 < n:
            be.trsm(1, a[j0:j1, j0:j1], a[j0:j1, j1:], "L", "L", "N", "U", stream)
            be.gemm(-1, a[j1:, j0:j1], a[j0:j1, j1:], 1, a[j1:, j1:], "N", "N", stream)


def _pass(
    be: Backend, s: Any, x: Any, out: Any, g: Any, inv: Any, info: Any, gram: bool = True
) -> None:
    """One CholeskyQR pass on ``s``: ``G = x^H x`` (unless ``gram`` is False: ``g`` holds it),
    ``G = R^H R`` into ``g`` (upper, zeros below), ``out = x R^{-1}``."""
    if gram:
        be.syrk(1, x, 0, g, "U", "C", s)
    be.potrf(g, "U", info, s)
    be.launch(s, _upper_and_identity, be.xp, g, inv)
    be.trsm(1, g, inv, "L", "U", "N", "N", s)
    be.gemm(1, x, inv, 0, out, "N", "N", s)


def _upper_and_identity(xp: Any, g: Any, inv: Any) -> None:
    g[...] = xp.triu(g)
    identity_into(xp, inv)


def _departure(xp: Any, g: Any, delta: Any) -> None:
    """``delta`` := ``||G - I||_F^2`` of the Hermitian ``G`` (upper triangle)."""
    delta[...] = departure_squared(xp, g)


def _minus_u_d(xp: Any, top: Any, d: Any, t: Any) -> None:
    """``t`` := ``-U D`` (``U`` the upper triangle of ``top``)."""
    t[...] = xp.triu(top) * -d[None, :]


def _write(
    xp: Any,
    panel: Any,
    top: Any,
    r: Any,
    d: Any,
    y: Any,
    t: Any,
    tau: Any,
    info: Any,
    delta: Any,
    flag: Any,
) -> None:
    """The panel in LAPACK's layout (``R_H = D R`` on and above the diagonal, ``L`` below it,
    ``V_2`` under it), ``tau = diag(T)``, the verdict."""
    b = top.shape[0]
    assign(panel[:b], xp.triu(d[:, None] * r) + xp.tril(top, -1))
    if panel.shape[0] > b:
        assign(panel[b:], y[b:])
    tau[...] = xp.diagonal(t)
    flag[...] = xp.all(info == 0) & (delta[0] <= DELTA_MAX**2)


@warmup_kernels
def _sample(backend: Backend, xp: Any, dtype: np.dtype) -> None:
    """The element-wise helpers and the leaf of the modified LU (its module loaded)."""
    b = 3
    ws = Workspace(xp, 5, b, dtype)
    x = ws.x.reshape(5, b)
    _upper_and_identity(xp, ws.g, ws.inv)
    identity_into(xp, ws.inv)
    _departure(xp, ws.g, ws.delta)
    t = xp.empty((b, b), dtype)
    _minus_u_d(xp, ws.g, ws.d, t)
    panel = xp.zeros((5, b), dtype, order="F")
    assign(x, panel)
    flag = xp.zeros(1, np.int32)
    _write(xp, panel, ws.g, ws.r, ws.d, ws.y.reshape(5, b), t, ws.d, ws.info, ws.delta, flag)
    a = xp.eye(b, dtype=dtype)
    backend.modified_lu(a, ws.d, backend.compute)
