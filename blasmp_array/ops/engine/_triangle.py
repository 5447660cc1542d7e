"""Triangles of local matrices, computed where the data lives.

One helper for every operator that needs "the elements of this rank's local matrix on or below
(above) a diagonal": the SYRK/HERK scale of one triangle, ``solve_triangular``'s
``check_finite`` on the referenced triangle, the symmetric fill of ``A.T @ A``.

A local matrix holds the global rows ``layout.local_rows(myrow)`` and columns
``layout.local_cols(mycol)``. Masks are built on the backend's device by broadcasting these two
index *vectors* (``O(m + n)`` integers, uploaded once and cached per layout), never as an
``m x n`` host array: on the GPU an ``n x n`` host mask cost more than the BLAS call it served
(0.2 s of a 0.3 s ``solve_triangular`` at ``n = 16384``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...backends.base import Backend
from ...layout import BlockCyclicLayout
from ._warmup import sample_matrix, warmup_kernels

__all__ = [
    "local_index_vectors",
    "local_diagonal",
    "triangle_mask",
    "index_triangle",
    "scale_triangle",
    "nonfinite_flag",
    "triangle_nonfinite_flag",
    "zero_triangle",
    "add_triangle",
    "mirror_triangle",
    "symmetric_from_triangle",
]


def local_index_vectors(layout: BlockCyclicLayout, grid: Any) -> tuple[Any, Any]:
    """The global row and column indices of this rank's local matrix, as 1-D device arrays
    (cached on the backend per layout and grid position)."""
    b = grid.backend
    cache: dict[Any, tuple[Any, Any]] = b.__dict__.setdefault("_index_vectors", {})
    key = (layout, grid.myrow, grid.mycol)
    hit = cache.get(key)
    if hit is None:
        if len(cache) > 64:  # layouts come and go with user arrays: keep the cache small
            cache.clear()
        hit = (b.asarray(layout.local_rows(grid.myrow)), b.asarray(layout.local_cols(grid.mycol)))
        cache[key] = hit
    return hit


def local_diagonal(layout: BlockCyclicLayout, grid: Any) -> tuple[Any, Any, Any]:
    """``(i, r, c)``: the global indices ``i`` of the diagonal entries of this rank's local
    matrix and their local row/column positions, as 1-D device arrays (cached like
    :func:`local_index_vectors`); ``(None, None, None)`` when it holds none."""
    b = grid.backend
    cache: dict[Any, tuple[Any, Any, Any]] = b.__dict__.setdefault("_diagonal_indices", {})
    key = (layout, grid.myrow, grid.mycol)
    hit = cache.get(key)
    if hit is None:
        if len(cache) > 64:
            cache.clear()
        rows = layout.local_rows(grid.myrow)
        cols = layout.local_cols(grid.mycol)
        i, r, c = np.intersect1d(rows, cols, assume_unique=True, return_indices=True)
        hit = (None, None, None) if i.size == 0 else (b.asarray(i), b.asarray(r), b.asarray(c))
        cache[key] = hit
    return hit


def triangle_mask(layout: BlockCyclicLayout, grid: Any, uplo: str, k: int = 0) -> Any:
    """Device boolean mask of the local elements ``(i, j)`` with ``j - i <= k`` (``uplo='L'``,
    NumPy's ``tril(., k)``) or ``j - i >= k`` (``'U'``, ``triu(., k)``)."""
    rows, cols = local_index_vectors(layout, grid)
    return index_triangle(rows, cols, uplo, k)


def index_triangle(rows: Any, cols: Any, uplo: str, k: int = 0) -> Any:
    """Where row ``rows[i]`` and column ``cols[j]`` (any global indices, e.g. a window's) lie
    in ``tril(., k)`` (``uplo='L'``: ``j - i <= k``) or ``triu(., k)`` (``'U'``: ``j - i >= k``)."""
    # one broadcast comparison straight to booleans (no m x n integer temporary)
    shifted = (rows + k)[:, None]
    return cols[None, :] <= shifted if uplo == "L" else cols[None, :] >= shifted


def scale_triangle(b: Any, c: Any, beta: Any, mask: Any) -> None:
    """Enqueue ``c[mask] := beta c[mask]`` on the compute stream (``beta == 0`` overwrites:
    NaNs in the triangle do not survive); one fused select, no boolean indexing."""
    if beta == 1 or c.size == 0:
        return
    b.launch(b.compute, _select_scaled, b.xp, c, beta, mask)


def _select_scaled(xp: Any, c: Any, beta: Any, mask: Any) -> None:
    scaled = xp.zeros((), c.dtype) if beta == 0 else c * beta
    xp.copyto(c, scaled, where=mask)


def nonfinite_flag(xp: Any, a: Any, mask: Any = None) -> Any:
    """A 0-d device boolean: whether ``a`` (restricted to ``mask``) holds a NaN or an infinity
    (one device reduction; the caller reads it, with other flags, in one transfer)."""
    if mask is None and xp is not np and np.dtype(a.dtype).kind in "fc" and a.ndim == 2:
        return _device_nonfinite(xp, a, "A")
    if mask is None and xp is np:
        return _host_nonfinite(a)
    bad = ~xp.isfinite(a)
    if mask is not None:
        bad &= mask
    return bad.any()


def _host_nonfinite(a: np.ndarray) -> np.bool_:
    """Whether the host array ``a`` holds a NaN or an infinity: its sum first (one pass, no
    temporary; a finite sum proves every element finite), the elementwise test only when the
    sum is not finite (a non-finite element, or an overflow of the sum)."""
    if a.size == 0:
        return np.False_
    with np.errstate(all="ignore"):
        total = a.sum()
    if np.isfinite(total):
        return np.False_
    return np.bool_((~np.isfinite(a)).any())


def _parts(a: Any) -> tuple[Any, Any]:
    """``(real, imag)`` views of a complex ``a``; ``(a, a)`` for a real one."""
    return (a.real, a.imag) if np.dtype(a.dtype).kind == "c" else (a, a)


def _device_nonfinite(xp: Any, a: Any, where: str, rows: Any = None, cols: Any = None) -> Any:
    """:func:`_nonfinite_kernel` on the 2-D device ``a``, reduced per row, then the row flags
    (``rows``/``cols``: the global indices of ``a``'s rows, shifted, and columns)."""
    args = _parts(a) if where == "A" else (*_parts(a), rows[:, None], cols[None, :])
    return _nonfinite_kernel(xp, where)(*args, axis=1).any()


_NONFINITE_KERNELS: dict[str, Any] = {}


def _nonfinite_kernel(xp: Any, where: str) -> Any:
    """CuPy reduction: whether an element ``re + i im`` not finite lies in ``where`` ('L':
    ``col <= row``, 'U': ``col >= row``, with ``row``/``col`` the broadcast global indices, the
    row ones shifted by the diagonal's offset; 'A': anywhere, no indices). One pass that reads
    each element once and writes nothing but the flag: measured on one H200 at n = 16384, the
    ``(~isfinite(x)).any()`` per column panel it replaces took 4 ms of a 66 ms Cholesky.
    Reduce it along ``axis=1`` and the row flags with ``any()``: CuPy gives each output of a
    user reduction one thread block, so a reduction to one flag ran on one block (0.18 s)."""
    kernel = _NONFINITE_KERNELS.get(where)
    if kernel is None:
        inside = {"L": "col <= row", "U": "col >= row", "A": "true"}[where]
        params = "T re, T im" + ("" if where == "A" else ", int64 row, int64 col")
        kernel = _NONFINITE_KERNELS[where] = xp.ReductionKernel(
            params,
            "bool y",
            f"({inside}) && !(isfinite(re) && isfinite(im))",
            "a || b",
            "y = a",
            "false",
            f"blasmp_nonfinite_{where}",
        )
    return kernel


def _column_panels(
    layout: BlockCyclicLayout, grid: Any, uplo: str, k: int, panel: int
) -> list[tuple[int, int, int, int, int, int]]:
    """Per panel of ``panel`` local columns ``[c0, c1)``: the local rows ``[i0, i1)`` wholly
    inside the ``tril(., k)`` (``'L'``) / ``triu(., k)`` (``'U'``) triangle for every column of
    the panel, and the rows ``[x0, x1)`` that cross its diagonal (inside for some columns only);
    the other rows lie wholly outside. Local rows and columns hold increasing global indices,
    so each set is one range (found by bisection): no mask is ever larger than the crossing
    rows of one panel (about ``panel`` x ``panel`` elements)."""
    rows_h = layout.local_rows(grid.myrow)
    cols_h = layout.local_cols(grid.mycol)
    m = rows_h.size
    out = []
    for c0 in range(0, cols_h.size, panel):
        c1 = min(cols_h.size, c0 + panel)
        lo, hi = int(cols_h[c0]) - k, int(cols_h[c1 - 1]) - k
        if uplo == "L":  # (i, j) inside iff i >= j - k
            i0 = int(np.searchsorted(rows_h, hi, "left"))
            x0 = int(np.searchsorted(rows_h, lo, "left"))
            out.append((c0, c1, i0, m, x0, i0))
        else:  # inside iff i <= j - k
            i1 = int(np.searchsorted(rows_h, lo, "right"))
            x1 = int(np.searchsorted(rows_h, hi, "right"))
            out.append((c0, c1, 0, i1, i1, x1))
    return out


def window_flags(
    w: Any,
    rows_h: np.ndarray,
    cols_h: np.ndarray,
    uplo: str | None,
    k: int,
    zero_diagonal: bool,
    finite: bool = True,
) -> tuple[Any, Any]:
    """For the window ``w`` (an :class:`~blasmp_array.array.Window`) of a stored matrix, read in
    the parent's local matrix: a 0-d device boolean, whether this rank's elements of the
    window (its ``tril(., k)``/``triu(., k)`` when ``uplo`` is given) hold a NaN or an infinity,
    and a 0-d device int, the smallest window index ``i`` with ``w[i, i] == 0`` here (or the
    window's order) when ``zero_diagonal``. ``rows_h``/``cols_h``: the window indices of this
    rank's rows and columns of it (:meth:`~.panels.WindowTarget.local_rows`)."""
    parent, g = w.parent, w.parent.grid
    xp = g.backend.xp
    a = parent._data[w.local_slices()]
    bad = xp.zeros((), bool)
    if finite and a.size:
        if uplo is None:
            bad = nonfinite_flag(xp, a)
        else:
            mask = index_triangle(g.backend.asarray(rows_h), g.backend.asarray(cols_h), uplo, k)
            bad = nonfinite_flag(xp, a, mask)
    n = w.rows[1] - w.rows[0]
    first = xp.asarray(n, dtype=np.int64)
    if zero_diagonal:
        i, r, c = np.intersect1d(rows_h, cols_h, assume_unique=True, return_indices=True)
        if i.size:
            be = g.backend
            first = xp.where(a[be.asarray(r), be.asarray(c)] == 0, be.asarray(i), n).min()
    return bad, first


def triangle_nonfinite_flag(
    layout: BlockCyclicLayout, grid: Any, a: Any, uplo: str, k: int = 0, panel: int = 2048
) -> Any:
    """A 0-d device boolean: whether this rank's elements of the ``tril(., k)`` (``uplo='L'``)
    or ``triu(., k)`` triangle of the matrix hold a NaN or an infinity.

    On the GPU one reduction kernel over the local matrix (:func:`_nonfinite_kernel`). On the
    host column panel by panel (:func:`_column_panels`): the rows wholly inside the triangle
    are checked without a mask, the rows crossing the diagonal with a small one, the rows
    outside are not read; the flags of all panels are combined.
    """
    xp = grid.backend.xp
    rows, cols = local_index_vectors(layout, grid)
    if xp is not np and np.dtype(a.dtype).kind in "fc":
        return _device_nonfinite(xp, a, uplo, rows + k, cols)
    flags = []
    for c0, c1, i0, i1, x0, x1 in _column_panels(layout, grid, uplo, k, panel):
        if i1 > i0:
            flags.append(_host_nonfinite(a[i0:i1, c0:c1]))
        if x1 > x0:
            bad = ~xp.isfinite(a[x0:x1, c0:c1])
            bad &= index_triangle(rows[x0:x1], cols[c0:c1], uplo, k)
            flags.append(bad.any())
    return xp.stack(flags).any() if flags else xp.zeros((), dtype=bool)


def add_triangle(xp: Any, c: Any, t: Any, uplo: str) -> None:
    """``c += t`` on the ``uplo`` triangle of the square block ``c`` (a diagonal block of a
    SYRK result); its other triangle is not written."""
    i, j = (xp.tril_indices if uplo == "L" else xp.triu_indices)(c.shape[0])
    c[i, j] += t[i, j]


def zero_triangle(
    layout: BlockCyclicLayout, grid: Any, a: Any, uplo: str, k: int = 0, panel: int = 2048
) -> None:
    """``a[tril(., k)] = 0`` (``uplo='L'``; ``triu(., k)`` for ``'U'``) on this rank's local
    matrix, on the current stream: plain fills of the rows wholly inside the triangle, a masked
    copy only on the rows crossing its diagonal (:func:`_column_panels`)."""
    xp = grid.backend.xp
    rows, cols = local_index_vectors(layout, grid)
    zero = xp.zeros((), a.dtype)
    for c0, c1, i0, i1, x0, x1 in _column_panels(layout, grid, uplo, k, panel):
        if i1 > i0:
            a[i0:i1, c0:c1] = zero
        if x1 > x0:
            xp.copyto(
                a[x0:x1, c0:c1], zero, where=index_triangle(rows[x0:x1], cols[c0:c1], uplo, k)
            )


def mirror_triangle(xp: Any, c: Any, uplo: str, conjugate: bool, panel: int | None = None) -> None:
    """Fill the strict other triangle of the square local matrix ``c`` from its ``uplo``
    triangle: ``c := tril(c) + tril(c, -1)^T`` (``^H`` when ``conjugate``) for ``uplo='L'``.
    For a matrix held whole by one process; see :func:`symmetric_from_triangle`."""
    symmetric_from_triangle(xp, c, uplo, conjugate, c, panel)


def symmetric_from_triangle(
    xp: Any, x: Any, uplo: str, conjugate: bool, out: Any, panel: int | None = None
) -> None:
    """``out[...]`` = the symmetric (Hermitian when ``conjugate``) matrix whose ``uplo``
    triangle is that of the square ``x`` (``out`` may be ``x``: the fill in place).

    On a GPU one element-wise kernel reads each element of the triangle and writes it to both
    places (``out[i, j] = x[i, j]`` inside the triangle, ``x[j, i]`` outside; indices from
    broadcast ``arange`` vectors, no mask): the panel loop of the host path launched ~30
    kernels at n = 4096, whose host time delayed the GEMM that followed (SYMM 1.3 ms over
    CuPy's ``s @ b`` in tools/profile_face.py; commit d58a92b, docs/blas3.md).

    On the host, panel by panel: transposing copies of ``panel`` (default 64) columns, and each
    diagonal block by one masked ``copyto`` of its transpose with a cached mask (a mask built
    per call, NumPy's ``tril``, cost 1.1 ms of a 256 x 256 mirror in one 256-panel). Against
    the index-pair gathers this replaced, best of 7 on the 2-core VM, panel 64: 256 x 256
    0.12-0.16 -> 0.08 ms, 1024 x 1024 3.1 -> 2.8 ms, 3000 x 3000 8.0-9.5 -> 5.5-5.9 ms.
    """
    conjugate = conjugate and np.dtype(x.dtype).kind == "c"
    if xp is not np:
        n = x.shape[0]
        idx = xp.arange(n, dtype=np.int64)
        _mirror_kernel(xp, uplo, conjugate)(x, x.T, idx[:, None], idx[None, :], out)
        return
    if out is not x:
        out[...] = x
    c = out
    panel = 64 if panel is None else panel
    n = c.shape[0]
    for j0 in range(0, n, panel):
        j1 = min(n, j0 + panel)
        d = c[j0:j1, j0:j1]
        # the strict triangle to fill, by a cached mask (no mask built per call)
        np.copyto(d, d.T.conj() if conjugate else d.T, where=_strict_mask(j1 - j0, uplo))
        if uplo == "L":
            src = c[j1:, j0:j1]  # below the diagonal block -> right of it
            c[j0:j1, j1:] = src.conj().T if conjugate else src.T
        else:
            src = c[j0:j1, j1:]  # right of the diagonal block -> below it
            c[j1:, j0:j1] = src.conj().T if conjugate else src.T


_MIRROR_KERNELS: dict[tuple[str, bool], Any] = {}


def _mirror_kernel(xp: Any, uplo: str, conjugate: bool) -> Any:
    """CuPy kernel ``out = a`` inside the ``uplo`` triangle (``col <= row`` for 'L'), else
    ``t`` (``a``'s transpose; conjugated when ``conjugate``). (``i`` is CuPy's element index:
    no parameter may be named so.) Each element of ``out`` is written by
    its own thread from ``a[i, j]`` or ``a[j, i]``, and only from the kept triangle, so ``out``
    may be ``a`` itself: the kept triangle is rewritten with its own values."""
    key = (uplo, conjugate)
    kernel = _MIRROR_KERNELS.get(key)
    if kernel is None:
        keep = "col <= row" if uplo == "L" else "col >= row"
        other = "conj(t)" if conjugate else "t"
        kernel = _MIRROR_KERNELS[key] = xp.ElementwiseKernel(
            "T a, T t, int64 row, int64 col",
            "T out",
            f"out = ({keep}) ? a : {other};",
            f"blasmp_mirror_{uplo}{int(conjugate)}",
        )
    return kernel


_STRICT: dict[tuple[int, str], np.ndarray] = {}


def _strict_mask(n: int, uplo: str) -> np.ndarray:
    """Host mask of the strict triangle of ``n x n`` opposite to ``uplo`` (the one a mirror of
    the ``uplo`` triangle fills), cached."""
    key = (n, uplo)
    hit = _STRICT.get(key)
    if hit is None:
        ones = np.ones((n, n), bool)
        hit = _STRICT[key] = np.triu(ones, 1) if uplo == "L" else np.tril(ones, -1)
    return hit


@warmup_kernels
def _warm_triangles(backend: Backend, xp: Any, dtype: np.dtype) -> None:
    """SYRK's scaled triangle (zero and non-zero beta), ``check_finite`` (masked and whole
    panels, the combined flags, the diagonal's first zero), the masks from index vectors, the
    symmetric fill."""
    n = 6
    local = sample_matrix(xp, dtype, n)
    rows = xp.asarray(np.arange(n))
    tri = (rows[None, :] - rows[:, None]) <= 0
    for beta in (dtype.type(0), dtype.type(2)):
        _select_scaled(xp, local.copy(), beta, tri)
    flag = nonfinite_flag(xp, local, tri)
    if xp is not np and dtype.kind in "fc":  # the reduction kernels, contiguous and strided
        for part in (local, local[1:, :4]):
            for where in ("A", "L", "U"):
                _device_nonfinite(xp, part, where, rows[: part.shape[0]], rows[: part.shape[1]])
    # check_finite's combined read (ops/engine/_checks.py): flags and the first zero on the diagonal
    first = xp.where(local[0] == 0, rows, n).min()
    xp.stack([flag, -first, xp.zeros((), bool)], dtype=np.int64)
    _ = local[rows, rows] == 0  # the diagonal entries by index arrays
    zero = xp.zeros((), dtype)
    local.copy()[1:3, 0:2] = zero
    xp.copyto(local.copy(), zero, where=tri)
    xp.stack([tri.any(), tri.any()]).any()
    rows1 = rows + 1
    _ = rows[None, :] <= rows1[:, None], rows[None, :] >= rows1[:, None]
    for uplo in ("L", "U"):
        for conj in (False, True):
            mirror_triangle(xp, local.copy(), uplo, conj, panel=4)
