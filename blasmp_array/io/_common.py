"""Shared pieces of the I/O module: argument checks, local batches and tiles, agreement on
errors across ranks, and the create-write-publish protocol of the parallel writers.

Publishing protocol (``to_zarr``, ``to_npy``)
--------------------------------------------
1. Every rank validates its arguments; rank 0 checks whether the destination exists and picks a
   temporary sibling name ``.<name>.tmp-<random>`` (same directory, so the final rename stays on
   one filesystem and is atomic); both are broadcast.
2. Rank 0 creates the empty store under the temporary name (header / metadata).
3. Every rank writes its own tiles into it (no two ranks write the same chunk or element).
4. The ranks agree on errors (an all-gather of per-rank error messages). On any error the
   temporary store is removed and every rank raises :class:`DistributedIOError`; otherwise
   rank 0 renames the temporary store to the final name (replacing an old one only with
   ``overwrite=True``). A reader therefore sees either nothing, the old store, or the complete
   new one, never a half-written store under the final name.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .._progress import progress_bar
from ..array import BlockCyclicArray, check_dtype
from ..creation import default_grid, normalize_block
from ..grid import ProcessGrid
from ..layout import BlockCyclicLayout

__all__ = [
    "DistributedIOError",
    "resolve_grid",
    "normalize_block",
    "check_dtype_arg",
    "stored",
    "local_batches",
    "local_tiles",
    "as_index",
    "agree",
    "local_path",
    "write_published",
    "progress_bar",
    "BATCH_BYTES",
]

#: Default upper bound (bytes) of one batch of a rank's local matrix that a reader materialises
#: on the host at once (one ``dask.compute`` or one memory-map read per batch).
BATCH_BYTES = 256 * 2**20

_grids_by_backend: dict[str, ProcessGrid] = {}


class DistributedIOError(RuntimeError):
    """A collective I/O call failed on at least one rank; raised on every rank alike.

    The message names the failing ranks and their errors; on a failing rank the original
    exception is chained (``__cause__``).
    """


# -- arguments (identical on every rank, checked before any collective) ----------------------
def resolve_grid(grid: ProcessGrid | None, backend: str | None) -> ProcessGrid:
    """The grid to build on: ``grid``, else the default grid (of ``backend`` when given)."""
    if backend is not None and backend not in ("cpu", "gpu"):
        raise ValueError(f"backend must be 'cpu', 'gpu' or None, got {backend!r}")
    if grid is not None:
        if not isinstance(grid, ProcessGrid):
            raise TypeError(f"grid must be a blasmp_array.ProcessGrid, got {type(grid).__name__}")
        if backend is not None and grid.backend.name != backend:
            raise ValueError(
                f"backend={backend!r} contradicts the grid's backend {grid.backend.name!r}; "
                "pass only one of them"
            )
        return grid
    g = default_grid()
    if backend is None or g.backend.name == backend:
        return g
    if backend not in _grids_by_backend:
        _grids_by_backend[backend] = ProcessGrid(backend=backend)
    return _grids_by_backend[backend]


def check_dtype_arg(dtype: Any, source_dtype: Any, what: str) -> np.dtype:
    """The dtype to store: ``dtype`` if given, else the source's (one of the four BLAS dtypes)."""
    try:
        return check_dtype(source_dtype if dtype is None else dtype)
    except TypeError as exc:
        raise TypeError(f"{what}: {exc}; pass dtype=... to convert") from None


def stored(A: Any, what: str) -> BlockCyclicArray:
    """``A`` as stored (views materialised) with its streams drained, ready to be read."""
    if not isinstance(A, BlockCyclicArray):
        raise TypeError(f"{what} needs a BlockCyclicArray, got {type(A).__name__}")
    A = A.resolve()
    # pending stream work (e.g. an operator's last update) must land before the host reads
    A.grid.backend.synchronize()
    return A


# -- local index sets ------------------------------------------------------------------------
def local_batches(
    layout: BlockCyclicLayout, prow: int, pcol: int, itemsize: int, budget: int
) -> list[tuple[slice, slice]]:
    """Cut the local matrix of ``(prow, pcol)`` into rectangles of whole local blocks whose
    size stays under ``budget`` bytes (at least one block each). Returns local slices."""
    ml, nl = layout.local_shape(prow, pcol)
    if ml == 0 or nl == 0:
        return []
    mb, nb = layout.block
    nbr, nbc = -(-ml // mb), -(-nl // nb)
    per_block = max(1, mb * nb * itemsize)
    col_blocks = max(1, min(nbc, budget // per_block))
    row_blocks = max(1, min(nbr, budget // (per_block * col_blocks)))
    return [
        (
            slice(i * mb, min(ml, (i + row_blocks) * mb)),
            slice(j * nb, min(nl, (j + col_blocks) * nb)),
        )
        for i in range(0, nbr, row_blocks)
        for j in range(0, nbc, col_blocks)
    ]


def local_tiles(layout: BlockCyclicLayout, prow: int, pcol: int) -> Iterator[tuple[slice, ...]]:
    """Blocks of ``(prow, pcol)`` as ``(global rows, global cols, local rows, local cols)``."""
    mb, nb = layout.block
    for bi in layout.local_block_rows(prow):
        for bj in layout.local_block_cols(pcol):
            h, w = layout.block_extent(bi, bj)
            il, jl = layout.local_offset(bi, bj)
            yield (
                slice(bi * mb, bi * mb + h),
                slice(bj * nb, bj * nb + w),
                slice(il, il + h),
                slice(jl, jl + w),
            )


def as_index(idx: np.ndarray) -> slice | np.ndarray:
    """A slice when the ascending global indices ``idx`` are contiguous, else ``idx``."""
    if idx.size and int(idx[-1]) - int(idx[0]) + 1 == idx.size:
        return slice(int(idx[0]), int(idx[-1]) + 1)
    return idx


# -- agreement on errors ---------------------------------------------------------------------
def agree(backend: Any, what: str, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` on this rank, then agree with every rank on whether anyone failed.

    Collective (an all-gather of per-rank error messages, which is also a barrier). Returns
    ``fn()``'s result when no rank failed, else raises :class:`DistributedIOError` on every rank.
    """
    error: BaseException | None = None
    result = None
    try:
        result = fn()
    except Exception as exc:
        error = exc
    messages = backend.allgather(None if error is None else f"{type(error).__name__}: {error}")
    failed = [(r, m) for r, m in enumerate(messages) if m is not None]
    if failed:
        detail = "; ".join(f"rank {r}: {m}" for r, m in failed)
        raise DistributedIOError(f"{what} failed on {len(failed)} rank(s): {detail}") from error
    return result


# -- paths and publication -------------------------------------------------------------------
def local_path(target: Any, what: str) -> Path:
    """A filesystem path from a str / PathLike / ``file://`` URL (zarr store objects are
    resolved to their directory by the zarr writer before calling this)."""
    if isinstance(target, os.PathLike):
        target = os.fspath(target)
    if not isinstance(target, str) or not target:
        raise TypeError(
            f"{what} writes to a filesystem path (str, pathlib.Path or 'file://' URL), "
            f"got {type(target).__name__}"
        )
    if target.startswith("file://"):
        target = target[len("file://") :]
    elif "://" in target:
        raise ValueError(
            f"{what} writes only to a filesystem path that every rank sees (got {target!r}); "
            "remote object stores have no atomic rename to publish a finished store"
        )
    return Path(target).expanduser().absolute()


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _publish(tmp: Path, final: Path, overwrite: bool) -> None:
    """Rank 0: move the finished temporary store to its final name."""
    exists = final.exists() or final.is_symlink()
    if exists and not overwrite:
        raise FileExistsError(f"{final} appeared while writing; pass overwrite=True to replace it")
    if exists and tmp.is_file() and final.is_file():
        os.replace(tmp, final)  # atomic for files
        return
    if exists:
        # move the old store aside, move the new one in, then drop the old one
        trash = final.with_name(f".{final.name}.old-{uuid.uuid4().hex[:12]}")
        os.rename(final, trash)
        os.rename(tmp, final)
        _remove(trash)
        return
    os.rename(tmp, final)


def write_published(
    backend: Any,
    final: Path,
    overwrite: bool,
    what: str,
    create: Callable[[Path], None],
    write: Callable[[Path], None],
) -> None:
    """Collective create (rank 0) / write (all ranks) / publish (rank 0); see module docstring."""
    if not isinstance(overwrite, bool):
        raise TypeError(f"overwrite must be True or False, got {overwrite!r}")
    root = backend.rank == 0
    state: Any = None
    if root:
        state = (
            final.exists() or final.is_symlink(),
            final.parent.is_dir(),
            str(final.with_name(f".{final.name}.tmp-{uuid.uuid4().hex[:12]}")),
        )
    exists, parent_ok, tmp_name = backend.bcast(state, root=0)
    if not parent_ok:
        raise FileNotFoundError(f"{what}: the directory {final.parent} does not exist")
    if exists and not overwrite:
        raise FileExistsError(f"{what}: {final} already exists; pass overwrite=True to replace it")
    tmp = Path(tmp_name)
    agree(backend, f"{what}: creating {tmp}", lambda: create(tmp) if root else None)
    try:
        agree(backend, f"{what}: writing {tmp}", lambda: write(tmp))
    except DistributedIOError:
        agree(backend, f"{what}: removing {tmp}", lambda: _remove(tmp) if root else None)
        raise
    agree(
        backend,
        f"{what}: publishing {final}",
        lambda: _publish(tmp, final, overwrite) if root else None,
    )
