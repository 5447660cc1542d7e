"""Stage 1 of the two-stage Hermitian eigensolver: the reduction of a Hermitian matrix to band
form on the process grid (LAPACK ``xsytrd_sy2sb``/``xhetrd_he2hb``, SLATE ``he2hb``), the
gather of the band to every process, and the back-transformation of the band's eigenvectors.

The working matrix ``w`` (``n x n``, square blocks ``nb x nb``, source process ``(0, 0)``)
holds the Hermitian matrix in its lower triangle; its strict upper triangle is never read
(nor written). The reduction computes ``Q^H A Q = B``, ``B`` Hermitian with bandwidth ``nb``,
``Q = Q_0 Q_1 ... Q_{K-1}``, ``Q_k = I - V_k T_k V_k^H`` (compact WY) acting on rows and columns
``>= (k + 1) nb``. Step ``k`` (``k0 = k nb``, ``m = n - k0 - nb`` trailing rows, ``e`` the
panel's width):

1. *Panel QR* of ``w[k0 + nb:, k0:k0 + e]`` (a copy: :func:`ops.lapack._householder` factors it on
   the grid, one block step: its panel gather, ``geqrf`` on every process, ``T``); its ``R``
   (``r x e`` upper trapezoidal) is written back over the panel's first rows (the band's
   subdiagonal block); ``V_k`` is made explicit (unit lower trapezoidal, ``m x r``) and ``T_k``
   (``r x r``, the same on every process) distributed as a small matrix.
2. *Two-sided update* of the trailing matrix ``C = w[k0 + nb:, k0 + nb:]`` (a view of ``w``,
   updated in place), ``C := Q_k^H C Q_k`` as ``xsytrd_sy2sb`` does it:
   ``X = C V T`` (SYMM on ``C``'s lower triangle -- two TRMMs for complex dtypes, whose
   SYMM is complex symmetric -- then GEMM by the small ``T``),
   ``Y = X - 1/2 V (T^H (V^H X))`` (three GEMMs with ``r``-wide operands) and
   ``C := C - V Y^H - Y V^H`` (HER2K on the lower triangle).

The lower band of ``w`` (diagonals ``0..nb``) then holds ``B``. *Band gather*: every process
picks the elements of the lower band among its local elements and one ``allgather`` brings
them to every process (``n (nb + 1)`` numbers in all), which assembles LAPACK's lower band
storage ``band[i - j, j] = B[i, j]``: every process holds the same bytes.

*One process, eigenvalues only, real dtypes* (:func:`reduce_local`): the same steps on the local
matrix with the backend's own BLAS and LAPACK calls, enqueued on its compute stream with no
host synchronisation until the end: ``geqrf`` of a column-major copy of the panel, ``T`` from
``T^{-1} = diag(1 / tau) + triu(V^T V, 1)`` (the compact WY identity behind LAPACK's
``xlarft``; one GEMM and one TRSM in place of ``nb`` small products), ``X = C V`` as two
TRMMs on ``C``'s lower triangle (``tril(C) V + tril(C, -1)^T V``), the three small GEMMs and
one SYR2K. Its scratch is allocated once at the largest step's size and reused, which the one
stream orders. The distributed operators' plans, exchanges and host synchronisations are what
the one-process route saves: measured on one H100 at ``n = 16384``, ``nb = 64`` (255 steps),
stage 1 through them took 1.72 s (``docs/eigh.md``).

*Back-transform* (:func:`back_transform`): ``Z := Q Z = Q_0 (Q_1 (... (Q_{K-1} Z)))``, step
``k`` (from the last to the first) ``Z[k0 + nb:, :] -= V_k (T_k (V_k^H Z[k0 + nb:, :]))``:
three distributed GEMMs on a view of ``Z``.

Communication: every product is one of the distributed operators (:func:`ops.blas3.symm.symm`,
:func:`ops.blas3.gemm.gemm`, :func:`ops.blas3.syr2k.syr2k`, each a plan over the one-sided exchange
with its own signal protocol), the panel QR is :mod:`ops.lapack._householder`'s (its exchanges), the
panel copy and the write-back of ``R`` are copies over the exchange (indexing), the band gather one
host ``allgather``. Nothing depends on the data: every process runs the same sequence of
collectives.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...array import BlockCyclicArray
from ...backends._host_copy import assign
from ...creation import eye
from ...layout import BlockCyclicLayout
from ..blas3.gemm import gemm
from ..blas3.symm import symm
from ..blas3.syr2k import syr2k
from ..blas3.trmm import trmm
from ..engine._replicated import distribute
from ..engine._triangle import local_diagonal, zero_triangle
from ..engine.indexing import window
from ..engine.redistribute import redistribute
from . import _householder as hh

__all__ = [
    "Reduction", "reduce_to_band", "reduce_local", "reduce_local_array", "back_transform",
    "back_transform_local",
]  # fmt: skip


@dataclass
class Reduction:
    """The band (lower storage, host, the same on every process) and, per step, ``(row0, V,
    T)``: ``Q_k = I - V T V^H`` acting on rows ``>= row0`` (kept only when asked)."""

    band: np.ndarray
    steps: list[tuple[int, BlockCyclicArray, BlockCyclicArray]] = field(default_factory=list)
    #: seconds per stage on this process (stage 1, band gather)
    times: dict[str, float] = field(default_factory=dict)


def _explicit_v(fw: BlockCyclicArray, r: int) -> BlockCyclicArray:
    """The unit lower trapezoidal ``V`` (``m x r``) of the factored panel ``fw`` (``geqrf``
    layout: ``R`` on and above the diagonal)."""
    v = window(fw, (0, fw.shape[0]), (0, r)).copy()
    zero_triangle(v.layout, v.grid, v._data, "U", 0)
    one = eye(v.shape[0], r, dtype=v.dtype, block=v.block, grid=v.grid)
    return v + one  # type: ignore[no-any-return]


def _small(t: Any, block: int, like: BlockCyclicArray) -> BlockCyclicArray:
    """The ``r x r`` device array ``t`` (the same on every process) as a distributed matrix."""
    r = int(t.shape[0])
    return distribute(t, BlockCyclicLayout((r, r), (block, block), like.grid.shape), like.grid)  # type: ignore[no-any-return]


def _hemm(c: BlockCyclicArray, v: BlockCyclicArray) -> BlockCyclicArray:
    """``C V`` for the Hermitian ``C`` held in its lower triangle: SYMM for real dtypes; for
    complex ones (SYMM is complex symmetric, there is no distributed HEMM) ``tril(C) V +
    (tril(C, -1)^H + I) V - V`` by two TRMMs."""
    if np.dtype(c.dtype).kind != "c":
        return symm(c, v, side="left", lower=True)
    x = trmm(c, v, side="left", lower=True, trans="N")
    x2 = trmm(c, v, side="left", lower=True, trans="C", unit_diagonal=True)
    return x + x2 - v  # type: ignore[no-any-return]


def _real_diagonal(w: BlockCyclicArray) -> None:
    """Drop the imaginary part of a complex ``w``'s diagonal (a Hermitian matrix has none;
    LAPACK ignores it, and so must the two-sided updates)."""
    if np.dtype(w.dtype).kind != "c":
        return
    _, r, c = local_diagonal(w.layout, w.grid)
    if r is not None:
        w.backend.launch(w.backend.compute, _set_real, w._data, r, c)


def _set_real(data: Any, r: Any, c: Any) -> None:
    data[r, c] = data[r, c].real


def reduce_to_band(w: BlockCyclicArray, keep: bool) -> Reduction:
    """Reduce the Hermitian matrix in the lower triangle of ``w`` (stored, square blocks,
    source ``(0, 0)``; overwritten) to band form of bandwidth ``w.block[0]`` and gather the
    band to every process; ``keep``: keep the reflectors for :func:`back_transform`.
    Collective."""
    if w.grid.size == 1 and not keep and np.dtype(w.dtype).kind == "f":
        return reduce_local(w)
    n = w.shape[0]
    nb = int(w.block[0])
    be = w.backend
    t0 = time.perf_counter()
    _real_diagonal(w)
    steps: list[tuple[int, BlockCyclicArray, BlockCyclicArray]] = []
    for k0 in range(0, max(n - nb, 0), nb):
        e = min(nb, n - k0)
        row0 = k0 + nb
        m = n - row0
        if m <= 0:
            break
        panel = window(w, (row0, n), (k0, k0 + e)).copy()
        if panel.layout.src != (0, 0):
            panel = redistribute(panel)
        f = hh._Pipeline(panel).run()
        r = f.refl(0)
        # R -> the band's subdiagonal block
        w[row0 : row0 + r, k0 : k0 + e] = hh.r_factor(f, r)
        v = _explicit_v(f.w, r)
        t = _small(f.ts[0], nb, v)
        c = window(w, (row0, n), (row0, n))
        x = _hemm(c, v)  # C V
        x = gemm(x, t)  # X = C V T
        vx = gemm(v, x, trans_a="C")  # V^H X
        s = gemm(t, vx, trans_a="C")  # T^H V^H X
        gemm(v, s, C=x, alpha=-0.5, beta=1)  # Y = X - 1/2 V T^H V^H X
        syr2k(v.H, x.H, C=c, trans="C", lower=True, alpha=-1, beta=1)  # C -= V Y^H + Y V^H
        if keep:
            steps.append((row0, v, t))
    be.synchronize()
    t1 = time.perf_counter()
    band = gather_band(w, nb)
    t2 = time.perf_counter()
    return Reduction(band, steps, {"stage 1": t1 - t0, "band gather": t2 - t1})


def reduce_local(w: BlockCyclicArray) -> Reduction:
    """:func:`reduce_to_band` of a real ``w`` held by one process, keeping no reflectors: the
    local steps of the module docstring. Its ``times`` as :func:`reduce_to_band`'s."""
    nb = int(w.block[0])
    t0 = time.perf_counter()
    reduce_local_array(w.backend, w._data, nb)
    t1 = time.perf_counter()
    band = local_band(w.backend, w._data, nb)  # one process: its diagonals, no index maps
    t2 = time.perf_counter()
    return Reduction(band, [], {"stage 1": t1 - t0, "band gather": t2 - t1})


def reduce_local_array(be: Any, a: Any, nb: int, keep: bool = False) -> list[tuple[int, Any, Any]]:
    """The local steps of :func:`reduce_local` on the backend's ``n x n`` array ``a`` (C-ordered,
    real, the symmetric matrix in its lower triangle; overwritten by the band and zeros below
    it): no communication, so one process may run it alone (the gathered route's root).
    ``keep``: returns each step's ``(row0, V, T)`` (local arrays, ``Q_k = I - V T V^T`` on rows
    ``>= row0``) for :func:`back_transform_local`; else an empty list. Returns when the
    device has finished."""
    n = a.shape[0]
    xp, st = be.xp, be.compute
    dt = a.dtype
    top = max(n - nb, 0)  # the most trailing rows of a step
    flat = {k: xp.empty(top * nb, dt) for k in ("p", "v", "x", "x2", "y")}
    small = {k: xp.empty(nb * nb, dt) for k in ("g", "t", "z", "s")}
    tau, info = xp.empty(nb, dt), xp.zeros(1, np.int32)
    kept: list[tuple[int, Any, Any]] = []
    for k0 in range(0, top, nb):
        row0 = k0 + nb
        m = n - row0
        e = min(nb, m)  # the reflectors of the step
        p = flat["p"][: m * nb].reshape((m, nb), order="F")
        v, x, x2, y = (flat[k][: m * e].reshape(m, e) for k in ("v", "x", "x2", "y"))
        g, t, z, sm = (small[k][: e * e].reshape(e, e) for k in ("g", "t", "z", "s"))
        be.launch(st, assign, p, a[row0:, k0 : k0 + nb])
        be.geqrf(p, tau[:e], info, st)
        be.launch(st, _panel_out, xp, a, row0, k0, p, tau[:e], v)
        be.gemm(1, v, v, 0, g, "T", "N", st)  # V^T V
        be.launch(st, _t_inverse, xp, g, tau[:e], t)  # g := T^-1, t := I
        be.trsm(1, g, t, "L", "U", "N", "N", st)  # t := T
        c = a[row0:, row0:]
        be.trmm(1, c, v, "L", "L", "N", "N", st, out=x)  # tril(C) V
        be.trmm(1, c, v, "L", "L", "T", "U", st, out=x2)  # (tril(C, -1)^T + I) V
        be.launch(st, _hemm_sum, x, x2, v)  # X = C V
        be.gemm(1, x, t, 0, y, "N", "N", st)  # C V T
        be.gemm(1, v, y, 0, z, "T", "N", st)  # V^T C V T
        be.gemm(1, t, z, 0, sm, "T", "N", st)  # T^T V^T C V T
        be.gemm(-0.5, v, sm, 1, y, "N", "N", st)  # Y
        be.syr2k(-1, v, y, 1, c, "L", "N", st)  # C -= V Y^T + Y V^T
        if keep:
            be.launch(st, _keep_step, kept, row0, v, t)
    be.synchronize()
    return kept


def _keep_step(kept: list[tuple[int, Any, Any]], row0: int, v: Any, t: Any) -> None:
    kept.append((row0, v.copy(), t.copy()))


#: consecutive steps of stage 1 whose block reflectors :func:`back_transform_local` applies as
#: one (``MERGE_STEPS * nb`` wide: wider GEMMs than the band's ``nb``)
MERGE_STEPS = 4


def _merge_steps(steps: list[tuple[int, Any, Any]], v: Any, t: Any) -> None:
    """``I - V T V^T`` (into ``v``, ``t``) for the product ``Q_a Q_b ...`` of consecutive steps
    (LAPACK's forward compact WY: ``V = [V_a, V_b]`` with ``V_b`` from its own first row,
    ``T = [[T_a, -T_a V_a^T V_b T_b], [0, T_b]]``)."""
    row0 = steps[0][0]
    v[...] = 0
    t[...] = 0
    c = 0
    for r, vk, tk in steps:
        e = int(vk.shape[1])
        v[r - row0 :, c : c + e] = vk
        t[c : c + e, c : c + e] = tk
        if c:
            t[:c, c : c + e] = -t[:c, :c] @ ((v[:, :c].T @ v[:, c : c + e]) @ tk)
        c += e


def back_transform_local(be: Any, steps: list[tuple[int, Any, Any]], z: Any) -> None:
    """``z := Q z`` in place for the local ``n x k`` array ``z`` (its transpose C-ordered, or
    ``z`` itself) and the steps :func:`reduce_local_array` kept: per step from the last,
    ``Z[row0:] -= V (T (V^T Z[row0:]))`` as three local GEMMs on ``z^T``. Returns when the
    device has finished."""
    if not steps or z.shape[1] == 0:
        return
    xp, st = be.xp, be.compute
    merged: list[tuple[int, Any, Any]] = []
    for i in range(0, len(steps), MERGE_STEPS):
        group = steps[i : i + MERGE_STEPS]
        m, total = int(group[0][1].shape[0]), sum(int(v.shape[1]) for _, v, _ in group)
        v, t = xp.empty((m, total), z.dtype), xp.empty((total, total), z.dtype)
        be.launch(st, _merge_steps, group, v, t)  # (filled in stream order)
        merged.append((group[0][0], v, t))
    steps = merged
    zt = z.T
    k = zt.shape[0]
    width = max(int(v.shape[1]) for _, v, _ in steps)
    xs, ys = xp.empty((k, width), z.dtype), xp.empty((k, width), z.dtype)
    for row0, v, t in reversed(steps):
        e = int(v.shape[1])
        zs = zt[:, row0:]
        x, y = xs[:, :e], ys[:, :e]
        be.gemm(1, zs, v, 0, x, "N", "N", st)  # Z^T V
        be.gemm(1, x, t, 0, y, "N", "T", st)  # Z^T V T^T
        be.gemm(-1, y, v, 1, zs, "N", "T", st)  # Z^T -= Z^T V T^T V^T
    be.synchronize()


def local_band(be: Any, a: Any, b: int) -> np.ndarray:
    """LAPACK's lower band storage ``band[d, j] = a[j + d, j]`` (``0 <= d <= b``) of the
    backend's ``n x n`` array ``a`` held whole by this process, as a host array: its ``b + 1``
    diagonals, no communication."""
    n = a.shape[0]
    xp = be.xp
    band = xp.zeros((b + 1, n), a.dtype)
    for d in range(min(b, n - 1) + 1):
        band[d, : n - d] = xp.diagonal(a, -d)
    return np.asarray(be.asnumpy(band))


def _panel_out(xp: Any, a: Any, row0: int, k0: int, p: Any, tau: Any, v: Any) -> None:
    """The factored panel ``p`` (``geqrf`` layout) out: its ``R`` over the panel's rows of
    ``a`` (zeros below), its explicit unit lower trapezoidal ``V`` into ``v``; a reflector with
    ``tau = 0`` (the identity) gets a zero column, so that ``T``'s unit diagonal entry
    there (:func:`_t_inverse`) acts on nothing."""
    e, nb = v.shape[1], p.shape[1]
    a[row0 : row0 + e, k0 : k0 + nb] = xp.triu(p[:e])
    a[row0 + e :, k0 : k0 + nb] = 0
    v[...] = xp.tril(p[:, :e], -1)
    idx = xp.arange(e)
    v[idx, idx] = 1
    v *= (tau != 0)[None, :]


def _t_inverse(xp: Any, g: Any, tau: Any, t: Any) -> None:
    """``g := T^{-1} = diag(1 / tau) + triu(V^T V, 1)`` from ``g = V^T V`` (1 where
    ``tau = 0``), ``t := I``."""
    e = g.shape[0]
    nz = tau != 0
    d = xp.where(nz, 1 / xp.where(nz, tau, 1), 1)
    g[...] = xp.triu(g, 1)
    idx = xp.arange(e)
    g[idx, idx] = d
    t[...] = 0
    t[idx, idx] = 1


def _hemm_sum(x: Any, x2: Any, v: Any) -> None:
    x += x2
    x -= v


def gather_band(w: BlockCyclicArray, b: int) -> np.ndarray:
    """LAPACK's lower band storage ``band[i - j, j] = w[i, j]`` (``0 <= i - j <= b``) of the
    stored ``w``, on every process: one ``allgather`` of each process's band elements (picked
    from index maps of ``O(local columns x b)`` entries, not of the local matrix)."""
    n = w.shape[0]
    be, lay, grid = w.backend, w.layout, w.grid
    rows, cols = lay.local_rows(grid.myrow), lay.local_cols(grid.mycol)  # host index maps
    part = None
    if rows.size and cols.size:
        local_of = np.full(n + b + 1, -1, np.int64)  # global row -> local row, -1 elsewhere
        local_of[rows] = np.arange(rows.size)
        cand = local_of[cols[:, None] + np.arange(b + 1)[None, :]]  # rows c .. c + b
        lj, dd = np.nonzero(cand >= 0)
        if lj.size:
            li = cand[lj, dd]
            vals = be.asnumpy(w._data[be.xp.asarray(li), be.xp.asarray(lj)])
            part = (rows[li], cols[lj], vals)
    band = np.zeros((b + 1, n), w.dtype)
    for p in be.allgather(part):
        if p is not None:
            band[p[0] - p[1], p[1]] = p[2]
    return band


def back_transform(red: Reduction, z: BlockCyclicArray) -> None:
    """``z := Q z`` in place (``z`` stored, the reduced matrix's rows and row blocks, source
    row 0). Collective."""
    for row0, v, t in reversed(red.steps):
        zk = window(z, (row0, z.shape[0]), (0, z.shape[1]))
        y = gemm(v, zk, trans_a="C")  # V^H Z
        y = gemm(t, y)  # T V^H Z
        gemm(v, y, C=zk, alpha=-1, beta=1)
