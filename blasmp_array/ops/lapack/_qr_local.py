"""Householder QR of a matrix one process holds whole (a ``1 x 1`` grid), with the panel
factorisation on the comm stream beside the trailing update (MAGMA's ``xgeqrf_gpu``).

:func:`geqrf_lookahead` gives what the library's one ``geqrf`` gives: a column-major factored
matrix in LAPACK's layout (``R`` on and above the diagonal, the Householder vectors below it)
and the scalars ``tau``, so that ``orgqr``/``ormqr`` and ``R`` are read from it unchanged. It
runs on the look-ahead skeleton of :mod:`ops.lapack._lookahead` (shared with the one-process
LU). Used where the streams run concurrently (``backend.concurrent_streams``: one GPU) from
``min(m, n) >=`` :data:`LOOKAHEAD_MIN` on.

Why: cuSOLVER's ``geqrf`` runs its panels and its trailing updates one after the other on one
stream; here the trailing update is GEMMs as wide as the panel (:data:`PANEL` columns: GEMMs of
depth ``PANEL``) and the panels run beside it.

Storage: the trailing matrix is updated in a row-major working copy ``a`` (cuBLAS's layout in
this backend); each panel is factored by the library's ``geqrf`` (``geqrt`` where the backend
has it, which also gives ``T``) in a column-major panel buffer; the factored matrix ``fa`` is
column-major and written piece by piece as pieces become final.

Step ``k`` (panel ``k`` = columns ``[k0, k1)``, ``r`` reflectors; block column ``k + 1`` =
``[k1, k2)``):

1. host: nothing (no pivots), unless CholeskyQR2 factored panel ``k`` (below): its verdict;
2. compute stream, after panel ``k``'s factorisation: the factored panel into ``fa[k0:,
   k0:k1]``, its explicit ``V`` (row-major, unit lower trapezoidal) and ``T`` (``xlarft``:
   one HERK and one small TRSM, :func:`ops.lapack._reflectors.t_factor`); block column
   ``k + 1`` := ``(I - V T^H V^H)`` times itself (``W = V^H C``, ``W := T^H W``,
   ``C -= V W``: two GEMMs and a TRMM); panel ``k + 1`` copied into the other panel buffer, an
   event;
3. comm stream, after that event: the ``geqrf`` of panel ``k + 1``, an event;
4. compute stream, beside step 3: the same update of the columns right of block column
   ``k + 1``; then rows ``[k0, k0 + r)`` right of the panel are final rows of ``R``: copied
   into ``fa``.

The panel factorisation (step 3): where :func:`cholqr_panels` holds (the GPU) a panel at least
:data:`CHOLQR_PANEL_RATIO` times as tall as wide is factored by CholeskyQR2 and Householder
reconstruction (:mod:`ops.lapack._cholqr_panel`: GEMM-rate flops, and ``T`` with it); then the
host waits for that panel at step 1 and reads its verdict, and a panel out of CholeskyQR2's
range is factored again from the matrix by ``geqrf`` on the compute stream at step 2 (its
columns of ``a`` are not written after they were loaded). Otherwise ``geqrt`` where the
backend has it (the CPU; it gives ``T``), else ``geqrf``.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..._alloc import scratch
from ...backends._host_copy import assign
from ...backends.base import Backend
from ..engine._warmup import warmup_kernels
from . import _cholqr_panel, _lookahead
from ._lu_local import panel_edges
from ._reflectors import apply_block, t_factor, unit_lower

__all__ = ["geqrf_lookahead", "cholqr_panels", "cholqr_fits", "PANEL", "LOOKAHEAD_MIN", "Q_BLOCK"]

#: Panel width of :func:`geqrf_lookahead` (columns per step): 512 and 1024 within 2% of each
#: other on one H100 at n = 16384, 2048 6-10% slower than 512 (``tools/geqrf_panel_sweep.py``,
#: docs/qr.md).
PANEL = 512

#: The one-process QR uses :func:`geqrf_lookahead`, and forms ``Q`` in blocks of
#: :data:`Q_BLOCK` reflectors, from this ``min(m, n)`` on, where the streams run concurrently
#: (one GPU). On one H100: at n = 16384 ``np.linalg.qr`` 0.387 s against 0.507 s for
#: ``cupy.linalg.qr``; at n = 8192 and 4096 the library's calls are the faster (``mode='r'``
#: 0.0797 s against 0.0839 s with ``geqrf`` panels and 0.0998 s with CholeskyQR2 panels at
#: 8192; docs/qr.md).
LOOKAHEAD_MIN = 16384

#: Reflectors per block of the one-process ``Q`` formed as GEMMs
#: (``_householder._blocked_q``) from :data:`LOOKAHEAD_MIN` on; ``$BLASMP_QR_LOCAL_Q_BLOCK``
#: overrides it at every size (0: the library's ``orgqr``).
Q_BLOCK = 1024

#: whether panels are factored by CholeskyQR2 and Householder reconstruction
#: (:mod:`ops.lapack._cholqr_panel`); None: where the backend runs CholeskyQR's passes as
#: GEMMs (``Backend.cholqr_gemms``: the GPU). One H100, n = 16384: one process 0.387 s
#: against 0.444 s with ``geqrf`` panels, 2 x 2 processes (block 1024) 0.610 s against 0.644 s
#: (docs/qr.md); ``$BLASMP_QR_PANEL`` ``cholqr`` or ``lapack`` overrides it
CHOLQR_PANEL: bool | None = None

#: the least ``rows / width`` of a panel factored by CholeskyQR2 (a square panel's condition
#: number is far larger than a tall one's, and the last panels are cheap for ``geqrf``)
CHOLQR_PANEL_RATIO = 2


def cholqr_fits(rows: int, width: int) -> bool:
    """Whether a ``rows x width`` panel is tall enough to be factored by CholeskyQR2
    (:data:`CHOLQR_PANEL_RATIO`)."""
    return width > 0 and rows >= CHOLQR_PANEL_RATIO * width


def cholqr_panels(be: Backend) -> bool:
    """Whether the tall panels of :func:`geqrf_lookahead` and of the distributed Householder
    QR are factored by CholeskyQR2 and Householder reconstruction (:data:`CHOLQR_PANEL`)."""
    env = os.environ.get("BLASMP_QR_PANEL", "")
    if env in ("cholqr", "lapack"):
        return env == "cholqr"
    return be.cholqr_gemms if CHOLQR_PANEL is None else CHOLQR_PANEL


def geqrf_lookahead(be: Backend, a: Any, nb: int = 0) -> tuple[Any, Any]:
    """QR of the local ``m x n`` ``a`` (not modified) in panels of ``nb`` columns (default
    :data:`PANEL`), with look-ahead (see the module docstring): ``(fa, tau)``, the column-major
    factored matrix of LAPACK's ``xgeqrf`` and its ``min(m, n)`` scalars, on the device.
    Synchronises at the end."""
    nb = nb or PANEL
    m, n = a.shape
    xp = be.xp
    fa = scratch(xp, (m, n), a.dtype, order="F")
    tau = xp.zeros(min(m, n), a.dtype)
    if min(m, n) == 0:
        return fa, tau
    edges = panel_edges(min(m, n), nb, 0)
    work = None
    if cholqr_panels(be) and cholqr_fits(m, edges[1] - edges[0]):
        work = _cholqr_panel.Workspace(xp, m, edges[1] - edges[0], a.dtype)
    steps = _GeqrfSteps(be, a, fa, tau, edges, work)
    _lookahead.run(be, steps.edges, m, a.dtype, steps)
    return fa, tau


class _GeqrfSteps(_lookahead.MatrixSteps):
    """The QR's part of :func:`ops.lapack._lookahead.run` (steps 1-4 of the module docstring);
    its matrix is the row-major working copy of ``a``."""

    def __init__(
        self,
        be: Backend,
        a: Any,
        fa: Any,
        tau: Any,
        edges: list[int],
        work: _cholqr_panel.Workspace | None,
    ) -> None:
        super().__init__(be, be.xp.empty_like(a), edges)
        self.fa, self.tau, self.work = fa, tau, work
        self.m, self.n = a.shape
        be.begin()
        be.launch(be.compute, be.copy_local, self.a, a)

    def outputs(self, k: int, panel: Any) -> Any:
        """``(tau, T or None, INFO, flag or None)`` of panel ``k`` (``tau`` a view of the
        result's; the flag where CholeskyQR2 factors it)."""
        xp, k0 = self.be.xp, self.edges[k]
        r = min(panel.shape)
        cholqr = self.work is not None and cholqr_fits(*panel.shape)
        t = xp.empty((r, r), self.fa.dtype) if self.be.has_geqrt or cholqr else None
        flag = xp.zeros(1, np.int32) if cholqr else None
        return self.tau[k0 : k0 + r], t, xp.zeros(1, np.int32), flag

    def factor(self, k: int, panel: Any, out: Any, stream: Any) -> None:
        self._factor(panel, out, stream)

    def _factor(self, panel: Any, out: Any, stream: Any) -> None:
        tau, t, info, flag = out
        if flag is not None:
            assert self.work is not None
            _cholqr_panel.factor(self.be, self.work, panel, tau, t, flag, stream)
        elif t is not None:
            self.be.geqrt(panel, tau, t, info, stream)
        else:
            self.be.geqrf(panel, tau, info, stream)

    def take(self, k: int, out: Any, done: Any) -> Any:
        """Nothing to wait for, unless CholeskyQR2 factored the panel: then its verdict."""
        redo = False
        if out[3] is not None:
            self.be.host_wait(done)
            redo = int(self.be.asnumpy(out[3])[0]) == 0
        return {"out": out, "keep": [], "redo": redo}  # accept() adds V and T

    def accept(self, k: int, panel: Any, state: Any) -> None:
        """The factored panel into ``fa`` (factored again by ``geqrt``/``geqrf`` where
        CholeskyQR2 was out of its range); ``V`` explicit and row-major; ``T``."""
        be, xp = self.be, self.be.xp
        k0, k1, _ = self.block_columns(k)
        if state["redo"]:
            tau, t, info, _ = state["out"]
            t = t if be.has_geqrt else None
            state["out"] = tau, t, info, None
            be.launch(be.compute, be.copy_local, panel, self.a[k0:, k0:k1])
            self._factor(panel, state["out"], be.compute)
        tau, t, _, _ = state["out"]
        r = tau.shape[0]
        be.launch(be.compute, be.copy_local, self.fa[k0:, k0:k1], panel)
        v = xp.empty((self.m - k0, r), self.fa.dtype)
        be.launch(be.compute, be.copy_local, v, panel[:, :r])
        be.launch(be.compute, unit_lower, xp, v, r, r)
        state["v"] = v
        state["t"] = t if t is not None else t_factor(be, v, tau, state["keep"])

    def update_next(self, k: int, panel: Any, state: Any) -> None:
        k0, k1, k2 = self.block_columns(k)
        self._apply_qh(state, self.a[k0:, k1:k2])

    def update_rest(self, k: int, panel: Any, state: Any) -> None:
        k0, k1, k2 = self.block_columns(k)
        self._apply_qh(state, self.a[k0:, k2:])
        if k1 < self.n:  # rows k0:k0+r right of the panel are final rows of R
            rows = slice(k0, k0 + state["v"].shape[1])
            self.be.launch(
                self.be.compute, self.be.copy_local, self.fa[rows, k1:], self.a[rows, k1:]
            )

    def _apply_qh(self, state: Any, c: Any) -> None:
        """``c := Q_k^H c`` on the compute stream; its workspace kept with the step."""
        state["keep"].append(apply_block(self.be, state["v"], state["t"], c, "C"))


@warmup_kernels
def _sample(backend: Backend, xp: Any, dtype: np.dtype) -> None:
    """The copies between the row-major matrix and the column-major panel and result, and the
    explicit ``V``."""
    a = xp.zeros((5, 4), dtype)
    panel = xp.zeros((4, 3), dtype, order="F")
    fa = xp.zeros((5, 4), dtype, order="F")
    assign(panel, a[1:, 1:])
    assign(fa[1:, 1:], panel)
    assign(fa[1:2, 2:], a[1:2, 2:])
    v = xp.empty((4, 2), dtype)
    assign(v, panel[:, :2])
    unit_lower(xp, v, 2, 2)
