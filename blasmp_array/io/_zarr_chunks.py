"""Concurrent chunk I/O of one rank through zarr's asynchronous API.

A rank reads or writes many chunks at once: one coroutine per chunk on zarr's own event loop
(``zarr.core.sync.sync``, the loop on which zarr runs its synchronous API and keeps its stores'
connections), at most :func:`limit_for` of them in flight. zarr runs the file or object-store I/O
and the compression codecs (zstd, blosc, ...) in its thread pool, so codecs do not serialise on
one thread; this module also moves the copy of a strided block into a contiguous chunk off the
event loop. Workers pull chunks from one shared iterator, so no task per chunk is created
ahead of time, and after the first failure no new chunk is started while the chunks in flight
finish (nothing keeps writing into a store after the call returned).

Each piece is one chunk (or the part of one chunk that a rank stores): global indices (slices,
or ascending index arrays for chunks that hold rows of several ranks) and the host rectangle
they come from or go to.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, NamedTuple, TypeVar

import numpy as np

__all__ = [
    "CONCURRENCY",
    "IN_FLIGHT_BYTES",
    "Piece",
    "limit_for",
    "run",
    "write_pieces",
    "read_pieces",
]

#: Most chunks of one rank in flight at once (zarr's own default for a multi-chunk selection
#: is 10).
CONCURRENCY = 8
#: Upper bound (bytes, decoded) of the chunks of one rank in flight at once; one chunk is
#: always allowed, whatever its size.
IN_FLIGHT_BYTES = 64 * 2**20

T = TypeVar("T")


class Piece(NamedTuple):
    """One chunk's part of a rank's rows and columns."""

    #: chunk coordinates in the store's chunk grid
    chunk: tuple[int, int]
    #: global rows and columns (slices, or ascending index arrays)
    rows: slice | np.ndarray
    cols: slice | np.ndarray
    #: the rectangle of the host array they come from / go to
    host_rows: slice
    host_cols: slice


def limit_for(chunk_nbytes: int) -> int:
    """Chunks in flight: :data:`CONCURRENCY`, fewer when chunks are large (at least 1)."""
    return max(1, min(CONCURRENCY, IN_FLIGHT_BYTES // max(1, chunk_nbytes)))


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to completion on zarr's event loop (from any thread but that loop's)."""
    from zarr.core.sync import sync

    return sync(coroutine)


async def _bounded(items: Iterable[T], fn: Callable[[T], Awaitable[None]], limit: int) -> None:
    """``await fn(item)`` for every item, at most ``limit`` at once; the first error is raised
    once every call in flight has finished (no new call starts after it)."""
    it = iter(items)
    errors: list[Exception] = []

    async def worker() -> None:
        for item in it:
            if errors:
                return
            try:
                await fn(item)
            except Exception as exc:
                errors.append(exc)
                return

    await asyncio.gather(*(worker() for _ in range(limit)))
    if errors:
        raise errors[0]


def _chunk_name(arr: Any, chunk: tuple[int, int]) -> str:
    try:
        return f"chunk {chunk} (key {arr.metadata.encode_chunk_key(chunk)!r})"
    except Exception:  # the key is only for the message
        return f"chunk {chunk}"


async def write_pieces(
    arr: Any, host: np.ndarray, pieces: Iterable[Piece], limit: int, bar: Any
) -> None:
    """Write whole chunks ``host[piece.host_rows, piece.host_cols]`` to ``arr`` (a zarr
    ``AsyncArray``) at the pieces' global slices, ``limit`` at once."""
    from zarr.core.buffer.cpu import buffer_prototype

    async def one(piece: Piece) -> None:
        try:
            # strided block -> contiguous chunk, on zarr's thread pool (a memory copy)
            block = await asyncio.to_thread(
                np.ascontiguousarray, host[piece.host_rows, piece.host_cols]
            )
            await arr.setitem((piece.rows, piece.cols), block, prototype=buffer_prototype)
        except Exception as exc:
            raise OSError(f"writing {_chunk_name(arr, piece.chunk)}: {_text(exc)}") from exc
        bar.update(1)

    await _bounded(pieces, one, limit)


async def read_pieces(
    arr: Any, host: np.ndarray, pieces: Iterable[Piece], limit: int, bar: Any
) -> None:
    """Read the pieces' global indices of ``arr`` (a zarr ``AsyncArray``) straight into
    ``host[piece.host_rows, piece.host_cols]`` (same dtype), ``limit`` chunks at once."""
    from zarr.core.buffer.cpu import buffer_prototype

    async def one(piece: Piece) -> None:
        view: Any = host[piece.host_rows, piece.host_cols]
        out = buffer_prototype.nd_buffer.from_ndarray_like(view)
        try:
            await arr.get_orthogonal_selection(
                (piece.rows, piece.cols), out=out, prototype=buffer_prototype
            )
        except Exception as exc:
            raise OSError(f"reading {_chunk_name(arr, piece.chunk)}: {_text(exc)}") from exc
        bar.update(1)

    await _bounded(pieces, one, limit)


def _text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
