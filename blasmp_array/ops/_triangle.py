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

from ..layout import BlockCyclicLayout
from ._warmup import sample_matrix, warmup_kernels

__all__ = [
    "local_index_vectors",
    "triangle_mask",
    "scale_triangle",
    "any_nonfinite",
    "triangle_has_nonfinite",
    "mirror_triangle",
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


def triangle_mask(layout: BlockCyclicLayout, grid: Any, uplo: str, k: int = 0) -> Any:
    """Device boolean mask of the local elements ``(i, j)`` with ``j - i <= k`` (``uplo='L'``,
    NumPy's ``tril(., k)``) or ``j - i >= k`` (``'U'``, ``triu(., k)``)."""
    rows, cols = local_index_vectors(layout, grid)
    return _mask(rows, cols, uplo, k)


def _mask(rows: Any, cols: Any, uplo: str, k: int) -> Any:
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


def any_nonfinite(xp: Any, a: Any, mask: Any = None) -> bool:
    """Whether ``a`` (restricted to ``mask``) holds a NaN or an infinity (one device reduction,
    one scalar to the host)."""
    bad = ~xp.isfinite(a)
    if mask is not None:
        bad &= mask
    return bool(bad.any())


def triangle_has_nonfinite(
    layout: BlockCyclicLayout, grid: Any, a: Any, uplo: str, k: int = 0, panel: int = 2048
) -> bool:
    """Whether this rank's elements of the ``tril(., k)`` (``uplo='L'``) or ``triu(., k)``
    triangle of the matrix hold a NaN or an infinity.

    Column panel by panel: a panel wholly inside the triangle is checked without a mask, one
    wholly outside is skipped, only panels crossing the diagonal build a (panel-sized) mask;
    the device flags of all panels are combined there and read once.
    """
    xp = grid.backend.xp
    rows, cols = local_index_vectors(layout, grid)
    rows_h = layout.local_rows(grid.myrow)
    cols_h = layout.local_cols(grid.mycol)
    if rows_h.size == 0 or cols_h.size == 0:
        return False
    lo_row, hi_row = int(rows_h.min()) + k, int(rows_h.max()) + k
    flags = []
    for c0 in range(0, cols_h.size, panel):
        c1 = min(cols_h.size, c0 + panel)
        lo_col, hi_col = int(cols_h[c0:c1].min()), int(cols_h[c0:c1].max())
        inside = hi_col <= lo_row if uplo == "L" else lo_col >= hi_row
        outside = lo_col > hi_row if uplo == "L" else hi_col < lo_row
        if outside:
            continue
        bad = ~xp.isfinite(a[:, c0:c1])
        if not inside:
            bad &= _mask(rows, cols[c0:c1], uplo, k)
        flags.append(bad.any())
    return bool(xp.stack(flags).any()) if flags else False


def mirror_triangle(xp: Any, c: Any, uplo: str, conjugate: bool, panel: int | None = None) -> None:
    """Fill the strict other triangle of the square local matrix ``c`` from its ``uplo``
    triangle: ``c := tril(c) + tril(c, -1)^T`` (``^H`` when ``conjugate``) for ``uplo='L'``.

    For a matrix held whole by one process. Works panel by panel (transposing copies of
    ``panel`` columns), so the only temporary is one ``panel x panel`` diagonal block. The
    default panel is 1024 on a GPU (few, large kernels) and 64 on the host (NumPy's ``tril`` of
    a large diagonal block costs more than the transposing copies: 1.1 ms of a 256 x 256
    mirror with one 256-panel, measured on the 2-core CI machine).
    """
    if panel is None:
        panel = 64 if xp is np else 1024
    n = c.shape[0]
    for j0 in range(0, n, panel):
        j1 = min(n, j0 + panel)
        d = c[j0:j1, j0:j1]
        if uplo == "L":
            strict = xp.tril(d, -1)
            d[...] = xp.tril(d) + (strict.conj().T if conjugate else strict.T)
            src = c[j1:, j0:j1]  # below the diagonal block -> right of it
            c[j0:j1, j1:] = src.conj().T if conjugate else src.T
        else:
            strict = xp.triu(d, 1)
            d[...] = xp.triu(d) + (strict.conj().T if conjugate else strict.T)
            src = c[j0:j1, j1:]  # right of the diagonal block -> below it
            c[j1:, j0:j1] = src.conj().T if conjugate else src.T


@warmup_kernels
def _warm_triangles(backend: Any, xp: Any, dtype: np.dtype) -> None:
    """SYRK's scaled triangle (zero and non-zero beta), ``check_finite`` (masked and whole
    panels, the combined flags), the masks from index vectors, the symmetric fill."""
    n = 6
    local = sample_matrix(xp, dtype, n)
    rows = xp.asarray(np.arange(n))
    tri = (rows[None, :] - rows[:, None]) <= 0
    for beta in (dtype.type(0), dtype.type(2)):
        _select_scaled(xp, local.copy(), beta, tri)
    any_nonfinite(xp, local, tri)
    xp.stack([tri.any(), tri.any()]).any()
    rows1 = rows + 1
    _ = rows[None, :] <= rows1[:, None], rows[None, :] >= rows1[:, None]
    for uplo in ("L", "U"):
        for conj in (False, True):
            mirror_triangle(xp, local.copy(), uplo, conj, panel=4)
