"""Construction of BlockCyclicArrays (from NumPy, constants, identity) and gathering them back.

Every constructor is collective over the grid's communicator and takes the same keywords:
``dtype`` (float32, float64, complex64 or complex128; default float64), ``block`` (an int for
square blocks or a pair ``(mb, nb)``; default :data:`DEFAULT_BLOCK`) and ``grid`` (default:
:func:`default_grid`, a cached near-square grid of ``MPI.COMM_WORLD``). Arguments must be the
same on every rank; they are validated identically on every rank before any communication.

Local storage is a C-ordered backend array (NumPy or CuPy) of shape
``layout.local_shape(myrow, mycol)``, allocated with ``backend.empty``.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _dispatch
from ._alloc import new_array
from ._dispatch import implements_method
from .array import (
    SUPPORTED_DTYPES,
    BlockCyclicArray,
    _vector_block,
    as_vector,
    check_array_dtype,
)
from .grid import ProcessGrid
from .layout import BlockCyclicLayout

__all__ = [
    "DEFAULT_BLOCK",
    "default_grid",
    "normalize_block",
    "normalize_shape",
    "from_numpy",
    "gather",
    "empty",
    "zeros",
    "ones",
    "full",
    "eye",
    "empty_like",
    "zeros_like",
    "ones_like",
    "full_like",
]

#: Block shape used when ``block=None``: 256 x 256 (a block larger than the matrix is fine: the
#: matrix is then one ragged block held by process (0, 0)).
DEFAULT_BLOCK: tuple[int, int] = (256, 256)

#: Upper bound (bytes) of the message buffers one round of :func:`from_numpy` (root given) or
#: :func:`gather` holds at once; larger matrices move in several rounds.
TRANSFER_ROUND_BYTES = 256 * 2**20

_default_grid: ProcessGrid | None = None


def default_grid() -> ProcessGrid:
    """The grid used when ``grid=None``: ``ProcessGrid()`` of ``MPI.COMM_WORLD``, created once.

    Collective the first time it is called.
    """
    global _default_grid
    if _default_grid is None:
        _default_grid = ProcessGrid()
    return _default_grid


# -- argument normalisation (pure; identical on every rank) ----------------------------------
def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool | np.bool_)


def normalize_block(block: int | Sequence[int] | None) -> tuple[int, int]:
    """``(mb, nb)`` from ``None`` (:data:`DEFAULT_BLOCK`), an int (square) or a pair.

    Raises
    ------
    ValueError
        If a block size is not a positive integer or ``block`` is not an int or a pair.
    """
    if block is None:
        return DEFAULT_BLOCK
    if _is_int(block):
        pair: Any = (block, block)
    elif isinstance(block, Sequence) and not isinstance(block, str) and len(block) == 2:
        pair = tuple(block)
    else:
        raise ValueError(
            f"block must be a positive int or a pair (mb, nb) of positive ints, got {block!r}"
        )
    if not all(_is_int(b) and b > 0 for b in pair):
        raise ValueError(
            f"block sizes must be positive integers, got block={block!r}; pass e.g. block=64 "
            "or block=(64, 32)"
        )
    return (int(pair[0]), int(pair[1]))


def normalize_shape(shape: Any) -> tuple[int, int]:
    """``(m, n)`` from a pair of non-negative ints (a BlockCyclicArray is always 2-D)."""
    if (
        isinstance(shape, Sequence)
        and not isinstance(shape, str)
        and len(shape) == 2
        and all(_is_int(s) and s >= 0 for s in shape)
    ):
        return (int(shape[0]), int(shape[1]))
    raise ValueError(
        f"shape must be a pair (m, n) of non-negative ints, got {shape!r}; a BlockCyclicArray "
        "is a 2-D matrix (use (n, 1) for a column vector)"
    )


def _vector_length(shape: Any) -> int | None:
    """``n`` when ``shape`` asks for a vector (an int ``n`` or ``(n,)``), else None."""
    if _is_int(shape) and shape >= 0:
        return int(shape)
    if (
        isinstance(shape, Sequence)
        and not isinstance(shape, str)
        and len(shape) == 1
        and _is_int(shape[0])
        and shape[0] >= 0
    ):
        return int(shape[0])
    return None


def _vector_of(a: Any, root: int | None, grid: ProcessGrid | None) -> tuple[bool, ProcessGrid]:
    """Whether ``from_numpy`` got a 1-D array (read on ``root`` and broadcast when given) and
    the grid."""
    g = _check_grid(grid)
    if root is not None and not (_is_int(root) and 0 <= root < g.size):
        raise ValueError(f"root must be a rank in [0, {g.size}) or None, got {root!r}")
    here = a is not None and not isinstance(a, BlockCyclicArray) and np.ndim(a) == 1
    if root is None:
        return here, g
    return bool(g.backend.bcast(here if g.rank == root else None, root=root)), g


def _check_grid(grid: ProcessGrid | None) -> ProcessGrid:
    if grid is None:
        return default_grid()
    if not isinstance(grid, ProcessGrid):
        raise TypeError(f"grid must be a blasmp_array.ProcessGrid, got {type(grid).__name__}")
    return grid


def _layout_of(a: BlockCyclicArray) -> BlockCyclicLayout:
    """The layout an array shaped like ``a`` (a view included) gets on ``a.grid``.

    Matches what :meth:`BlockCyclicArray.resolve` produces: ``a.shape`` in blocks ``a.block``.
    """
    if not a._transposed:
        return a.layout
    return BlockCyclicLayout(a.shape, a.block, a.grid.shape)


def new_like(a: BlockCyclicArray, dtype: Any = None) -> BlockCyclicArray:
    """An uninitialised array with ``a``'s shape, layout and grid (``dtype`` defaults to a's).

    Unlike :func:`empty_like`, ``dtype`` may also be ``bool`` (results of comparisons).
    """
    dt = a.dtype if dtype is None else np.dtype(dtype)
    if dt != np.bool_:
        check_array_dtype(dt)
    return new_array(_layout_of(a), a.grid, dt)


# -- constructors ------------------------------------------------------------------------------
def empty(
    shape: tuple[int, int],
    dtype: Any = np.float64,
    block: int | tuple[int, int] | None = None,
    grid: ProcessGrid | None = None,
) -> BlockCyclicArray:
    """A distributed ``m x n`` matrix with uninitialised entries.

    Parameters
    ----------
    shape : (int, int)
        Global shape ``(m, n)``.
    dtype : dtype, optional
        float32, float64 (default), complex64 or complex128.
    block : int or (int, int), optional
        Block shape ``(mb, nb)``; an int means square blocks. Default :data:`DEFAULT_BLOCK`.
    grid : ProcessGrid, optional
        Default :func:`default_grid`.

    Returns
    -------
    BlockCyclicArray

    Notes
    -----
    ``shape`` an int ``n`` or ``(n,)`` gives a vector (``ndim == 1``), stored as an ``n x 1``
    column over one process column; ``block`` is then its elements per block (an int, or the
    ``mb`` of a pair). This holds for every constructor.
    """
    n = _vector_length(shape)
    if n is not None:  # a vector: its n x 1 column
        vb = _vector_block(block, DEFAULT_BLOCK[0])
        return as_vector(empty((n, 1), dtype=dtype, block=(vb, 1), grid=grid))
    shape = normalize_shape(shape)
    blk = normalize_block(block)
    dt = check_array_dtype(dtype)
    g = _check_grid(grid)
    return new_array(BlockCyclicLayout(shape, blk, g.shape), g, dt)


def full(
    shape: tuple[int, int],
    fill_value: Any,
    dtype: Any = None,
    block: int | tuple[int, int] | None = None,
    grid: ProcessGrid | None = None,
) -> BlockCyclicArray:
    """A distributed matrix filled with ``fill_value``.

    ``dtype=None`` gives complex128 for a complex ``fill_value`` and float64 otherwise (a NumPy
    float32/complex64 scalar keeps its precision). See :func:`empty` for the other parameters.
    """
    fill_value = _check_scalar(fill_value, "fill_value")
    if dtype is None:
        if isinstance(fill_value, np.generic) and fill_value.dtype in SUPPORTED_DTYPES:
            dtype = fill_value.dtype
        else:
            dtype = np.complex128 if np.iscomplexobj(fill_value) else np.float64
    out = empty(shape, dtype=dtype, block=block, grid=grid)
    _check_fill(fill_value, out.dtype)
    out._data[...] = fill_value
    return out


def zeros(
    shape: tuple[int, int],
    dtype: Any = np.float64,
    block: int | tuple[int, int] | None = None,
    grid: ProcessGrid | None = None,
) -> BlockCyclicArray:
    """A distributed matrix of zeros (parameters as :func:`empty`)."""
    out = empty(shape, dtype=dtype, block=block, grid=grid)
    out._data[...] = 0
    return out


def ones(
    shape: tuple[int, int],
    dtype: Any = np.float64,
    block: int | tuple[int, int] | None = None,
    grid: ProcessGrid | None = None,
) -> BlockCyclicArray:
    """A distributed matrix of ones (parameters as :func:`empty`)."""
    out = empty(shape, dtype=dtype, block=block, grid=grid)
    out._data[...] = 1
    return out


def eye(
    n: int,
    m: int | None = None,
    k: int = 0,
    dtype: Any = np.float64,
    block: int | tuple[int, int] | None = None,
    grid: ProcessGrid | None = None,
) -> BlockCyclicArray:
    """An ``n x m`` matrix with ones on diagonal ``k`` and zeros elsewhere (``np.eye``).

    Parameters
    ----------
    n : int
        Number of rows.
    m : int, optional
        Number of columns (default ``n``).
    k : int, optional
        Diagonal offset: 0 the main diagonal, > 0 above it, < 0 below it.
    dtype, block, grid
        As :func:`empty`.
    """
    if not _is_int(k):
        raise ValueError(f"k must be an integer diagonal offset, got {k!r}")
    out = zeros((n, n if m is None else m), dtype=dtype, block=block, grid=grid)
    g, xp = out.grid, out.backend.xp
    rows = out.layout.local_rows(g.myrow)
    cols = out.layout.local_cols(g.mycol)
    # local (i, j) is on diagonal k when cols[j] - rows[i] == k
    jl = np.searchsorted(cols, rows + int(k))
    hit = jl < cols.size
    hit[hit] = cols[jl[hit]] == rows[hit] + int(k)
    il = np.nonzero(hit)[0]
    if il.size:
        out._data[xp.asarray(il), xp.asarray(jl[il])] = 1
    return out


def _like_args(a: Any, dtype: Any, shape: Any, what: str) -> tuple[BlockCyclicArray, np.dtype]:
    if not isinstance(a, BlockCyclicArray):
        raise TypeError(f"{what} expects a BlockCyclicArray, got {type(a).__name__}")
    n = None if shape is None else _vector_length(shape)
    want = a.shape if shape is None else (n,) if n is not None else normalize_shape(shape)
    if want != a.shape:
        raise ValueError(
            f"{what}: shape={shape!r} differs from the array's shape {a.shape}; use "
            "bm.empty/zeros/ones/full with block= and grid= for a new shape"
        )
    dt = a.dtype if dtype is None else check_array_dtype(dtype)
    return a, dt


def empty_like(a: BlockCyclicArray, dtype: Any = None, shape: Any = None) -> BlockCyclicArray:
    """An uninitialised array with ``a``'s shape, block and grid (``dtype`` defaults to a's).

    ``a`` may be a lazy view (``A.T``): the result then has ``A.T``'s shape and block.
    """
    a, dt = _like_args(a, dtype, shape, "empty_like")
    if a.ndim == 1:
        return as_vector(new_array(_layout_of(a._column), a.grid, dt))
    return new_array(_layout_of(a), a.grid, dt)


def zeros_like(a: BlockCyclicArray, dtype: Any = None, shape: Any = None) -> BlockCyclicArray:
    """Zeros with ``a``'s shape, block and grid (see :func:`empty_like`)."""
    out = empty_like(a, dtype=dtype, shape=shape)
    out._data[...] = 0
    return out


def ones_like(a: BlockCyclicArray, dtype: Any = None, shape: Any = None) -> BlockCyclicArray:
    """Ones with ``a``'s shape, block and grid (see :func:`empty_like`)."""
    out = empty_like(a, dtype=dtype, shape=shape)
    out._data[...] = 1
    return out


def full_like(
    a: BlockCyclicArray, fill_value: Any, dtype: Any = None, shape: Any = None
) -> BlockCyclicArray:
    """``fill_value`` everywhere, with ``a``'s shape, block and grid (see :func:`empty_like`)."""
    fill_value = _check_scalar(fill_value, "fill_value")
    a, dt = _like_args(a, dtype, shape, "full_like")
    _check_fill(fill_value, dt)
    out = empty_like(a, dtype=dt)
    out._data[...] = fill_value
    return out


def _check_scalar(v: Any, name: str) -> Any:
    if isinstance(v, np.ndarray) and v.ndim == 0:
        v = v[()]
    if not isinstance(v, numbers.Number | np.generic) or isinstance(v, str | bytes):
        raise TypeError(f"{name} must be a scalar number, got {type(v).__name__}")
    return v


def _check_fill(v: Any, dtype: np.dtype) -> None:
    if np.iscomplexobj(v) and dtype.kind != "c" and np.imag(v) != 0:
        raise TypeError(
            f"cannot fill a {dtype} matrix with the complex value {v!r}; pass dtype=complex128"
        )


# -- NumPy <-> distributed ---------------------------------------------------------------------
def from_numpy(
    a: Any,
    block: int | tuple[int, int] | None = None,
    grid: ProcessGrid | None = None,
    root: int | None = None,
    dtype: Any = None,
) -> BlockCyclicArray:
    """Distribute a 2-D (or 1-D) NumPy array.

    Parameters
    ----------
    a : numpy.ndarray
        The global ``m x n`` matrix, or a vector of length ``n`` (then stored as an ``n x 1``
        column over one process column, ``block`` its elements per block). With ``root=None``
        it must be given (identical) on every rank and each rank copies out its own local
        matrix without communication. With ``root=r`` it is read only on rank ``r`` (pass
        ``None`` elsewhere) and scattered: rank ``r`` sends each process only its local
        matrix, in rounds of at most :data:`TRANSFER_ROUND_BYTES` of messages.
    block : int or (int, int), optional
        Block shape (default :data:`DEFAULT_BLOCK`).
    grid : ProcessGrid, optional
        Default :func:`default_grid`.
    root : int, optional
        Rank holding ``a``; ``None`` (default) when every rank holds it.
    dtype : dtype, optional
        Convert to this dtype (one of the four BLAS dtypes); by default ``a.dtype``, which must
        then be one of them.

    Returns
    -------
    BlockCyclicArray

    Raises
    ------
    ValueError
        ``a`` is not 2-D, a bad ``block`` or ``root``.
    TypeError
        Unsupported dtype, or ``a`` is not array-like.
    """
    vector, g = _vector_of(a, root, grid)
    if vector:  # a vector: its n x 1 column
        vb = _vector_block(block, DEFAULT_BLOCK[0])
        col = None if a is None else (a if hasattr(a, "reshape") else np.asarray(a)).reshape(-1, 1)
        return as_vector(from_numpy(col, block=(vb, 1), grid=g, root=root, dtype=dtype))
    blk = normalize_block(block)
    backend = g.backend
    if root is not None and not (_is_int(root) and 0 <= root < g.size):
        raise ValueError(f"root must be a rank in [0, {g.size}) or None, got {root!r}")
    if root is None:
        everywhere = _host_matrix(a, dtype, backend)
        layout = BlockCyclicLayout(everywhere.shape, blk, g.shape)
        rows, cols = layout.local_rows(g.myrow), layout.local_cols(g.mycol)
        out = new_array(layout, g, everywhere.dtype)
        out._data[...] = backend.asarray(everywhere[np.ix_(rows, cols)])
        return out

    # shape and dtype are known on root only: agree on them (or on the error) first
    meta: Any = None
    host: np.ndarray | None = None
    if g.rank == root:
        try:
            host = _host_matrix(a, dtype, backend)
            meta = ("ok", host.shape, host.dtype.str)
        except (TypeError, ValueError) as exc:
            meta = (type(exc).__name__, str(exc))
    meta = backend.bcast(meta, root=root)
    if meta[0] != "ok":
        raise (TypeError if meta[0] == "TypeError" else ValueError)(
            f"from_numpy(root={root}): {meta[1]}"
        )
    shape, dt = tuple(meta[1]), np.dtype(meta[2])
    layout = BlockCyclicLayout(shape, blk, g.shape)
    out = new_array(layout, g, dt)
    xp = backend.xp
    nothing = xp.empty((0,), dtype=dt)
    sizes = _local_sizes(layout, g)
    for group in _rounds(sizes, dt.itemsize, exclude=root):
        send = [nothing] * g.size
        recv = [nothing] * g.size
        if g.rank == root:
            assert host is not None
            for p in group:
                # root -> p: p's local matrix, packed C-ordered
                send[p] = backend.asarray(np.ascontiguousarray(_local_of(host, layout, g, p)))
                send[p] = send[p].reshape(-1)
        elif g.rank in group:
            recv[root] = xp.empty((sizes[g.rank],), dtype=dt)
        backend.alltoallv(send, recv)
        if g.rank in group:
            out._data[...] = recv[root].reshape(out._data.shape)
    if g.rank == root:
        assert host is not None
        out._data[...] = backend.asarray(_local_of(host, layout, g, root))
    return out


def _host_matrix(a: Any, dtype: Any, backend: Any) -> np.ndarray:
    if isinstance(a, BlockCyclicArray):
        raise TypeError("from_numpy got a BlockCyclicArray; use A.copy() or A.redistribute()")
    if a is None:
        raise TypeError("from_numpy got None; pass the matrix (on `root` only if root is given)")
    try:
        host = a if isinstance(a, np.ndarray) else backend.asnumpy(a)
    except Exception as exc:
        raise TypeError(f"from_numpy cannot read a {type(a).__name__} as an array: {exc}") from exc
    if host.ndim != 2:
        raise ValueError(
            f"from_numpy needs a 2-D array, got shape {host.shape}; reshape vectors to (n, 1)"
        )
    if dtype is not None:
        host = host.astype(check_array_dtype(dtype), copy=False)
    elif host.dtype not in SUPPORTED_DTYPES:
        raise TypeError(
            f"from_numpy: dtype {host.dtype} is not supported; use one of float32, float64, "
            "complex64, complex128 (pass dtype=np.float64 to convert)"
        )
    return host


def _local_of(host: np.ndarray, layout: BlockCyclicLayout, g: ProcessGrid, p: int) -> np.ndarray:
    prow, pcol = g.coords_of(p)
    return host[np.ix_(layout.local_rows(prow), layout.local_cols(pcol))]


def _local_sizes(layout: BlockCyclicLayout, g: ProcessGrid) -> list[int]:
    sizes = []
    for p in range(g.size):
        r, c = layout.local_shape(*g.coords_of(p))
        sizes.append(r * c)
    return sizes


def _rounds(sizes: list[int], itemsize: int, exclude: int | None = None) -> list[list[int]]:
    """Consecutive groups of ranks whose messages total at most TRANSFER_ROUND_BYTES (each
    group has at least one rank; ranks with nothing to move and ``exclude`` are left out).
    The same on every rank, so every rank runs the same number of collectives."""
    groups: list[list[int]] = []
    current: list[int] = []
    used = 0
    for p, s in enumerate(sizes):
        if s == 0 or p == exclude:
            continue
        nbytes = s * itemsize
        if current and used + nbytes > TRANSFER_ROUND_BYTES:
            groups.append(current)
            current, used = [], 0
        current.append(p)
        used += nbytes
    if current:
        groups.append(current)
    return groups


@implements_method("gather")  # BlockCyclicArray.to_numpy
def gather(a: BlockCyclicArray, root: int | None = None) -> np.ndarray | None:
    """Gather the global matrix into a NumPy array on every rank, or on ``root`` only.

    Collective. Each process sends its local matrix (whole, C-ordered) to the ranks that
    need it, in rounds of at most :data:`TRANSFER_ROUND_BYTES` per rank. A lazy view
    (``A.T``, ``A.conj()``) is gathered as stored and transposed/conjugated on the host, with
    no distributed transpose.

    Parameters
    ----------
    a : BlockCyclicArray
    root : int, optional
        ``None`` (default): every rank gets the matrix. Else only rank ``root`` does.

    Returns
    -------
    numpy.ndarray or None
        The ``m x n`` matrix, or ``None`` on ranks other than ``root``.
    """
    if not isinstance(a, BlockCyclicArray):
        raise TypeError(f"gather expects a BlockCyclicArray, got {type(a).__name__}")
    g = a.grid
    if root is not None and not (_is_int(root) and 0 <= root < g.size):
        raise ValueError(f"root must be a rank in [0, {g.size}) or None, got {root!r}")
    transposed, conjugated = a._transposed, a._conjugated
    if a.is_window:  # gathering is an explicit copy: no ViewCopyWarning
        a = _dispatch.method("materialize_window")(a, warn=False)
    else:
        a = a.storage
    backend, xp, layout = a.backend, a.backend.xp, a.layout
    dt = a.dtype
    wire = np.dtype(np.uint8) if dt == np.bool_ else dt  # bools travel as bytes
    receives = root is None or g.rank == root
    out = np.empty(layout.shape, dtype=dt) if receives else None
    mine = xp.ascontiguousarray(a._data).reshape(-1).view(wire)
    nothing = xp.empty((0,), dtype=wire)
    sizes = _local_sizes(layout, g)
    rows = [layout.local_rows(r) for r in range(g.nprow)]
    cols = [layout.local_cols(c) for c in range(g.npcol)]
    # a process's own part is copied locally; others move with alltoallv
    for group in _rounds(sizes, dt.itemsize):
        send = [nothing] * g.size
        recv = [nothing] * g.size
        if g.rank in group:
            for p in range(g.size) if root is None else [root]:
                if p != g.rank:
                    send[p] = mine
        if receives:
            for p in group:
                if p != g.rank:
                    recv[p] = xp.empty((sizes[p],), dtype=wire)
        backend.alltoallv(send, recv)
        if receives:
            assert out is not None
            for p in group:
                prow, pcol = g.coords_of(p)
                src = mine if p == g.rank else recv[p]
                block = backend.asnumpy(src).view(dt).reshape(rows[prow].size, cols[pcol].size)
                out[np.ix_(rows[prow], cols[pcol])] = block
    if out is not None and transposed:
        out = np.ascontiguousarray(out.T)
    if out is not None and conjugated:
        np.conjugate(out, out=out)
    return out
