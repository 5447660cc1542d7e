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
from ._local_views import col_ranges, local_view
from .array import (
    BLAS_DTYPES,
    SUPPORTED_DTYPES,
    BlockCyclicArray,
    _vector_block,
    as_vector,
    check_array_dtype,
)
from .backends._host_messages import message_tag
from .backends._staging import row_chunks
from .grid import ProcessGrid
from .layout import BlockCyclicLayout

__all__ = [
    "DEFAULT_BLOCK",
    "ROUTE",
    "PANEL_BYTES",
    "default_grid",
    "normalize_block",
    "normalize_shape",
    "from_numpy",
    "gather",
    "gather_to_backend",
    "scatter_from_backend",
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

#: How :func:`gather` and :func:`from_numpy` with ``root`` move data between processes, per
#: backend name: ``'host'`` (MPI messages of host memory, each process's rows straight into or
#: out of their places in the NumPy array) or ``'device'`` (row panels gathered onto, or
#: scattered from, one rank's device by the one-sided exchange; that rank alone crosses the
#: host link). Tests switch it to run both routes on the CPU.
ROUTE: dict[str, str] = {"cpu": "host", "gpu": "device"}

#: Upper bound (bytes) of one row panel of the device route (the extra device memory of the
#: rank holding it, besides the exchange's workspace); tests lower it to force many panels.
PANEL_BYTES = 256 * 2**20

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
def _route(backend: Any, dtype: np.dtype, size: int, transposed: bool = False) -> str:
    """How a scatter or gather moves data between ranks: :data:`ROUTE` of the backend, except
    that one process needs no exchange unless a transpose is better done on the device, and
    integers and booleans (the exchange's device kernels take the BLAS dtypes) take the host
    route."""
    route = ROUTE.get(backend.name, "host")
    if dtype not in BLAS_DTYPES or (size == 1 and not transposed):
        return "host"
    return route


def _panel_rows(ncols: int, itemsize: int) -> int:
    """Rows of one panel of the device route: :data:`PANEL_BYTES` (at least one row)."""
    return max(1, PANEL_BYTES // max(1, ncols * itemsize))


def _row_panels(m: int, n: int, itemsize: int) -> list[tuple[int, int]]:
    """The row panels ``[r0, r1)`` of an ``m x n`` matrix on the device route, of
    :func:`_panel_rows` rows each (the last one ragged); none when the matrix is empty."""
    if not m * n:
        return []
    h = _panel_rows(n, itemsize)
    return [(r0, min(m, r0 + h)) for r0 in range(0, m, h)]


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
        The global ``m x n`` matrix (any strides), or a vector of length ``n`` (then stored as
        an ``n x 1`` column over one process column, ``block`` its elements per block). With
        ``root=None`` it must be given (identical) on every rank and each rank copies out its
        own local matrix without communication. With ``root=r`` it is read only on rank ``r``
        (pass ``None`` elsewhere) and scattered: each process receives only its local matrix
        (see Notes).
    block : int or (int, int), optional
        Block shape (default :data:`DEFAULT_BLOCK`).
    grid : ProcessGrid, optional
        Default :func:`default_grid`.
    root : int, optional
        Rank holding ``a``; ``None`` (default) when every rank holds it.
    dtype : dtype, optional
        Convert to this dtype (float32, float64, complex64, complex128, int32, int64 or bool, as
        ``a.astype(dtype)`` would); by default ``a.dtype``, which must then be one of them.

    Returns
    -------
    BlockCyclicArray

    Raises
    ------
    ValueError
        ``a`` is not 2-D, a bad ``block`` or ``root``.
    TypeError
        Unsupported dtype, or ``a`` is not array-like.

    Notes
    -----
    A process's local matrix is a few strided views of ``a`` (:mod:`blasmp_array._local_views`):
    it is copied with a handful of slice copies on the host copy threads of the backend, and on
    the GPU streamed to the device through reusable pinned buffers, the host copies overlapping
    the DMA. With ``root=r``, on the host route (:data:`ROUTE`; the CPU backend) rank ``r``
    sends each process its rows in chunks of ``CHUNK_BYTES`` packed into two reused host
    buffers (``backends/_staging.py``); on the device route (the GPU
    backend) rank ``r`` uploads row panels of at most :data:`PANEL_BYTES` to its device and the
    one-sided exchange scatters each. Extra memory: on the root, two host buffers of
    ``CHUNK_BYTES`` (host route) or one panel on its device (device route); on a GPU, each
    process's two pinned buffers.
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
        everywhere, dt = _host_matrix(a, dtype, backend)
        layout = BlockCyclicLayout(everywhere.shape, blk, g.shape)
        out = new_array(layout, g, dt)
        backend.from_host(local_view(everywhere, layout, g.myrow, g.mycol), out._data)
        return out

    # shape and dtype are known on root only: agree on them (or on the error) first
    meta: Any = None
    host: np.ndarray | None = None
    if g.rank == root:
        try:
            host, dt = _host_matrix(a, dtype, backend)
            if host.dtype != dt:
                host = host.astype(dt)  # the messages carry the array's own elements
            meta = ("ok", host.shape, dt.str)
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
    if shape[0] * shape[1] == 0:
        return out
    if _route(backend, dt, g.size) == "device":
        _scatter_device(host, out, root)
    else:
        _scatter_host(host, out, root)
    return out


def _scatter_host(host: np.ndarray | None, out: BlockCyclicArray, root: int) -> None:
    """Root ``root`` sends each process its local rows out of ``host``, chunk by chunk
    through two reused host buffers (``backend.send_view``), and copies its own; the others
    receive their chunks into their local matrices."""
    g, backend, layout = out.grid, out.backend, out.layout
    itemsize = out.dtype.itemsize
    if g.rank != root:
        chunks = row_chunks(out._data.shape, itemsize)
        backend.recv_rows(out._data, chunks, col_ranges(layout, g.mycol), root)
        return
    assert host is not None
    for p in range(g.size):
        if p != root:
            # root -> p: p's local rows, packed chunk by chunk into root's reused buffers
            view = local_view(host, layout, *g.coords_of(p))
            backend.send_view(view, row_chunks(view.shape, itemsize), p)
    backend.from_host(local_view(host, layout, g.myrow, g.mycol), out._data)


def _scatter_device(host: np.ndarray | None, out: BlockCyclicArray, root: int) -> None:
    """Row panel by row panel: root ``root`` uploads the panel to its device, the one-sided
    exchange scatters it (``ops/engine/row_panels.py``)."""
    g, backend = out.grid, out.backend
    m, n = out.shape
    h = min(m, _panel_rows(n, out.dtype.itemsize))
    scatter = _dispatch.method("scatter_rows")  # ops/engine/row_panels.py
    panel = backend.xp.empty((h, n), dtype=out.dtype) if g.rank == root else None
    for r0, r1 in _row_panels(m, n, out.dtype.itemsize):
        rows = None
        if panel is not None:
            assert host is not None
            rows = panel[: r1 - r0]
            # host rows -> root's device, on all the node's cores (the other ranks wait)
            backend.from_host(host[r0:r1], rows, all_cores=True)
        scatter(out, r0, r1, root, rows)  # root's device -> every process's local matrix


def _host_matrix(a: Any, dtype: Any, backend: Any) -> tuple[np.ndarray, np.dtype]:
    """``a`` as a 2-D host array and the dtype of the distributed matrix. Numbers are converted
    later, while copying; other kinds (strings, objects) are converted here."""
    if isinstance(a, BlockCyclicArray):
        raise TypeError("from_numpy got a BlockCyclicArray; use A.copy() or A.redistribute()")
    if a is None:
        raise TypeError("from_numpy got None; pass the matrix (on `root` only if root is given)")
    try:
        host = a if isinstance(a, np.ndarray) else backend.asnumpy(a)
    except Exception as exc:
        raise TypeError(f"from_numpy cannot read a {type(a).__name__} as an array: {exc}") from exc
    if host.ndim != 2:
        raise ValueError(f"from_numpy needs a 1-D or 2-D array, got shape {host.shape}")
    if dtype is not None:
        dt = check_array_dtype(dtype)
        if host.dtype.kind not in "biufc":
            host = host.astype(dt)
        return host, dt
    if host.dtype not in SUPPORTED_DTYPES:
        raise TypeError(
            f"from_numpy: dtype {host.dtype} is not supported; use one of float32, float64, "
            "complex64, complex128, int32, int64, bool (pass dtype=np.float64 to convert)"
        )
    return host, np.dtype(host.dtype)


@implements_method("gather")  # BlockCyclicArray.to_numpy
def gather(a: BlockCyclicArray, root: int | None = None) -> np.ndarray | None:
    """Gather the global matrix into a NumPy array on every rank, or on ``root`` only.

    Collective. On the host route (:data:`ROUTE`; the CPU backend) each process sends its
    local matrix in row chunks and each receiving rank takes them with MPI straight into
    their final places in the result (derived datatypes over the strided views of
    :mod:`blasmp_array._local_views`), its own part copied on its host copy threads. On the
    device route (the GPU backend, several
    processes) row panels of at most :data:`PANEL_BYTES` are gathered onto the receiving
    rank's device by the one-sided exchange and copied to the host through the pinned
    buffers there. A lazy view is gathered as viewed: ``A.T`` lands transposed in place on the
    host route (transposed and conjugated on the device on the device route), ``A.conj()``
    is conjugated on the host.

    Parameters
    ----------
    a : BlockCyclicArray
    root : int, optional
        ``None`` (default): every rank gets the matrix. Else only rank ``root`` does.

    Returns
    -------
    numpy.ndarray or None
        The ``m x n`` matrix (C-ordered), or ``None`` on ranks other than ``root``.
    """
    if not isinstance(a, BlockCyclicArray):
        raise TypeError(f"gather expects a BlockCyclicArray, got {type(a).__name__}")
    g = a.grid
    if root is not None and not (_is_int(root) and 0 <= root < g.size):
        raise ValueError(f"root must be a rank in [0, {g.size}) or None, got {root!r}")
    transposed, conjugated = a._transposed, a._conjugated
    if a.is_window:  # gathering is an explicit copy: no ViewCopyWarning
        stored = _dispatch.method("materialize_window")(a, warn=False)
    else:
        stored = a.storage
    receives = root is None or g.rank == root
    out = np.empty(a.shape, dtype=a.dtype) if receives else None
    if a.size == 0:
        return out
    if _route(stored.backend, stored.dtype, g.size, transposed) == "device":
        _gather_device(stored._with_flags(transposed, conjugated), out, root)
    else:
        # the stored matrix lands in out, or in out.T for a transposed view
        dest = None if out is None else out.T if transposed else out
        _gather_host(stored, dest, root, conjugated)
    return out


def gather_to_backend(a: BlockCyclicArray, root: int = 0) -> Any:
    """The global matrix ``a`` (as viewed) as one C-ordered array of the backend's array module
    on rank ``root`` (a device array on the GPU), None elsewhere: the input of a one-process
    solver on the root (the gathered routes of ``eigh`` and ``svd``). Collective.

    On the device route (:data:`ROUTE`) the row panels are gathered straight into it by the
    one-sided exchange, and nothing crosses the host link; on the host route it is
    :func:`gather` (the root's array is the NumPy one on the CPU backend, uploaded
    otherwise). Memory: the whole matrix on the root, and on the device route the exchange's
    workspace for one panel of at most :data:`PANEL_BYTES` on every rank."""
    g, backend = a.grid, a.backend
    if a.size == 0 or _route(backend, a.dtype, g.size, a._transposed) != "device":
        host = gather(a, root=root)
        return None if host is None else backend.asarray(host)
    stored = _dispatch.method("materialize_window")(a, warn=False) if a.is_window else a.storage
    view = stored._with_flags(a._transposed, a._conjugated)
    m, n = a.shape
    out = backend.xp.empty((m, n), dtype=a.dtype) if g.rank == root else None
    gather_rows = _dispatch.method("gather_rows")  # ops/engine/row_panels.py
    for r0, r1 in _row_panels(m, n, a.dtype.itemsize):
        gather_rows(view, r0, r1, root, None if out is None else out[r0:r1])
    return out


def scatter_from_backend(
    src: Any,
    shape: tuple[int, int],
    block: tuple[int, int],
    grid: ProcessGrid,
    dtype: Any,
    root: int = 0,
) -> BlockCyclicArray:
    """A new ``shape`` array of ``dtype`` in ``block`` on ``grid`` from the backend array
    ``src`` of that shape on rank ``root`` (ignored elsewhere; any strides): the output side of
    :func:`gather_to_backend`. Collective; every rank passes the same shape, block and dtype
    (a root's array of another shape raises ``ValueError`` on every rank).

    On the device route the root's rows are scattered in panels by the one-sided exchange,
    straight from its device; on the host route it is :func:`from_numpy` with ``root``."""
    backend = grid.backend
    dt = np.dtype(dtype)
    held = backend.bcast(tuple(src.shape) if grid.rank == root else None, root=root)
    if held != tuple(shape):
        raise ValueError(f"scatter_from_backend: rank {root} holds a {held} array, not {shape}")
    if _route(backend, dt, grid.size) != "device":
        host = None if grid.rank != root else backend.asnumpy(src)
        return from_numpy(host, block=block, grid=grid, root=root, dtype=dt)
    out = new_array(BlockCyclicLayout(shape, block, grid.shape), grid, dt)
    m, n = shape
    if grid.rank == root:
        src = backend.xp.ascontiguousarray(src, dtype=dt)  # panels are C-ordered rows
    scatter = _dispatch.method("scatter_rows")  # ops/engine/row_panels.py
    for r0, r1 in _row_panels(m, n, dt.itemsize):
        scatter(out, r0, r1, root, None if grid.rank != root else src[r0:r1])
    return out


def _gather_host(
    a: BlockCyclicArray, dest: np.ndarray | None, root: int | None, conjugate: bool = False
) -> None:
    """Every process sends its local rows, chunk by chunk, to the receiving ranks, which
    receive them straight into their places in ``dest`` (the global matrix, any strides;
    ``None`` on ranks that receive nothing: MPI datatypes over the strided views) and copy
    their own (all conjugated if asked: the own part while copying, the others in place).

    A receiving rank posts its receives first, then (``root=None``) starts its sends, copies
    its own part -- which takes the first-touch page faults of the fresh ``dest`` -- and then
    waits, so that MPI moves the messages into pages already mapped."""
    g, backend, layout = a.grid, a.backend, a.layout
    itemsize = a.dtype.itemsize
    chunks = row_chunks(a._data.shape, itemsize)
    parts = col_ranges(layout, g.mycol)
    if root is not None and g.rank != root:
        # me -> root: my local rows, message k * len(parts) + j for row chunk k, column run j
        backend.send_rows(a._data, chunks, parts, [root])
        return
    assert dest is not None
    others = [p for p in range(g.size) if p != g.rank]
    views = [local_view(dest, layout, *g.coords_of(p)) for p in others]
    recvs = []
    for p, view in zip(others, views, strict=True):
        # p -> me: p's local rows, received straight into their places in dest
        n = len(view.col_ranges)
        for k, (lo, hi) in enumerate(row_chunks(view.shape, itemsize)):
            for j in range(n):
                recvs.append(backend.post_recv(view.views(lo, hi, j), p, message_tag(k * n + j)))
    sends = []
    if root is None and others:
        if backend.host_resident:
            sends = backend.post_rows(a._data, chunks, parts, others)  # me -> every other rank
        else:
            backend.send_rows(a._data, chunks, parts, others)  # through the device's staging
    # with one root the others only wait for it: its copy may use all the node's cores
    own = local_view(dest, layout, g.myrow, g.mycol)
    backend.to_host(a._data, own, conjugate, all_cores=root is not None)
    backend.wait_requests(sends + recvs)
    if not conjugate:
        return
    for view in views:  # my own part was conjugated while copied
        for j in range(len(view.col_ranges)):
            for v in view.views(0, view.shape[0], j):
                np.conjugate(v, out=v)


def _gather_device(view: BlockCyclicArray, out: np.ndarray | None, root: int | None) -> None:
    """Row panel by row panel: the one-sided exchange gathers the panel (as viewed) onto each
    receiving rank's device (``ops/engine/row_panels.py``), which copies it into its rows of
    ``out``."""
    g, backend = view.grid, view.backend
    m, n = view.shape
    h = min(m, _panel_rows(n, view.dtype.itemsize))
    gather_rows = _dispatch.method("gather_rows")  # ops/engine/row_panels.py
    receivers = range(g.size) if root is None else [root]
    panel = backend.xp.empty((h, n), dtype=view.dtype) if out is not None else None
    for r0, r1 in _row_panels(m, n, view.dtype.itemsize):
        rows = None if panel is None else panel[: r1 - r0]
        for r in receivers:
            gather_rows(view, r0, r1, r, rows if r == g.rank else None)
        if out is not None:
            # my device -> my host rows; with one root, on all the node's cores (the rest wait)
            backend.to_host(rows, out[r0:r1], all_cores=root is not None)
