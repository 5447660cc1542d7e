"""Shared pieces of the I/O module: argument checks, agreement on errors across ranks, the
create-write-publish protocol of the parallel writers, host threads and progress bars.

Errors
------
Every collective I/O call raises the same exception on every rank. Problems one rank can see
for all (a missing path, a store of the wrong shape or dtype, a directory without write
permission) are found by rank 0 before any data moves and raised on every rank with their own
type (:func:`on_root`: ``FileNotFoundError``, ``PermissionError``, ``ValueError``, ...).
Failures while the ranks move data (a chunk missing or corrupt, a disk full) are gathered from
every rank and raised everywhere as :class:`DistributedIOError`, naming the failing ranks and
their errors (:func:`agree`).

Publishing protocol (``to_zarr``, ``to_npy``, ``to_hdf5``)
---------------------------------------------------------
1. Every rank validates its arguments; rank 0 checks the destination (exists? replaceable? its
   directory exists and is writable?) and picks a temporary sibling name
   ``.<name>.tmp-<random>`` (same directory, so the final rename stays on one filesystem and is
   atomic); both are broadcast and every rank raises the same error if one is found.
2. Rank 0 creates the empty store under the temporary name (header / metadata).
3. Every rank writes its own part into it (no two ranks write the same chunk or element).
4. The ranks agree on errors (an all-gather of per-rank error messages). On any error the
   temporary store is removed and every rank raises :class:`DistributedIOError`; otherwise
   rank 0 finishes the store (e.g. marks a zarr store complete) and renames it to the final
   name (replacing an old one only with ``overwrite=True``). A reader therefore sees either
   nothing, the old store, or the complete new one, never a half-written store under the final
   name.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .._progress import progress_bar
from ..array import BlockCyclicArray, check_array_dtype
from ..backends._staging import copy_threads
from ..creation import default_grid, normalize_block
from ..grid import ProcessGrid

__all__ = [
    "DistributedIOError",
    "resolve_grid",
    "normalize_block",
    "check_dtype_arg",
    "check_flag",
    "stored",
    "agree",
    "on_root",
    "local_path",
    "write_published",
    "host_threads",
    "progress_bar",
    "BATCH_BYTES",
]

#: Default upper bound (bytes) of one batch of a rank's local matrix that ``from_dask``
#: materialises on the host at once (one ``dask.compute`` per batch).
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
    """The dtype to store: ``dtype`` if given, else the source's (a dtype an array holds: the
    four BLAS dtypes, int32, int64, bool)."""
    try:
        return check_array_dtype(source_dtype if dtype is None else dtype)
    except TypeError as exc:
        raise TypeError(f"{what}: {exc}; pass dtype=... to convert") from None


def check_flag(value: Any, name: str) -> bool:
    """``value`` if it is True or False, else a TypeError naming the argument."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def stored(A: Any, what: str) -> BlockCyclicArray:
    """``A`` as stored (views materialised) with its streams drained, ready to be read."""
    if not isinstance(A, BlockCyclicArray):
        raise TypeError(f"{what} needs a BlockCyclicArray, got {type(A).__name__}")
    A = A.resolve()
    # pending stream work (e.g. an operator's last update) must land before the host reads
    A.grid.backend.synchronize()
    return A


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


#: Exception types that :func:`on_root` raises as themselves on every rank (a subclass, e.g.
#: zarr's ``ArrayNotFoundError``, is raised as the first of these it derives from).
_PORTABLE: tuple[type[Exception], ...] = (
    FileNotFoundError,
    FileExistsError,
    PermissionError,
    IsADirectoryError,
    NotADirectoryError,
    KeyError,
    TypeError,
    ValueError,
    ImportError,
)


def on_root(backend: Any, what: str, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` on rank 0 only and return its (broadcast) result on every rank.

    Collective (one broadcast). When ``fn`` raises, every rank raises an exception of the same
    type -- the first of ``FileNotFoundError``, ``FileExistsError``, ``PermissionError``,
    ``IsADirectoryError``, ``NotADirectoryError``, ``KeyError``, ``TypeError``, ``ValueError``,
    ``ImportError`` that the error derives from, else :class:`DistributedIOError` -- with the
    message ``"<what>: <error>"`` (chained to the original on rank 0).
    """
    payload: Any = None
    error: Exception | None = None
    if backend.rank == 0:
        try:
            payload = ("ok", fn())
        except Exception as exc:
            error = exc
            kind = next((t.__name__ for t in _PORTABLE if isinstance(exc, t)), "")
            text = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
            payload = ("error", kind, f"{what}: {text}")
    payload = backend.bcast(payload, root=0)
    if payload[0] == "ok":
        return payload[1]
    _, kind, message = payload
    types = {t.__name__: t for t in _PORTABLE}
    raise types.get(kind, DistributedIOError)(message) from error


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


def _destination_problem(
    final: Path, overwrite: bool, replaceable: Callable[[Path], str | None]
) -> tuple[str, str] | None:
    """Rank 0: ``(exception type, message)`` of what forbids writing ``final``, or None."""
    parent = final.parent
    if not parent.is_dir():
        return "FileNotFoundError", f"the directory {parent} does not exist"
    if not os.access(parent, os.W_OK | os.X_OK):
        return "PermissionError", f"no permission to create files in {parent}"
    if final.exists() or final.is_symlink():
        if not overwrite:
            return "FileExistsError", f"{final} already exists; pass overwrite=True to replace it"
        reason = replaceable(final)
        if reason is not None:
            return "FileExistsError", f"{final} {reason}; refusing to replace it"
    return None


def write_published(
    backend: Any,
    final: Path,
    overwrite: bool,
    what: str,
    create: Callable[[Path], None],
    write: Callable[[Path], None],
    *,
    replaceable: Callable[[Path], str | None] = lambda path: None,
    finish: Callable[[Path], None] = lambda path: None,
) -> None:
    """Collective create (rank 0) / write (all ranks) / finish and publish (rank 0).

    See the module docstring. ``replaceable(final)`` (rank 0, with ``overwrite=True``) returns
    why an existing ``final`` must not be replaced (e.g. a directory that is not a zarr store),
    or None. ``finish(tmp)`` runs on rank 0 once every rank has written without error, before
    the rename.
    """
    check_flag(overwrite, "overwrite")
    root = backend.rank == 0
    state: Any = None
    if root:
        state = (
            _destination_problem(final, overwrite, replaceable),
            str(final.with_name(f".{final.name}.tmp-{uuid.uuid4().hex[:12]}")),
        )
    problem, tmp_name = backend.bcast(state, root=0)
    if problem is not None:
        kind, message = problem
        raise {
            "FileNotFoundError": FileNotFoundError,
            "PermissionError": PermissionError,
            "FileExistsError": FileExistsError,
        }[kind](f"{what}: {message}")
    tmp = Path(tmp_name)
    try:
        agree(backend, f"{what}: creating {tmp}", lambda: create(tmp) if root else None)
        agree(backend, f"{what}: writing {tmp}", lambda: write(tmp))
        agree(backend, f"{what}: finishing {tmp}", lambda: finish(tmp) if root else None)
    except DistributedIOError:
        agree(backend, f"{what}: removing {tmp}", lambda: _remove(tmp) if root else None)
        raise
    agree(
        backend,
        f"{what}: publishing {final}",
        lambda: _publish(tmp, final, overwrite) if root else None,
    )


# -- host threads ----------------------------------------------------------------------------
def host_threads(backend: Any) -> int:
    """Threads a rank may use for host copies: the backends' rule
    (:func:`backends._staging.copy_threads`: the cores it may run on, shared with the other
    ranks of its node unless it is bound to its own, at most 8)."""
    return copy_threads(backend.ranks_on_node)
