"""A process's local matrix as a few strided views of the global matrix, and back.

In the 2-D block-cyclic layout (:mod:`.layout`) process row ``p`` stores the global block rows
``d, d + Pr, d + 2 Pr, ...`` (``d = (p - rsrc) mod Pr``) one after the other. All but possibly
the last are full ``mb``-row blocks, equally spaced ``Pr * mb`` rows apart, so the rows a process
stores are at most two :class:`Run`\\ s -- the full blocks and the ragged last one -- and its
local matrix is at most four rectangles, each a 4-D strided view
``(block rows, rows per block, block columns, columns per block)`` of the global matrix.
Copying the local matrix out of (or into) a global host matrix is then a handful of
``np.copyto`` calls, whatever the matrix and block sizes, instead of a fancy-indexed gather of
every element (``a[np.ix_(rows, cols)]``) or a loop over blocks.

:class:`LocalView` holds these views for one process. It copies any range of local rows, so a
caller can stream a local matrix in row chunks (the GPU backend's pinned staging) or split one
copy over threads, and it lists the views of a row range and column run for MPI derived
datatypes (the root of a gather receives each process's rows straight into their final
positions). The module knows
only index maps and NumPy strides: no MPI, no devices, no threads.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .layout import BlockCyclicLayout, numroc

__all__ = [
    "Run",
    "block_runs",
    "clip_runs",
    "LocalView",
    "local_view",
    "whole_view",
    "as_local_view",
    "col_ranges",
]


@dataclass(frozen=True)
class Run:
    """``count`` blocks of ``length`` consecutive global indices along one dimension.

    Block ``i`` covers the global indices ``[start + i * step, start + i * step + length)`` and
    the local indices ``[local + i * length, local + (i + 1) * length)``: consecutive local
    indices, equally spaced global ones.
    """

    start: int
    step: int
    length: int
    count: int
    local: int

    @property
    def size(self) -> int:
        """Number of indices of the run."""
        return self.length * self.count


def block_runs(n: int, nb: int, iproc: int, nprocs: int, isrcproc: int = 0) -> tuple[Run, ...]:
    """The indices of a length-``n`` dimension that process ``iproc`` stores, as runs.

    At most two runs, in local order: the full blocks (spaced ``nprocs * nb`` apart) and the
    ragged last block when ``iproc`` owns it. A single process stores the whole dimension as one
    run. The runs cover ``numroc(n, nb, iproc, nprocs, isrcproc)`` indices.
    """
    if n <= 0:
        return ()
    if nprocs == 1:
        return (Run(0, n, n, 1, 0),)
    d = (iproc - isrcproc) % nprocs
    nfull = n // nb
    count = max(0, -(-(nfull - d) // nprocs))
    runs = []
    if count:
        runs.append(Run(d * nb, nprocs * nb, nb, count, 0))
    tail = n - nfull * nb
    if tail and nfull % nprocs == d:
        runs.append(Run(nfull * nb, tail, tail, 1, count * nb))
    return tuple(runs)


def clip_runs(runs: tuple[Run, ...], lo: int, hi: int) -> tuple[Run, ...]:
    """The parts of ``runs`` at local indices ``[lo, hi)``: up to three runs per run (a partial
    first block, the whole blocks, a partial last block)."""
    out: list[Run] = []
    for r in runs:
        a, b = max(lo, r.local), min(hi, r.local + r.size)
        if a >= b:
            continue
        first, last = (a - r.local) // r.length, (b - 1 - r.local) // r.length  # blocks touched
        head = a - r.local - first * r.length  # rows of block `first` before a
        if head or first == last:
            # a partial first block (or the only block, maybe partial at both ends)
            stop = min(b, r.local + (first + 1) * r.length)
            out.append(Run(r.start + first * r.step + head, r.step, stop - a, 1, a))
            first += 1
            a = stop
        if a >= b:
            continue
        full = (b - r.local) // r.length  # blocks ending at or before b
        if full > first:
            out.append(Run(r.start + first * r.step, r.step, r.length, full - first, a))
            a = r.local + full * r.length
        if a < b:
            out.append(Run(r.start + full * r.step, r.step, b - a, 1, a))
    return tuple(out)


def _view4(a: np.ndarray, rows: Run, cols: Run, row0: int = 0, col0: int = 0) -> np.ndarray:
    """The 4-D view ``(rows.count, rows.length, cols.count, cols.length)`` of ``a`` whose
    element ``(i, k, j, l)`` is ``a[row0 + rows.start + i * rows.step + k, col0 + ...]``."""
    s0, s1 = a.strides
    base = a[row0 + rows.start :, col0 + cols.start :]
    return as_strided(
        base,
        shape=(rows.count, rows.length, cols.count, cols.length),
        strides=(rows.step * s0, s0, cols.step * s1, s1),
        writeable=bool(a.flags.writeable),
    )


def _local_run(r: Run, lo: int) -> Run:
    """The run as indices of a local array whose first row is local row ``lo``: consecutive."""
    return Run(r.local - lo, r.length, r.length, r.count, r.local - lo)


@dataclass(frozen=True)
class LocalView:
    """The local matrix of one process as strided views of a global host matrix.

    Local element ``(i, j)`` is ``glob[row run of i, col run of j]`` (see :func:`local_view`).
    ``read`` and ``write`` copy a range of local rows between the global matrix and a 2-D
    array holding just those rows; ``views`` lists the global matrix's views of a range of
    local rows (for MPI datatypes).

    Attributes
    ----------
    glob : numpy.ndarray
        The global 2-D host matrix (any strides).
    rows, cols : tuple of Run
        The global rows and columns of the local matrix (:func:`block_runs`).
    shape : (int, int)
        The local shape.
    """

    glob: np.ndarray
    rows: tuple[Run, ...]
    cols: tuple[Run, ...]
    shape: tuple[int, int]

    @property
    def dtype(self) -> np.dtype:
        """The dtype of the global matrix."""
        return np.dtype(self.glob.dtype)

    def pairs(self, lo: int, hi: int, local: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(global view, local view)`` pairs of local rows ``[lo, hi)``; ``local`` is a 2-D
        array holding those rows (shape ``(hi - lo, shape[1])``, any strides)."""
        if local.shape != (hi - lo, self.shape[1]):
            raise ValueError(
                f"rows [{lo}, {hi}) of a {self.shape} local matrix need a "
                f"{(hi - lo, self.shape[1])} array, got {local.shape}"
            )
        for r in clip_runs(self.rows, lo, hi):
            rl = _local_run(r, lo)
            for c in self.cols:
                yield _view4(self.glob, r, c), _view4(local, rl, _local_run(c, 0))

    @property
    def col_ranges(self) -> tuple[tuple[int, int], ...]:
        """The local column ranges ``[c0, c1)`` of the column runs (at most two)."""
        return tuple((c.local, c.local + c.size) for c in self.cols)

    def views(self, lo: int, hi: int, part: int) -> list[np.ndarray]:
        """The 4-D views of the global matrix holding local rows ``[lo, hi)`` of the local
        columns ``col_ranges[part]``, in the row-major order of ``local[lo:hi, c0:c1]``."""
        c = self.cols[part]
        return [_view4(self.glob, r, c) for r in clip_runs(self.rows, lo, hi)]

    def read(self, lo: int, hi: int, out: np.ndarray) -> None:
        """``out[...] = local rows [lo, hi)`` (cast to ``out.dtype`` as ``astype`` does)."""
        for g, loc in self.pairs(lo, hi, out):
            np.copyto(loc, g, casting="unsafe")

    def write(self, lo: int, hi: int, src: np.ndarray, conjugate: bool = False) -> None:
        """Local rows ``[lo, hi)`` of the global matrix ``= src`` (conjugated if asked)."""
        for g, loc in self.pairs(lo, hi, src):
            if conjugate:
                np.conjugate(loc, out=g, casting="unsafe")
            else:
                np.copyto(g, loc, casting="unsafe")


def local_view(a: Any, layout: BlockCyclicLayout, prow: int, pcol: int) -> LocalView:
    """The local matrix of process ``(prow, pcol)`` of ``layout`` inside the global matrix ``a``.

    Parameters
    ----------
    a : numpy.ndarray
        The global ``layout.shape`` matrix on the host (any strides, read-only allowed for
        reading).
    layout : BlockCyclicLayout
    prow, pcol : int
        Grid coordinates of the process.

    Returns
    -------
    LocalView
        ``view.read(0, m_loc, x)`` fills ``x`` with the local matrix
        (``a[np.ix_(layout.local_rows(prow), layout.local_cols(pcol))]``);
        ``view.write(0, m_loc, x)`` puts ``x`` back in place.
    """
    if not isinstance(a, np.ndarray) or a.ndim != 2 or a.shape != layout.shape:
        raise ValueError(
            f"local_view needs the global {layout.shape} host matrix, got "
            f"{getattr(a, 'shape', type(a).__name__)}"
        )
    (m, n), (mb, nb), (pr, pc) = layout.shape, layout.block, layout.grid_shape
    rows = block_runs(m, mb, prow, pr, layout.src[0])
    cols = block_runs(n, nb, pcol, pc, layout.src[1])
    shape = (
        numroc(m, mb, prow, pr, layout.src[0]),
        numroc(n, nb, pcol, pc, layout.src[1]),
    )
    return LocalView(a, rows, cols, shape)


def col_ranges(layout: BlockCyclicLayout, pcol: int) -> tuple[tuple[int, int], ...]:
    """The local column ranges of process column ``pcol``'s column runs (as
    :attr:`LocalView.col_ranges`, without a global matrix)."""
    (_, n), (_, nb), (_, pc) = layout.shape, layout.block, layout.grid_shape
    return tuple((c.local, c.local + c.size) for c in block_runs(n, nb, pcol, pc, layout.src[1]))


def whole_view(a: Any) -> LocalView:
    """A 2-D host array as the :class:`LocalView` of itself (one process holding it all)."""
    if not isinstance(a, np.ndarray) or a.ndim != 2:
        raise ValueError(f"whole_view needs a 2-D NumPy array, got {type(a).__name__}")
    m, n = a.shape
    return LocalView(a, block_runs(m, max(m, 1), 0, 1), block_runs(n, max(n, 1), 0, 1), (m, n))


def as_local_view(x: Any) -> LocalView:
    """``x`` if it is a :class:`LocalView`, else the view of the 2-D NumPy array ``x`` as a
    whole (:func:`whole_view`)."""
    if isinstance(x, LocalView):
        return x
    if not isinstance(x, np.ndarray) or x.ndim != 2:
        raise TypeError(f"expected a 2-D NumPy array or a LocalView, got {type(x).__name__}")
    return whole_view(x)
