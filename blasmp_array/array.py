"""BlockCyclicArray: a 2-D matrix spread over a ProcessGrid in the block-cyclic layout.

The array holds only ``(local matrix, layout, grid)`` plus two lazy view flags: ``A.T`` and
``A.conj()`` share ``A``'s storage and are resolved by the operator that consumes them (GEMM with
a transpose flag, SYRK for ``A.T @ A``) or materialised by :meth:`BlockCyclicArray.resolve` when an
operation needs the data as stored.

Submatrix views ``A[i0:i1, j0:j1]`` need no flag when the window is block-cyclic (offsets on
block boundaries): the view is an ordinary array whose local matrix is a slice of ``A``'s and whose
layout carries the shifted source process. Any other window is a third lazy kind, a *window
view*: it keeps ``(parent, rows, cols)`` and no local matrix of its own. Reads and writes of
elements and windows go to the parent; the BLAS3 operators fold the offset into their panel
plans (PBLAS's ``IA, JA``) and the reductions reduce the parent's local slices; every other
consumer gets a copy from :attr:`BlockCyclicArray.storage` / :meth:`~BlockCyclicArray.resolve`
(collective, with a :class:`~blasmp_array.ViewCopyWarning`), and operators that write into a
window view write into the parent. ``_data`` of a window
view raises, so a consumer that forgot to resolve fails loudly instead of reading the wrong
elements (see :mod:`blasmp_array.ops.indexing`).

The array is a low layer: it imports only the layout, the grid and the registry
:mod:`blasmp_array._dispatch`, never the operators, the construction functions or the I/O
package above it. Methods that need them (``resolve``, ``redistribute``, ``to_numpy``,
``to_dask``/``to_zarr``/``to_npy``, indexing, and the NumPy protocols) call the implementation
those layers registered, ``_dispatch.method(name)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from . import _dispatch
from .grid import ProcessGrid
from .layout import BlockCyclicLayout, numroc

__all__ = ["BlockCyclicArray", "SUPPORTED_DTYPES"]

SUPPORTED_DTYPES = tuple(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))


class BlockCyclicArray(NDArrayOperatorsMixin):
    """A distributed ``m x n`` matrix in ScaLAPACK's 2-D block-cyclic layout.

    Do not call the constructor directly; use :func:`blasmp_array.from_numpy`,
    :func:`blasmp_array.zeros`, :mod:`blasmp_array.random` or :func:`blasmp_array.from_dask`.

    Arithmetic operators (``+``, ``*``, ``@``, comparisons, ...) go through NumPy's ufunc protocol
    (``NDArrayOperatorsMixin``), so ``A @ B`` and ``np.matmul(A, B)`` reach the same code.

    Attributes
    ----------
    shape : tuple of int
        Global shape (of the view: ``A.T.shape == A.shape[::-1]``).
    dtype : numpy.dtype
    block : tuple of int
        ``(mb, nb)`` of the view.
    grid : ProcessGrid
    layout : BlockCyclicLayout
        Descriptor of the stored matrix (ignores the view flags).
    """

    __array_priority__ = 100.0

    def __init__(
        self,
        data: Any,
        layout: BlockCyclicLayout,
        grid: ProcessGrid,
        *,
        transposed: bool = False,
        conjugated: bool = False,
        window: Window | None = None,
    ) -> None:
        self._window = window
        if window is not None:
            # a window view: ``data`` is None, ``layout`` the layout it resolves into
            data = None
            dt = np.dtype(window.parent.dtype)
        else:
            dt = np.dtype(data.dtype)
        expected = layout.local_shape(grid.myrow, grid.mycol)
        if window is None and tuple(data.shape) != expected:
            raise ValueError(
                f"local matrix has shape {tuple(data.shape)} but the layout gives {expected} "
                f"on process {grid.coords}"
            )
        if layout.grid_shape != grid.shape:
            raise ValueError(f"layout grid {layout.grid_shape} differs from grid {grid.shape}")
        self._data = data if window is None else _NO_LOCAL
        self._dtype = dt
        self.layout = layout
        self.grid = grid
        self._transposed = transposed
        self._conjugated = conjugated and dt.kind == "c"

    # -- descriptor -----------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        s = self.layout.shape
        return (s[1], s[0]) if self._transposed else s

    @property
    def block(self) -> tuple[int, int]:
        b = self.layout.block
        return (b[1], b[0]) if self._transposed else b

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def ndim(self) -> int:
        return 2

    @property
    def size(self) -> int:
        return int(self.shape[0] * self.shape[1])

    @property
    def backend(self) -> Any:
        return self.grid.backend

    @property
    def op(self) -> str:
        """The BLAS ``trans`` character of the view over the storage: 'N', 'T' or 'C'.

        A conjugated but untransposed view has no BLAS character; :meth:`resolve` it first.
        """
        if self._transposed:
            return "C" if self._conjugated else "T"
        return "N"

    @property
    def is_view(self) -> bool:
        """True when ``A`` is a lazy view: transposed, conjugated and/or a window view."""
        return self._transposed or self._conjugated or self._window is not None

    @property
    def is_window(self) -> bool:
        """True when ``A`` is a window view (a submatrix starting inside a block, see module
        doc): elements and windows of it are read and written in the parent."""
        return self._window is not None

    @property
    def storage(self) -> BlockCyclicArray:
        """The stored matrix behind a view (``self`` when not a view).

        For a window view this is a copy of the window (collective, with a
        :class:`~blasmp_array.ViewCopyWarning`): writes into it do not reach the parent.
        """
        if self._window is not None:
            return _dispatch.method("materialize_window")(self)  # ops/indexing.py
        if not self.is_view:
            return self
        return BlockCyclicArray(self._data, self.layout, self.grid)

    def shares_storage(self, other: BlockCyclicArray) -> bool:
        """True when both are views of the same stored matrix."""
        mine = self._data if self._window is None else self._window.parent._data
        return mine is (other._data if other._window is None else other._window.parent._data)

    def _with_flags(self, transposed: bool, conjugated: bool) -> BlockCyclicArray:
        """This array (its storage, or its window) under the given view flags."""
        return BlockCyclicArray(
            self._data,
            self.layout,
            self.grid,
            transposed=transposed,
            conjugated=conjugated,
            window=self._window,
        )

    @property
    def local(self) -> Any:
        """This process's local matrix (NumPy or CuPy array), of the view as stored.

        For a lazy view (``A.T``, ``A.conj()``) the view is materialised first, which is a
        distributed (collective) transpose.
        """
        return self.resolve()._data

    # -- views ----------------------------------------------------------------------------
    @property
    def T(self) -> BlockCyclicArray:
        """Lazy transpose (no data movement until an operation needs it)."""
        return self._with_flags(not self._transposed, self._conjugated)

    @property
    def mT(self) -> BlockCyclicArray:
        return self.T

    @property
    def H(self) -> BlockCyclicArray:
        """Lazy conjugate transpose."""
        return self.conj().T

    def conj(self) -> BlockCyclicArray:
        """Lazy complex conjugate (a no-op view for real dtypes)."""
        if self.dtype.kind != "c":
            return self
        return self._with_flags(self._transposed, not self._conjugated)

    conjugate = conj

    def resolve(self) -> BlockCyclicArray:
        """The view as a stored array: ``self`` if not a view, else a materialised copy.

        A transposed view becomes an array with block ``self.block`` on the same grid
        (a distributed transpose); a conjugated view is conjugated locally.
        """
        if not self.is_view:
            return self
        stored = self.storage  # a window view is copied here
        if not (self._transposed or self._conjugated):
            return stored
        if self._transposed:
            transpose = _dispatch.method("transpose")  # ops/redistribute.py
            return transpose(stored, conjugate=self._conjugated)
        return BlockCyclicArray(self.backend.xp.conj(stored._data), stored.layout, self.grid)

    # -- conversions ----------------------------------------------------------------------
    def to_numpy(self, root: int | None = None) -> np.ndarray | None:
        """Gather the global matrix as a NumPy array on every rank (or only on ``root``).

        Collective. Returns ``None`` on ranks other than ``root`` when ``root`` is given.
        """
        gather = _dispatch.method("gather")  # creation.py
        return gather(self, root=root)  # a view is gathered as stored, then transposed

    def copy(self) -> BlockCyclicArray:
        """A deep copy (views are materialised; a window view with no ViewCopyWarning, since
        the copy is what was asked for)."""
        if self._window is not None:
            stored = _dispatch.method("materialize_window")(self, warn=False)
            return stored._with_flags(self._transposed, self._conjugated).resolve()
        r = self.resolve()
        data = r._data.copy() if r is self else r._data
        return BlockCyclicArray(data, r.layout, r.grid)

    def astype(self, dtype: Any, copy: bool = True) -> BlockCyclicArray:
        """Cast to ``dtype`` (one of float32, float64, complex64, complex128)."""
        dtype = np.dtype(dtype)
        check_dtype(dtype)
        r = self.resolve()
        if dtype == r.dtype and not copy:
            return r
        return BlockCyclicArray(r._data.astype(dtype), r.layout, r.grid)

    # -- NumPy methods (each the NumPy function of the same name, see ops/reductions.py) --------
    # Full reductions return a NumPy scalar on every rank; reductions along an axis return a
    # 1-D NumPy array on every rank (2-D with keepdims=True), as np.sum(A, axis=0) does.
    def sum(self, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
        """Sum of the elements (``np.sum``): a scalar or a NumPy vector on every rank."""
        return np.sum(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def prod(self, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
        """Product of the elements (``np.prod``)."""
        return np.prod(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def min(self, axis: Any = None, keepdims: bool = False) -> Any:
        """Smallest element (``np.min``)."""
        return np.min(self, axis=axis, keepdims=keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> Any:
        """Largest element (``np.max``)."""
        return np.max(self, axis=axis, keepdims=keepdims)

    def mean(self, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
        """Arithmetic mean (``np.mean``)."""
        return np.mean(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def var(
        self, axis: Any = None, dtype: Any = None, ddof: Any = 0, keepdims: bool = False
    ) -> Any:
        """Variance (``np.var``, two passes)."""
        return np.var(self, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims)

    def std(
        self, axis: Any = None, dtype: Any = None, ddof: Any = 0, keepdims: bool = False
    ) -> Any:
        """Standard deviation (``np.std``)."""
        return np.std(self, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims)

    def all(self, axis: Any = None, keepdims: bool = False) -> Any:
        """True where every element is nonzero (``np.all``)."""
        return np.all(self, axis=axis, keepdims=keepdims)

    def any(self, axis: Any = None, keepdims: bool = False) -> Any:
        """True where some element is nonzero (``np.any``)."""
        return np.any(self, axis=axis, keepdims=keepdims)

    def argmax(self, axis: Any = None, keepdims: bool = False) -> Any:
        """Index of the first largest element (``np.argmax``; flat index when ``axis=None``)."""
        return np.argmax(self, axis=axis, keepdims=keepdims)

    def argmin(self, axis: Any = None, keepdims: bool = False) -> Any:
        """Index of the first smallest element (``np.argmin``; flat index when ``axis=None``)."""
        return np.argmin(self, axis=axis, keepdims=keepdims)

    def clip(self, min: Any = None, max: Any = None) -> BlockCyclicArray:  # noqa: A002
        """``np.clip(A, min, max)``: a new array."""
        return np.clip(self, min, max)  # type: ignore[return-value]

    @property
    def real(self) -> BlockCyclicArray:
        """The real part (``np.real``; ``A`` itself for real dtypes)."""
        return np.real(self)  # type: ignore[no-any-return]

    @property
    def imag(self) -> BlockCyclicArray:
        """The imaginary part (``np.imag``; zeros for real dtypes)."""
        return np.imag(self)  # type: ignore[no-any-return]

    def fill(self, value: Any) -> None:
        """Set every element to the scalar ``value``, in place (local, no communication).

        On a lazy view the stored matrix is filled (with ``conj(value)`` under a conjugated
        view), so ``A.T.fill(x)`` fills ``A``.
        """
        if isinstance(value, BlockCyclicArray) or np.ndim(value) != 0:
            raise TypeError(f"fill needs a scalar, got {type(value).__name__}")
        v = np.asarray(value)
        if v.dtype.kind not in "biufc":
            raise TypeError(f"fill needs a number, got {value!r}")
        if v.dtype.kind == "c" and self.dtype.kind != "c":
            raise TypeError(f"cannot fill a {self.dtype} matrix with the complex {value!r}")
        value = (np.conj(v) if self._conjugated else v)[()]  # a NumPy scalar
        if self._window is not None:
            w = self._window
            w.parent._data[w.local_slices()] = value
            return
        self._data[...] = value

    def item(self, *args: Any) -> Any:
        """The element as a Python scalar, on every rank: ``A.item()`` of a 1x1 matrix,
        ``A.item(i, j)`` or ``A.item(flat_index)`` (one broadcast from its owner)."""
        if not args:
            if self.size != 1:
                raise ValueError(
                    f"can only convert a matrix of size 1 to a Python scalar, not {self.shape}; "
                    "pass indices (A.item(i, j)) or gather with A.to_numpy()"
                )
            args = (0, 0)
        if len(args) == 1:
            k = args[0]
            if not isinstance(k, int | np.integer) or not -self.size <= k < self.size:
                raise IndexError(f"index {k!r} is out of bounds for size {self.size}")
            args = divmod(int(k) % self.size, self.shape[1])
        return self[tuple(args)].item()

    def reshape(self, *shape: Any, order: str = "C") -> BlockCyclicArray:
        """``A`` itself when ``shape`` is its own shape (``-1`` allowed): a distributed matrix
        cannot change shape without moving elements between processes."""
        if len(shape) == 1 and isinstance(shape[0], tuple | list):
            shape = tuple(shape[0])
        m, n = self.shape
        want = (
            [int(s) for s in shape] if all(isinstance(s, int | np.integer) for s in shape) else None
        )
        if want is not None and len(want) == 2 and want.count(-1) <= 1:
            if -1 in want and self.size:
                other = want[1 - want.index(-1)]
                if other > 0 and self.size % other == 0:
                    want[want.index(-1)] = self.size // other
            if tuple(want) == (m, n):
                return self
        raise ValueError(
            f"cannot reshape a distributed {m}x{n} matrix to {shape}: only the same shape (a "
            "relabelling) is supported, since any other shape moves elements between processes; "
            "gather with A.to_numpy() and reshape there, or build a new array with bm.from_numpy"
        )

    def redistribute(
        self, grid: ProcessGrid | None = None, block: tuple[int, int] | int | None = None
    ) -> BlockCyclicArray:
        """This matrix in another block-cyclic layout (PBLAS ``pxgemr2d``). Collective."""
        redistribute = _dispatch.method("redistribute")  # ops/redistribute.py
        return redistribute(self, grid=grid, block=block)

    def to_dask(self, **kwargs: Any) -> Any:
        """The matrix as a Dask array on every rank, in memory or over a temporary zarr store
        (see :func:`blasmp_array.io.to_dask`). Collective."""
        return _dispatch.method("to_dask")(self, **kwargs)  # io/_dask.py

    def to_zarr(
        self, url_or_store: Any, overwrite: bool = False, progress: bool = False, **options: Any
    ) -> None:
        """Parallel write to a zarr store, one chunk per block; ``options`` (``compressors``,
        ``zarr_format``) as in :func:`blasmp_array.io.to_zarr`. Collective."""
        to_zarr = _dispatch.method("to_zarr")  # io/_zarr.py
        to_zarr(self, url_or_store, overwrite=overwrite, progress=progress, **options)

    def to_npy(self, path: Any, overwrite: bool = False, progress: bool = False) -> None:
        """Parallel write to a ``.npy`` file through memory maps (:func:`blasmp_array.io.to_npy`).
        Collective."""
        to_npy = _dispatch.method("to_npy")  # io/_npy.py
        to_npy(self, path, overwrite=overwrite, progress=progress)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(
            "a BlockCyclicArray is distributed and is not converted to a NumPy array implicitly; "
            "call A.to_numpy() to gather it (on every rank, or on one with root=r)"
        )

    def __bool__(self) -> bool:
        raise TypeError(
            "the truth value of a distributed matrix is ambiguous; use np.any(A == x) "
            "style reductions, np.allclose or np.array_equal"
        )

    def __len__(self) -> int:
        """Number of rows (``A.shape[0]``), as for a 2-D NumPy array."""
        return self.shape[0]

    def __iter__(self) -> Any:
        raise TypeError(
            "iterating over a BlockCyclicArray is not supported (each row would be a collective "
            "exchange); index rows with A[i, :] or gather with A.to_numpy()"
        )

    # -- indexing (see blasmp_array.ops.indexing) ------------------------------------------
    def __getitem__(self, key: Any) -> Any:
        """``A[i0:i1, j0:j1]`` (a BlockCyclicArray view when the offsets are block-aligned,
        else a copy with a ViewCopyWarning), ``A[i, :]``/``A[:, j]`` (``1 x n``/``m x 1``
        views) or ``A[i, j]`` (the element, on every rank). Slices with step 1 only."""
        return _dispatch.method("getitem")(self, key)  # ops/indexing.py

    def __setitem__(self, key: Any, value: Any) -> None:
        """``A[key] = value`` for a scalar, a NumPy array given on every rank (broadcast as
        NumPy) or a BlockCyclicArray of the window's shape in any layout. Collective only for
        a BlockCyclicArray value in another layout."""
        _dispatch.method("setitem")(self, key, value)  # ops/indexing.py

    def __repr__(self) -> str:
        kinds = [self.op] if self._transposed else ["conj"] if self._conjugated else []
        if self._window is not None:
            (i0, i1), (j0, j1) = self._window.rows, self._window.cols
            kinds.insert(0, f"window [{i0}:{i1}, {j0}:{j1}]")
        view = f", view={' '.join(kinds)}" if kinds else ""
        return (
            f"BlockCyclicArray(shape={self.shape}, dtype={self.dtype}, block={self.block}, "
            f"grid={self.grid.nprow}x{self.grid.npcol}, backend={self.backend.name!r}{view})"
        )

    # -- NumPy protocols ------------------------------------------------------------------
    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return _dispatch.array_function(func, types, args, kwargs)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return _dispatch.array_ufunc(ufunc, method, inputs, kwargs)


@dataclass(frozen=True, eq=False)  # eq would compare the parents elementwise
class Window:
    """Where a window view lies: ``parent[rows[0]:rows[1], cols[0]:cols[1]]`` of a stored
    array ``parent`` (no flags, not itself a window view)."""

    parent: BlockCyclicArray
    rows: tuple[int, int]
    cols: tuple[int, int]

    def same_as(self, other: Window | None) -> bool:
        """The same window of the same parent."""
        return (
            other is not None
            and other.parent._data is self.parent._data
            and (other.rows, other.cols) == (self.rows, self.cols)
        )

    def local_slices(self) -> tuple[slice, slice]:
        """This rank's part of the window: a slice of the parent's local matrix (the rows of
        ANY window that a process owns are one contiguous run of its local rows)."""
        lay, g = self.parent.layout, self.parent.grid
        (mb, nb), (pr, pc), (sr, sc) = lay.block, lay.grid_shape, lay.src
        return (
            slice(
                numroc(self.rows[0], mb, g.myrow, pr, sr), numroc(self.rows[1], mb, g.myrow, pr, sr)
            ),
            slice(
                numroc(self.cols[0], nb, g.mycol, pc, sc), numroc(self.cols[1], nb, g.mycol, pc, sc)
            ),
        )


class _NoLocalMatrix:
    """The ``_data`` of a window view, which has no local matrix of its own: any use raises,
    so a consumer that forgot to resolve the view fails loudly instead of reading the wrong
    elements (a plain attribute, not a property: ``_data`` is read on every operator call)."""

    def _fail(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            "internal error: a window view (a submatrix at an offset inside a block) has no "
            "local matrix of its own; resolve it first (A.storage / A.resolve())"
        )

    __getitem__ = __setitem__ = __array__ = __len__ = __iter__ = _fail

    def __getattr__(self, name: str) -> Any:
        self._fail()


_NO_LOCAL = _NoLocalMatrix()


def check_dtype(dtype: Any) -> np.dtype:
    """Validate that ``dtype`` is one of the four BLAS dtypes; return it as ``np.dtype``."""
    dt = np.dtype(dtype)
    if dt not in SUPPORTED_DTYPES:
        raise TypeError(
            f"dtype {dt} is not supported; use one of float32, float64, complex64, complex128"
        )
    return dt
