"""ProcessGrid: a ``Pr x Pc`` arrangement of MPI processes, its row/column sub-communicators and
the backend that executes work on it."""

from __future__ import annotations

import math
import os
from typing import Any

from mpi4py import MPI

from .backends import _blas_threads, get_backend

__all__ = ["ProcessGrid", "square_grid_shape"]


def square_grid_shape(nprocs: int) -> tuple[int, int]:
    """The most square ``(Pr, Pc)`` with ``Pr * Pc == nprocs`` and ``Pr <= Pc``."""
    pr = int(math.isqrt(nprocs))
    while nprocs % pr:
        pr -= 1
    return pr, nprocs // pr


class ProcessGrid:
    """A ``nprow x npcol`` grid of the processes of ``comm`` in row-major order.

    Process ``rank`` of ``comm`` sits at grid coordinates ``(rank // npcol, rank % npcol)``, as
    ScaLAPACK's ``BLACS_GRIDINIT`` with order 'R'. ``ProcessGrid()`` picks the most square grid of
    ``MPI.COMM_WORLD``. Creating a grid is collective over ``comm``.

    Parameters
    ----------
    nprow, npcol : int, optional
        Grid shape. If only one is given, the other is derived from the communicator size.
    comm : mpi4py.MPI.Comm, optional
        Communicator of all processes of the grid (default ``MPI.COMM_WORLD``).
    backend : {'cpu', 'gpu'}, optional
        Default: ``$BLASMP_BACKEND`` if set, else ``'gpu'`` when CuPy and a GPU are usable, else
        ``'cpu'``.
    blas_threads : int, optional
        BLAS threads of this process (process-wide: every BLAS library loaded, through
        threadpoolctl). Default: the first grid of a communicator gives each rank its share
        of the cores of its node (``cores // ranks on the node``) unless
        ``$BLASMP_BLAS_THREADS``, ``$OMP_NUM_THREADS``, ``$OPENBLAS_NUM_THREADS`` or
        ``$MKL_NUM_THREADS`` is set; see the "Defaults" page of the documentation.
        :func:`blasmp_array.show_config` reports the threads.
    """

    def __init__(
        self,
        nprow: int | None = None,
        npcol: int | None = None,
        comm: Any = None,
        backend: str | None = None,
        blas_threads: int | None = None,
    ) -> None:
        comm = MPI.COMM_WORLD if comm is None else comm
        size = comm.Get_size()
        for name, v in (("nprow", nprow), ("npcol", npcol)):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v <= 0):
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if nprow is None and npcol is None:
            nprow, npcol = square_grid_shape(size)
        elif nprow is None:
            assert npcol is not None
            if size % npcol:
                raise ValueError(
                    f"npcol={npcol} does not divide the communicator size {size}; "
                    f"pass nprow and npcol with nprow*npcol == {size}"
                )
            nprow = size // npcol
        elif npcol is None:
            if size % nprow:
                raise ValueError(
                    f"nprow={nprow} does not divide the communicator size {size}; "
                    f"pass nprow and npcol with nprow*npcol == {size}"
                )
            npcol = size // nprow
        if nprow * npcol != size:
            raise ValueError(
                f"a {nprow}x{npcol} grid needs {nprow * npcol} processes but the communicator "
                f"has {size}; run with `mpiexec -n {nprow * npcol}` or choose nprow*npcol == {size}"
            )
        if backend is None:
            backend = os.environ.get("BLASMP_BACKEND") or None
        if backend is not None and backend not in ("cpu", "gpu"):
            raise ValueError(f"backend must be 'cpu' or 'gpu', got {backend!r}")
        if blas_threads is not None:
            blas_threads = _blas_threads.parse_setting(blas_threads, "blas_threads")
        self.comm = comm
        self.nprow, self.npcol = nprow, npcol
        self.rank = comm.Get_rank()
        self.size = size
        self.myrow, self.mycol = divmod(self.rank, npcol)
        self.row_comm = comm.Split(self.myrow, self.mycol)  # processes of my grid row
        self.col_comm = comm.Split(self.mycol, self.myrow)  # processes of my grid column
        self.backend = get_backend(backend, comm)
        if blas_threads is not None:
            _blas_threads.set_threads(blas_threads)

    def free(self) -> None:
        """Release the row and column sub-communicators (collective over the grid).

        Each grid holds two MPI communicators and an MPI library has a few thousand at most, so a
        program that creates grids in a loop should free them (or use ``with ProcessGrid(...)``).
        Arrays on a freed grid can still be used by the operators (they do not use these
        communicators), but ``row_comm``/``col_comm`` become ``MPI.COMM_NULL``.
        """
        for kept in ("_one_column", "_one_row"):
            other = self.__dict__.pop(kept, None)
            if other is not None:
                other.free()
        for name in ("row_comm", "col_comm"):
            sub = getattr(self, name)
            if sub != MPI.COMM_NULL:
                sub.Free()
                setattr(self, name, MPI.COMM_NULL)

    def __enter__(self) -> ProcessGrid:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()

    @property
    def shape(self) -> tuple[int, int]:
        """``(nprow, npcol)``."""
        return (self.nprow, self.npcol)

    @property
    def coords(self) -> tuple[int, int]:
        """This process's ``(myrow, mycol)``."""
        return (self.myrow, self.mycol)

    def rank_of(self, prow: int, pcol: int) -> int:
        """Rank in ``comm`` of the process at grid coordinates ``(prow, pcol)``."""
        return prow * self.npcol + pcol

    def coords_of(self, rank: int) -> tuple[int, int]:
        """Grid coordinates of ``rank``."""
        return divmod(rank, self.npcol)

    def one_column(self) -> ProcessGrid:
        """The ``size x 1`` grid of the same processes, in the same order, on the same backend:
        ``self`` when it has one process column, else a grid made once (collective the first
        time) and kept with this one. The operators whose processes work best on whole rows
        (the tall-skinny QR) move their operand to it."""
        if self.npcol == 1:
            return self
        column = self.__dict__.get("_one_column")
        if column is None:
            column = ProcessGrid(self.size, 1, comm=self.comm, backend=self.backend.name)
            self.__dict__["_one_column"] = column
        return column

    def one_row(self) -> ProcessGrid:
        """The ``1 x size`` grid of the same processes, as :meth:`one_column` makes the
        ``size x 1`` one (the SYRK that splits ``K`` over the processes moves ``A`` to it)."""
        if self.nprow == 1:
            return self
        row = self.__dict__.get("_one_row")
        if row is None:
            row = ProcessGrid(1, self.size, comm=self.comm, backend=self.backend.name)
            self.__dict__["_one_row"] = row
        return row

    def same_as(self, other: ProcessGrid) -> bool:
        """True when both grids place the same processes identically on the same backend."""
        return self is other or (
            self.shape == other.shape
            and self.backend is other.backend
            and MPI.Comm.Compare(self.comm, other.comm) in (MPI.IDENT, MPI.CONGRUENT)
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProcessGrid) and self.same_as(other)

    def __hash__(self) -> int:
        return hash((self.shape, id(self.backend)))

    def __repr__(self) -> str:
        return f"ProcessGrid({self.nprow}, {self.npcol}, backend={self.backend.name!r})"
