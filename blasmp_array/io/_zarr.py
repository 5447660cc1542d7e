"""Parallel zarr I/O: every rank writes its own blocks as whole zarr chunks, many at once, and
reads the chunks (of any chunking) that hold its elements straight into its local matrix."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import numpy as np

from .._alloc import new_array
from ..array import BlockCyclicArray
from ..grid import ProcessGrid
from ..layout import BlockCyclicLayout
from . import _vectors as vectors
from . import _zarr_chunks as chunk_io
from ._common import (
    agree,
    check_dtype_arg,
    check_flag,
    local_path,
    normalize_block,
    on_root,
    progress_bar,
    resolve_grid,
    stored,
    write_published,
)
from ._deps import require
from ._plan import chunk_bounds, chunk_parts
from ._staging import read_into, write_from
from ._zarr_chunks import Piece

__all__ = ["to_zarr", "from_zarr", "MARK"]

#: Attribute in which the writer records itself: ``{"writer": ..., "complete": bool, ...}``.
#: ``complete`` becomes true only once every rank has written every chunk; readers refuse a
#: store marked incomplete and check that a complete one has every chunk.
MARK = "blasmp_array"


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("blasmp_array")
    except metadata.PackageNotFoundError:
        return "unknown"


# -- writing ---------------------------------------------------------------------------------
def to_zarr(
    A: BlockCyclicArray,
    url_or_store: Any,
    overwrite: bool = False,
    progress: bool = False,
    *,
    compressors: Any = None,
    zarr_format: int = 3,
) -> None:
    """Write the matrix to a zarr array, in parallel. Collective.

    The zarr chunks are exactly the blocks ``A.block``, so each chunk is written by the one rank
    that owns the block and no two ranks touch one chunk (no locks). Each rank writes many of
    its chunks at once through zarr's asynchronous API, the codec running on zarr's threads. The
    store is created by rank 0 under a temporary sibling name, filled by every rank, marked
    complete (attribute ``"blasmp_array"``) and renamed to its final name by rank 0 only once
    every rank has finished without error; on an error anywhere the temporary store is removed
    and every rank raises :class:`~blasmp_array.io.DistributedIOError`. A half-written store
    never appears under the final name.

    On the GPU backend the local matrix goes to the host in bands of whole block rows (at most
    64 MiB, the device copy of the next band beside the writes of the current one); on the CPU
    backend the chunks are written from the local matrix itself.

    Parameters
    ----------
    A : BlockCyclicArray
        The matrix (lazy views are materialised first).
    url_or_store : str, PathLike, 'file://' URL or zarr ``LocalStore``
        Destination directory, on a filesystem that every rank sees (and the readers). Other
        zarr stores (zip, fsspec, memory, ...) raise :class:`TypeError`: a store is published
        by renaming a finished directory.
    overwrite : bool, default False
        Replace an existing zarr store (only after the new one is complete). Without it an
        existing destination raises :class:`FileExistsError` on every rank; a destination that
        is not a zarr store is never replaced.
    progress : bool, default False
        Show a progress bar on rank 0 when stdout is a terminal (tqdm or rich, if installed).
    compressors : optional
        zarr's ``compressors`` argument of :func:`zarr.create_array`. Default ``None``: no
        compression, the fastest for dense floating-point data, which barely compresses (see
        ``docs/io.md``); e.g. ``zarr.codecs.BloscCodec(cname="lz4", shuffle="shuffle")`` or
        ``"auto"`` (zarr's default, zstd) for matrices with many zeros or repeated values.
    zarr_format : {3, 2}, default 3
        zarr format version of the store.

    Raises
    ------
    FileNotFoundError, PermissionError, FileExistsError
        The destination's directory is missing or not writable, or the destination exists;
        raised on every rank before any data moves.
    TypeError, ValueError
        A bad argument (the same on every rank).
    DistributedIOError
        Writing failed on some rank (e.g. the disk filled up); nothing was published.

    Notes
    -----
    Every chunk is written, including chunks equal to the fill value (0), so ``-0.0`` and NaN
    payloads survive a round trip bit for bit, and a reader can tell a missing chunk from a
    zero one.
    """
    zarr = require("zarr", "to_zarr")
    final = _destination(zarr, url_or_store)
    check_flag(progress, "progress")
    if not isinstance(A, BlockCyclicArray):
        raise TypeError(f"to_zarr needs a BlockCyclicArray, got {type(A).__name__}")
    _check_codecs(zarr, A.dtype, compressors, zarr_format)  # before any collective
    A = stored(A, "to_zarr")
    layout, g, bk = A.layout, A.grid, A.grid.backend
    mark = {
        "writer": f"blasmp_array {_version()}",
        "complete": False,
        "grid": list(g.shape),
        "block": list(layout.block),
    }

    def finish(tmp: Path) -> None:
        arr = zarr.open_array(str(tmp), mode="r+")
        arr.update_attributes({MARK: {**mark, "complete": True}})

    if A.ndim == 1:  # a vector: gathered and written whole by rank 0 (io/_vectors.py)
        mark["block"] = [layout.block[0]]

        def save(tmp: Path, host: np.ndarray) -> None:
            arr = zarr.create_array(
                str(tmp),
                shape=host.shape,
                chunks=(layout.block[0],),
                dtype=A.dtype,
                compressors=compressors,
                fill_value=0,
                zarr_format=zarr_format,
                attributes={MARK: mark},
            )
            arr.with_config({"write_empty_chunks": True})[...] = host

        vectors.write(A, final, overwrite, "to_zarr", save, replaceable=_not_zarr, finish=finish)
        return

    def create(tmp: Path) -> None:
        zarr.create_array(
            str(tmp),
            shape=layout.shape,
            chunks=layout.block,
            dtype=A.dtype,
            compressors=compressors,
            fill_value=0,
            zarr_format=zarr_format,
            attributes={MARK: mark},
        )

    def write(tmp: Path) -> None:
        arr = zarr.open_array(str(tmp), mode="r+").with_config({"write_empty_chunks": True})
        rows, cols = layout.local_rows(g.myrow), layout.local_cols(g.mycol)
        block_rows = chunk_bounds(_regular(layout.shape[0], layout.block[0]))
        col_parts = chunk_parts(cols, chunk_bounds(_regular(layout.shape[1], layout.block[1])))
        nchunks = len(layout.local_block_rows(g.myrow)) * len(col_parts)
        bar = progress_bar(progress, g.rank, nchunks, "to_zarr (rank 0)", "chunk")
        limit = chunk_io.limit_for(int(np.prod(layout.block)) * A.dtype.itemsize)

        def sink(host: np.ndarray, band: slice) -> None:
            pieces = _pieces(rows[band], block_rows, col_parts)
            chunk_io.run(chunk_io.write_pieces(arr.async_array, host, pieces, limit, bar))

        try:
            write_from(bk, A._data, layout, (g.myrow, g.mycol), sink)
        finally:
            bar.close()

    write_published(
        bk, final, overwrite, "to_zarr", create, write, replaceable=_not_zarr, finish=finish
    )


def _destination(zarr: Any, target: Any) -> Path:
    """Directory of a ``to_zarr`` destination.

    Only directories can be published by a rename: a path, a ``file://`` URL or a zarr
    ``LocalStore``. Other stores (zip, fsspec/object stores, memory, databases) are refused
    rather than guessed from a ``path`` attribute that may not name a directory.
    """
    if isinstance(target, str | os.PathLike):
        return local_path(target, "to_zarr")
    if isinstance(target, zarr.storage.LocalStore):
        if target.read_only:
            raise ValueError("to_zarr: the LocalStore is read-only (read_only=True)")
        return local_path(target.root, "to_zarr")
    raise TypeError(
        "to_zarr writes to a directory (str, pathlib.Path, 'file://' URL or zarr LocalStore) "
        f"that it can publish by a rename, got {type(target).__name__}; write to a local "
        "directory and copy the finished store"
    )


def _not_zarr(path: Path) -> str | None:
    """Why an existing ``path`` must not be replaced by a zarr store (None: it is one)."""
    if path.is_dir() and any((path / m).is_file() for m in ("zarr.json", ".zarray", ".zgroup")):
        return None
    return "exists and is not a zarr store"


def _check_codecs(zarr: Any, dtype: np.dtype, compressors: Any, zarr_format: Any) -> None:
    """Every rank, before any collective: build the array's metadata in memory, so that a bad
    ``compressors`` or ``zarr_format`` raises the same error on every rank."""
    if zarr_format not in (2, 3):
        raise ValueError(f"to_zarr: zarr_format must be 2 or 3, got {zarr_format!r}")
    try:
        zarr.create_array(
            zarr.storage.MemoryStore(),
            shape=(1, 1),
            dtype=dtype,
            compressors=compressors,
            zarr_format=zarr_format,
            fill_value=0,
        )
    except Exception as exc:
        kind = TypeError if isinstance(exc, TypeError) else ValueError
        raise kind(f"to_zarr: compressors={compressors!r} is not usable: {exc}") from exc


def _regular(n: int, c: int) -> list[int]:
    """Sizes of a regular chunking of ``n`` elements in chunks of ``c`` (last one ragged)."""
    return [c] * (n // c) + ([n % c] if n % c else [])


def _pieces(rows: np.ndarray, row_bounds: np.ndarray, col_parts: list[Any]) -> list[Piece]:
    """The chunks holding the global ``rows`` (a band of local rows) x the rank's columns."""
    return [
        Piece((r.chunk, c.chunk), r.select, c.select, r.local, c.local)
        for r in chunk_parts(rows, row_bounds)
        for c in col_parts
    ]


# -- reading ---------------------------------------------------------------------------------
def from_zarr(
    url: Any,
    block: int | tuple[int, int] | None = None,
    grid: ProcessGrid | None = None,
    backend: str | None = None,
    *,
    component: str | None = None,
    dtype: Any = None,
    method: str = "auto",
    progress: bool = False,
) -> BlockCyclicArray:
    """Read a 2-D zarr array of any chunking into any grid and block size. Collective.

    Each rank reads the chunks that hold its elements, many at once through zarr's
    asynchronous API, straight into its local matrix (through host bands on the GPU backend);
    it never holds more than a few chunks beyond its local matrix. Two ways to read, chosen by
    ``method``:

    * ``'direct'``: each rank reads the parts of the chunks that overlap its own elements; when
      chunks are larger than blocks, a chunk is read and decoded by several ranks.
    * ``'chunks'``: read with the store's chunk shape as the block (every chunk is read and
      decoded by exactly one rank, the owner of that block), then
      :meth:`~BlockCyclicArray.redistribute` to ``block`` in memory. A rank briefly holds its
      local matrix twice.
    * ``'auto'`` (default): ``'chunks'`` when ``'direct'`` would decode each chunk on about
      four or more ranks (the chunk spans blocks of several process rows and columns) and the
      chunks are enough to give every process row and column at least one; else ``'direct'``.

    Stores written by :func:`to_zarr` carry the attribute ``"blasmp_array"``: one marked
    incomplete (left by a writer that did not finish) raises :class:`ValueError`, and one with a
    chunk missing raises :class:`FileNotFoundError` naming the chunk, on every rank. In other
    stores (Dask, xarray, zarr) a missing chunk is legitimate (zarr skips chunks equal to the
    fill value) and reads as the fill value.

    Parameters
    ----------
    url : str, PathLike, URL, zarr store or zarr.Array
        The array (or a group with ``component``), seen by every rank.
    block : int or (int, int), optional
        Block shape; default: the store's chunk shape.
    grid : ProcessGrid, optional
        Default: the default grid (of ``backend`` when given).
    backend : {'cpu', 'gpu'}, optional
        Backend of the default grid.
    component : str, optional
        Path of the array inside a zarr group.
    dtype : dtype, optional
        Convert to this dtype (default: the store's, one of the four BLAS dtypes).
    method : {'auto', 'chunks', 'direct'}, optional
        See above.
    progress : bool, default False
        Progress bar on rank 0 when stdout is a terminal.

    Returns
    -------
    BlockCyclicArray

    Raises
    ------
    FileNotFoundError
        No array at ``url`` (and ``component``), or a chunk of a complete blasmp_array store is
        missing.
    ValueError
        The array is not 2-D, or it is a blasmp_array store marked incomplete.
    TypeError
        The array's dtype is none of the four BLAS dtypes and ``dtype`` is not given.
    DistributedIOError
        Reading failed on some rank (e.g. a corrupt chunk, named in the message).
    """
    zarr = require("zarr", "from_zarr")
    if method not in ("auto", "chunks", "direct"):
        raise ValueError(f"method must be 'auto', 'chunks' or 'direct', got {method!r}")
    if component is not None and not isinstance(component, str):
        raise TypeError(f"component must be a str, got {type(component).__name__}")
    check_flag(progress, "progress")
    blk = None if block is None else normalize_block(block)
    g = resolve_grid(grid, backend)
    bk = g.backend
    name = _describe(url, component)
    info = on_root(bk, f"from_zarr({name})", lambda: _inspect(zarr, url, component))
    shape, chunks = info["shape"], info["chunks"]
    if len(shape) not in (1, 2):
        raise ValueError(f"from_zarr needs a 1-D or 2-D array, {name} holds shape {tuple(shape)}")
    if info["dtype"] is None:
        raise TypeError(
            f"from_zarr: {name} holds {info['dtype_name']} data, which converts to none of "
            "float32, float64, complex64, complex128"
        )
    stored_dtype = np.dtype(info["dtype"])
    dt = check_dtype_arg(dtype, stored_dtype, f"from_zarr({name})")
    _check_complete(name, info)
    if len(shape) == 1:  # a vector: read whole by rank 0 and scattered (io/_vectors.py)
        return vectors.read(
            g,
            int(chunks[0]) if block is None else block,
            dt,
            f"from_zarr({name})",
            lambda: _open(zarr, url, component)[...],
        )
    chunks = (int(chunks[0]), int(chunks[1]))
    blk = chunks if blk is None else blk
    if method == "auto":
        (m, n), (cm, cn) = shape, chunks
        # about how many ranks would decode one chunk with 'direct'
        decoders = min(-(-cm // blk[0]), g.nprow) * min(-(-cn // blk[1]), g.npcol)
        enough = -(-m // cm) >= g.nprow and -(-n // cn) >= g.npcol
        method = "chunks" if decoders >= 4 and enough else "direct"
    read_block = chunks if method == "chunks" else blk
    layout = BlockCyclicLayout((int(shape[0]), int(shape[1])), read_block, g.shape)
    out = new_array(layout, g, dt)

    def fill() -> None:
        arr = _open(zarr, url, component)
        if tuple(arr.shape) != tuple(shape) or tuple(arr.chunks) != chunks:
            raise ValueError(f"{name} changed while being read (shape or chunks differ)")
        rows, cols = layout.local_rows(g.myrow), layout.local_cols(g.mycol)
        row_bounds = chunk_bounds(_regular(layout.shape[0], chunks[0]))
        col_parts = chunk_parts(cols, chunk_bounds(_regular(layout.shape[1], chunks[1])))
        nchunks = len(chunk_parts(rows, row_bounds)) * len(col_parts)
        bar = progress_bar(progress, g.rank, nchunks, "from_zarr", "chunk")
        limit = chunk_io.limit_for(chunks[0] * chunks[1] * stored_dtype.itemsize)

        def source(host: np.ndarray, band: slice) -> None:
            pieces = _pieces(rows[band], row_bounds, col_parts)
            chunk_io.run(chunk_io.read_pieces(arr.async_array, host, pieces, limit, bar))

        try:
            read_into(bk, out._data, layout, (g.myrow, g.mycol), source, stored_dtype)
        finally:
            bar.close()

    agree(bk, f"from_zarr({name})", fill)
    if read_block != blk:
        # one read of every chunk, by its owner; then chunk-shaped blocks -> requested blocks
        return out.redistribute(block=blk)
    return out


def _describe(url: Any, component: str | None) -> str:
    text = repr(os.fspath(url)) if isinstance(url, str | os.PathLike) else type(url).__name__
    return text + (f", component={component!r}" if component else "")


def _open(zarr: Any, url: Any, component: str | None) -> Any:
    """The zarr array at ``url`` (a path, URL, store or ``zarr.Array``), read-only."""
    if isinstance(url, zarr.Array):
        if component:
            raise ValueError("component applies to a store or a path, not to a zarr.Array")
        return url
    if isinstance(url, os.PathLike):
        url = os.fspath(url)
    try:
        return zarr.open_array(store=url, path=component or "", mode="r")
    except zarr.errors.NodeTypeValidationError as exc:
        raise ValueError(
            f"{exc} (the store holds a group: pass component='<path of the array in it>')"
        ) from exc


def _inspect(zarr: Any, url: Any, component: str | None) -> dict[str, Any]:
    """Rank 0: what every rank needs to know about the array before reading it."""
    arr = _open(zarr, url, component)
    dt = arr.dtype
    info: dict[str, Any] = {
        "shape": tuple(int(s) for s in arr.shape),
        "chunks": tuple(int(c) for c in arr.chunks),
        "dtype": dt.str if isinstance(dt, np.dtype) and dt.kind in "biufc" else None,
        "dtype_name": str(dt),
        "mark": None,
        "missing": [],
    }
    mark = arr.attrs.get(MARK)
    if isinstance(mark, dict) and "complete" in mark:
        info["mark"] = {"writer": str(mark.get("writer", "")), "complete": bool(mark["complete"])}
        if mark["complete"]:
            info["missing"] = _missing_chunks(arr)
    return info


def _missing_chunks(arr: Any) -> list[str]:
    """Keys of the chunks of ``arr`` that its store does not hold (one listing of the store)."""

    async def listing() -> set[str]:
        prefix = arr.store_path.path
        cut = len(prefix) + 1 if prefix else 0
        return {key[cut:] async for key in arr.store_path.store.list_prefix(prefix)}

    held = chunk_io.run(listing())
    grid = [range(-(-s // c)) for s, c in zip(arr.shape, arr.chunks, strict=True)]
    return [
        key
        for key in (arr.metadata.encode_chunk_key(at) for at in itertools.product(*grid))
        if key not in held
    ]


def _check_complete(name: str, info: dict[str, Any]) -> None:
    """Every rank (same ``info``): refuse an unfinished or damaged blasmp_array store."""
    mark = info["mark"]
    if mark is None:
        return
    if not mark["complete"]:
        raise ValueError(
            f"from_zarr: {name} was left half-written by a writer that did not finish "
            f"({mark['writer']}; attribute {MARK!r} has complete=false); write it again"
        )
    missing = info["missing"]
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise FileNotFoundError(
            f"from_zarr: chunk {missing[0]!r}{more} of {name} is missing, although its writer "
            f"({mark['writer']}) wrote every chunk: the store was damaged; write it again"
        )
