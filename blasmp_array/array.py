"""BlockCyclicArray: a matrix (or a vector) spread over a ProcessGrid in the block-cyclic layout.

The array holds only ``(local matrix, layout, grid)`` plus lazy view flags: ``A.T`` and
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
elements (see :mod:`blasmp_array.ops.engine.indexing`).

Vectors (``ndim == 1``) are stored as ScaLAPACK stores them: an ``n x 1`` column, its rows in
blocks over the process rows of one process column (``BlockCyclicLayout((n, 1), (b, 1), grid)``).
The 1-D face is one more flag on the same description: a vector is an array whose 2-D state
(local matrix, layout, view flags, window) describes an ``n x 1`` matrix -- its *column face*,
``x._column`` -- and which shows ``shape == (n,)``. The column face may itself be a view:
``A[:, j]`` is a column of ``A``'s storage and ``A[i]`` the transposed view of a row, no copy. Every
operator works on the column face (``A @ x`` is GEMM of ``(m, n) x (n, 1)``), and
:func:`as_vector` turns an ``n x 1`` (or ``1 x n``) array back into a vector.

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

__all__ = [
    "BlockCyclicArray",
    "SUPPORTED_DTYPES",
    "BLAS_DTYPES",
    "as_vector",
    "check_dtype",
    "check_array_dtype",
]

#: The dtypes the BLAS operators compute in (and what integer and boolean input promotes to in
#: the linear-algebra calls: float64, as NumPy's ``np.linalg``).
BLAS_DTYPES = tuple(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))

#: The dtypes an array holds: the BLAS dtypes, the integers int32 and int64 and bool.
SUPPORTED_DTYPES = (*BLAS_DTYPES, *(np.dtype(t) for t in (np.int32, np.int64, np.bool_)))


class BlockCyclicArray(NDArrayOperatorsMixin):
    """A distributed ``m x n`` matrix in ScaLAPACK's 2-D block-cyclic layout, or a distributed
    vector of length ``n`` (``ndim == 1``), stored as an ``n x 1`` column over one process
    column (see the module doc).

    Do not call the constructor directly; use :func:`blasmp_array.from_numpy`,
    :func:`blasmp_array.zeros`, :func:`blasmp_array.arange`, :mod:`blasmp_array.random` or
    :func:`blasmp_array.from_dask`.

    Arithmetic operators (``+``, ``*``, ``@``, comparisons, ...) go through NumPy's ufunc protocol
    (``NDArrayOperatorsMixin``), so ``A @ B`` and ``np.matmul(A, B)`` reach the same code.

    Attributes
    ----------
    shape : tuple of int
        Global shape (of the view: ``A.T.shape == A.shape[::-1]``); ``(n,)`` for a vector.
    dtype : numpy.dtype
    block : tuple of int
        ``(mb, nb)`` of the view; ``(b,)`` for a vector (elements per block).
    grid : ProcessGrid
    layout : BlockCyclicLayout
        Descriptor of the stored matrix (ignores the view flags; a vector's is that of its
        column face's storage).
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
        vector: bool = False,
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
        self._vector = False
        if vector:
            if self._shape2[1] != 1:
                raise ValueError(f"a vector's column face is n x 1, got {self._shape2}")
            self._vector = True

    @classmethod
    def _of(
        cls, data: Any, layout: BlockCyclicLayout, grid: ProcessGrid, vector: bool = False
    ) -> BlockCyclicArray:
        """A stored array (no flags) of ``data``, which the caller guarantees has
        ``layout``'s local shape on ``grid``: the constructor without its checks, for the
        one-process fast paths whose Python cost matters."""
        new = object.__new__(cls)
        new._window, new._data, new._dtype = None, data, data.dtype
        new.layout, new.grid = layout, grid
        new._transposed = new._conjugated = False
        new._vector = vector
        return new

    def _face(self, **flags: Any) -> BlockCyclicArray:
        """This array with some of its flags changed (``_transposed``, ``_conjugated``,
        ``_vector``): the same storage, no validation, no copy."""
        new = object.__new__(BlockCyclicArray)
        new.__dict__.update(self.__dict__)
        for name, value in flags.items():
            setattr(new, f"_{name}", value)
        if not new._dtype.kind == "c":
            new._conjugated = False
        return new

    # -- descriptor -----------------------------------------------------------------------
    @property
    def _shape2(self) -> tuple[int, int]:
        """The 2-D shape of the view (of the column face, ``(n, 1)``, for a vector)."""
        s = self.layout.shape
        return (s[1], s[0]) if self._transposed else s

    @property
    def shape(self) -> Any:  # (m, n), or (n,) for a vector (the operators see 2-D faces only)
        s = self.layout.shape
        s = (s[1], s[0]) if self._transposed else s
        return (s[0],) if self._vector else s

    @property
    def block(self) -> Any:  # (mb, nb), or (b,) for a vector
        b = self.layout.block
        b = (b[1], b[0]) if self._transposed else b
        return (b[0],) if self._vector else b

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def ndim(self) -> int:
        return 1 if self._vector else 2

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def _column(self) -> BlockCyclicArray:
        """A vector's column face: the ``n x 1`` 2-D array it is (views included), sharing its
        storage. ``self`` for a 2-D array."""
        if not self._vector:
            return self
        new = object.__new__(BlockCyclicArray)  # _face(vector=False) without its generality
        new.__dict__.update(self.__dict__)
        new._vector = False
        return new

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
        """The stored matrix behind a view (``self`` when not a view; for a vector, the stored
        matrix behind its column face, a 2-D array).

        For a window view this is a copy of the window (collective, with a
        :class:`~blasmp_array.ViewCopyWarning`): writes into it do not reach the parent.
        """
        if self._vector:
            return self._column.storage
        if self._window is not None:
            return _dispatch.method("materialize_window")(self)  # ops/engine/indexing.py
        if not self.is_view:
            return self
        return BlockCyclicArray._of(self._data, self.layout, self.grid)

    def shares_storage(self, other: BlockCyclicArray) -> bool:
        """True when both are views of the same stored matrix."""
        mine = self._data if self._window is None else self._window.parent._data
        return mine is (other._data if other._window is None else other._window.parent._data)

    def _with_flags(self, transposed: bool, conjugated: bool) -> BlockCyclicArray:
        """This 2-D array (its storage, or its window) under the given view flags (the same
        storage: no validation, no copy)."""
        return self._face(transposed=transposed, conjugated=conjugated, vector=False)

    @property
    def local(self) -> Any:
        """This process's local matrix (NumPy or CuPy array), of the view as stored; for a
        vector, its local elements as a 1-D array (empty outside the vector's process column).

        For a lazy view (``A.T``, ``A.conj()``) the view is materialised first, which is a
        distributed (collective) transpose.
        """
        if self._vector:
            return self._column.resolve()._data.reshape(-1)
        return self.resolve()._data

    # -- views ----------------------------------------------------------------------------
    @property
    def T(self) -> BlockCyclicArray:
        """Lazy transpose (no data movement until an operation needs it); a vector's is the
        vector itself, as NumPy's."""
        if self._vector:
            return self
        return self._with_flags(not self._transposed, self._conjugated)

    @property
    def mT(self) -> BlockCyclicArray:
        """The matrix transpose (``A.T``); undefined for a vector, as in NumPy."""
        if self._vector:
            raise ValueError("matrix transpose with ndim < 2 is undefined")
        return self.T

    @property
    def H(self) -> BlockCyclicArray:
        """Lazy conjugate transpose (of a vector: its conjugate)."""
        return self.conj().T

    def conj(self) -> BlockCyclicArray:
        """Lazy complex conjugate (a no-op view for real dtypes)."""
        if self.dtype.kind != "c":
            return self
        return self._face(conjugated=not self._conjugated)

    conjugate = conj

    def resolve(self) -> BlockCyclicArray:
        """The view as a stored array: ``self`` if not a view, else a materialised copy.

        A transposed view becomes an array with block ``self.block`` on the same grid
        (a distributed transpose); a conjugated view is conjugated locally. A vector resolves
        to a vector whose column face is stored.
        """
        if self._vector:
            col = self._column
            return self if not col.is_view else as_vector(col.resolve())
        if not self.is_view:
            return self
        stored = self.storage  # a window view is copied here
        if not (self._transposed or self._conjugated):
            return stored
        if self._transposed:
            transpose = _dispatch.method("transpose")  # ops/engine/redistribute.py
            return transpose(stored, conjugate=self._conjugated)
        return BlockCyclicArray(self.backend.xp.conj(stored._data), stored.layout, self.grid)

    # -- conversions ----------------------------------------------------------------------
    def to_numpy(self, root: int | None = None) -> np.ndarray | None:
        """Gather the global matrix (or vector) as a NumPy array on every rank (or only on
        ``root``).

        Collective. Returns ``None`` on ranks other than ``root`` when ``root`` is given.
        """
        gather = _dispatch.method("gather")  # creation.py
        if self._vector:
            out = gather(self._column, root=root)
            return None if out is None else out.reshape(-1)
        return gather(self, root=root)  # a view is gathered as stored, then transposed

    def copy(self) -> BlockCyclicArray:
        """A deep copy (views are materialised; a window view with no ViewCopyWarning, since
        the copy is what was asked for)."""
        if self._vector:
            return as_vector(self._column.copy())
        if self._window is not None:
            stored = _dispatch.method("materialize_window")(self, warn=False)
            return stored._with_flags(self._transposed, self._conjugated).resolve()
        r = self.resolve()
        data = r._data.copy() if r is self else r._data
        return BlockCyclicArray(data, r.layout, r.grid)

    def __copy__(self) -> BlockCyclicArray:
        """``copy.copy(A)``: a copy of the data, as NumPy's (:meth:`copy`)."""
        return self.copy()

    def __deepcopy__(self, memo: Any) -> BlockCyclicArray:
        """``copy.deepcopy(A)``: :meth:`copy` (collective)."""
        return self.copy()

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError(
            "a BlockCyclicArray cannot be pickled: its elements are spread over the processes "
            "of an MPI job and its storage lives in memory (MPI windows, NVSHMEM) that only that "
            "job can reach. Gather it with A.to_numpy() and pickle the NumPy array, or write it "
            "with A.to_zarr(path) / A.to_npy(path) and read it back with bm.from_zarr / "
            "bm.from_npy"
        )

    def astype(self, dtype: Any, copy: bool = True) -> BlockCyclicArray:
        """Cast to ``dtype`` (one of float32, float64, complex64, complex128, int32, int64,
        bool; casting as NumPy's ``unsafe`` default)."""
        dtype = np.dtype(dtype)
        check_array_dtype(dtype)
        if self._vector:
            return as_vector(self._column.astype(dtype, copy=copy))
        r = self.resolve()
        if dtype == r.dtype and not copy:
            return r
        return BlockCyclicArray(r._data.astype(dtype), r.layout, r.grid)

    # -- NumPy methods (each the NumPy function of the same name, see ops/face/reductions.py) ------
    # Full reductions (and any reduction of a vector) return a NumPy scalar on every rank;
    # reductions along an axis of a matrix return a distributed vector (a 1 x n / m x 1 matrix
    # with keepdims=True).
    def sum(self, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
        """Sum of the elements (``np.sum``): a scalar on every rank, or a distributed vector
        along an axis of a matrix."""
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

    def dot(self, b: Any) -> Any:
        """``A.dot(B)``: ``np.dot(A, B)`` (the matrix product; of two vectors their inner
        product)."""
        return np.dot(self, b)

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
        if self._vector:
            if not args and self.size != 1:
                raise ValueError(
                    f"can only convert an array of size 1 to a Python scalar, not {self.shape}; "
                    "pass an index (x.item(k)) or gather with x.to_numpy()"
                )
            (k,) = args or (0,)
            if not isinstance(k, int | np.integer) or not -self.size <= k < self.size:
                raise IndexError(f"index {k!r} is out of bounds for size {self.size}")
            return self[int(k)].item()
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
        """A relabelling, no copy: ``A`` itself for its own shape (``-1`` allowed), a vector
        ``x`` as ``x.reshape(n, 1)`` (its column face) or ``x.reshape(1, n)`` (a row), and an
        ``n x 1`` or ``1 x n`` matrix as the vector ``reshape(n)`` / ``reshape(-1)``. Any
        other shape moves elements between processes and raises ``ValueError``."""
        if len(shape) == 1 and isinstance(shape[0], tuple | list):
            shape = tuple(shape[0])
        want = (
            [int(s) for s in shape]
            if all(isinstance(s, int | np.integer) and not isinstance(s, bool) for s in shape)
            else None
        )
        if want is not None and 1 <= len(want) <= 2 and want.count(-1) <= 1:
            if -1 in want:
                known = int(np.prod([w for w in want if w != -1]))
                if known > 0 and self.size % known == 0:
                    want[want.index(-1)] = self.size // known
                elif known == 0 and len(want) == 2 and self.size == 0:
                    # NumPy cannot tell -1 in a reshape of an empty array either
                    want = None
            if want is not None:
                target = tuple(want)
                if target == self.shape:
                    return self
                m, n = self._shape2
                if self._vector and target == (m, 1):
                    return self._column
                if self._vector and target == (1, m):
                    return self._column.T
                if not self._vector and len(target) == 1 and 1 in (m, n):
                    if target == (m * n,):
                        return as_vector(self if n == 1 else self.T)
        what = "vector of length" if self._vector else "matrix of shape"
        size = self.shape[0] if self._vector else "x".join(map(str, self.shape))
        raise ValueError(
            f"cannot reshape a distributed {what} {size} to {shape}: only relabellings are "
            "supported -- a vector to (n, 1), (1, n) and back, a matrix to its own shape -- since "
            "any other shape moves elements between processes; gather with A.to_numpy() and "
            "reshape there, or build a new array with bm.from_numpy"
        )

    def redistribute(
        self, grid: ProcessGrid | None = None, block: tuple[int, ...] | int | None = None
    ) -> BlockCyclicArray:
        """This matrix in another block-cyclic layout (PBLAS ``pxgemr2d``). Collective.

        A vector takes ``block`` as an int (or ``(b,)``): ``b`` elements per block."""
        redistribute = _dispatch.method("redistribute")  # ops/engine/redistribute.py
        if self._vector:
            vb = _vector_block(block, self.block[0])
            return as_vector(redistribute(self._column, grid=grid, block=(vb, 1)))
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

    def ravel(self, order: str = "C") -> BlockCyclicArray:
        """``A.ravel()``: the elements as a vector, a relabelling as :meth:`reshape` (a vector
        itself, an ``n x 1`` or ``1 x n`` matrix its vector); any other matrix raises
        ``ValueError``, since flattening it moves elements between processes. ``order`` is
        NumPy's ('C', 'F', 'A', 'K'); for these shapes every order gives the same vector."""
        if order not in ("C", "F", "A", "K"):
            raise ValueError(f"ravel: order must be one of 'C', 'F', 'A', 'K', not {order!r}")
        return self.reshape(-1)

    def flatten(self, order: str = "C") -> BlockCyclicArray:
        """``A.flatten()``: :meth:`ravel` as a new array (a copy, as NumPy's)."""
        if order not in ("C", "F", "A", "K"):
            raise ValueError(f"flatten: order must be one of 'C', 'F', 'A', 'K', not {order!r}")
        return self.reshape(-1).copy()

    def tolist(self) -> list[Any]:
        """Refused: a nested list of every element would be an implicit gather."""
        raise TypeError(
            "a BlockCyclicArray is distributed and is not converted to a list implicitly; "
            "call A.to_numpy().tolist() to gather it"
        )

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(
            "a BlockCyclicArray is distributed and is not converted to a NumPy array implicitly "
            "(np.asarray, or a library such as SciPy that calls it); call A.to_numpy() to "
            "gather it (on every rank, or on one with root=r), or, for scipy.linalg, call "
            "blasmp_array.linalg's distributed functions of the same names and arguments "
            "(solve, lu_factor, cho_factor, solve_triangular, qr, eigh, svd, lstsq, ...)"
        )

    def __bool__(self) -> bool:
        raise TypeError(
            "the truth value of a distributed matrix is ambiguous; use np.any(A == x) "
            "style reductions, np.allclose or np.array_equal"
        )

    def __len__(self) -> int:
        """Number of rows (``A.shape[0]``; a vector's length), as for a NumPy array."""
        return self.shape[0]

    def __iter__(self) -> Any:
        raise TypeError(
            "iterating over a BlockCyclicArray is not supported (each row would be a collective "
            "exchange); index rows with A[i, :] or gather with A.to_numpy()"
        )

    # -- indexing (see blasmp_array.ops.engine.indexing) ------------------------------------------
    def __getitem__(self, key: Any) -> Any:
        """``A[i0:i1, j0:j1]`` (a view, see :mod:`blasmp_array.ops.engine.indexing`), ``A[i]``,
        ``A[i, :]``/``A[:, j]`` (vectors, views), ``A[i, j]`` (the element, on every rank),
        ``x[k]``, ``x[i:j]``, and selections along one axis (index arrays, boolean masks:
        new arrays)."""
        return _dispatch.method("getitem")(self, key)  # ops/engine/indexing.py

    def __setitem__(self, key: Any, value: Any) -> None:
        """``A[key] = value`` for a scalar, a NumPy array given on every rank (broadcast as
        NumPy) or a BlockCyclicArray of the window's shape in any layout. Collective only for
        a BlockCyclicArray value in another layout."""
        _dispatch.method("setitem")(self, key, value)  # ops/engine/indexing.py

    def __repr__(self) -> str:
        if self._vector:
            col = self._column
            view = ", view" if col.is_view else ""
            return (
                f"BlockCyclicArray(shape={self.shape}, dtype={self.dtype}, block={self.block}, "
                f"grid={self.grid.nprow}x{self.grid.npcol}, backend={self.backend.name!r}{view})"
            )
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

    def __matmul__(self, other: Any) -> Any:
        """``self @ other``: ``np.matmul``; two BlockCyclicArrays go to the product directly
        (NumPy's override protocol costs microseconds a small product feels)."""
        if type(other) is BlockCyclicArray:
            return _dispatch.method("matmul")(self, other)
        return NDArrayOperatorsMixin.__matmul__(self, other)


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


def check_array_dtype(dtype: Any) -> np.dtype:
    """Validate that ``dtype`` is one an array holds (:data:`SUPPORTED_DTYPES`: the BLAS
    dtypes, int32, int64, bool); return it as ``np.dtype``."""
    dt = np.dtype(dtype)
    if dt not in SUPPORTED_DTYPES:
        raise TypeError(
            f"dtype {dt} is not supported; use one of float32, float64, complex64, complex128, "
            "int32, int64, bool"
        )
    return dt


def check_dtype(dtype: Any) -> np.dtype:
    """Validate that ``dtype`` is one of the four BLAS dtypes (what the operators, the random
    constructors and the readers work in); return it as ``np.dtype``."""
    dt = np.dtype(dtype)
    if dt not in BLAS_DTYPES:
        raise TypeError(
            f"dtype {dt} is not supported here; use one of float32, float64, complex64, "
            "complex128 (integer and bool input of the linear-algebra calls promotes to float64)"
        )
    return dt


def blas_dtype(dtype: Any) -> np.dtype:
    """The dtype the linear-algebra calls compute ``dtype`` data in: ``dtype`` itself for the
    BLAS dtypes, float64 for integers and bool (as NumPy's ``np.linalg``)."""
    dt = np.dtype(dtype)
    return dt if dt in BLAS_DTYPES else np.dtype(np.float64)


def as_vector(x: BlockCyclicArray) -> BlockCyclicArray:
    """The vector whose column face is the ``n x 1`` array ``x`` (or the vector of the row
    ``x``, ``1 x n``): a relabelling that shares ``x``'s storage (views included), no copy.

    A vector given is returned as it is. The constructors, readers and operators that build a
    vector build its ``n x 1`` column (``BlockCyclicLayout((n, 1), (b, 1), grid)``) and return
    ``as_vector(column)``.
    """
    if x._vector:
        return x
    m, n = x._shape2
    if n != 1:
        if m != 1:
            raise ValueError(f"as_vector needs an n x 1 or 1 x n array, got {x.shape}")
        x = x.T
    return x._face(vector=True)


def _vector_block(block: Any, default: int) -> int:
    """Elements per block of a vector from ``block``: an int, ``(b,)``, or a matrix's
    ``(mb, nb)`` (the vector is laid out as a column of it: ``mb``); ``None``: ``default``."""
    if block is None:
        return default
    if isinstance(block, tuple | list) and len(block) in (1, 2):
        block = block[0]
    if not isinstance(block, int | np.integer) or isinstance(block, bool) or block <= 0:
        raise ValueError(f"a vector's block is a positive int (elements per block), got {block!r}")
    return int(block)
