"""The data door of the bench: construction and I/O rows, in GB/s of the matrix.

Each row times one public call with default arguments (only the bench's grid, block and dtype
given), on a matrix of ``m x n`` elements; its rate is ``m n itemsize`` bytes (``8 n^2`` for
float64) over the slowest rank's time:

====================  ==========================================================================
row                   the timed call
====================  ==========================================================================
``random``            ``bm.random.standard_normal((m, n), seed=0, block=, grid=, dtype=)``
``random_uniform``    ``bm.random.uniform((m, n), seed=0, ...)`` (``low=0``, ``high=1``)
``random_random``     ``bm.random.random((m, n), seed=0, ...)``
``from_numpy``        ``bm.from_numpy(h, block=, grid=, root=)`` (``h`` on every rank, or on root)
``to_numpy``          ``A.to_numpy()`` (the matrix on every rank)
``to_numpy_root``     ``A.to_numpy(root=0)`` (``--root`` picks another rank)
``to_zarr``           ``A.to_zarr(path)`` into a fresh path
``from_zarr``         ``bm.from_zarr(path, grid=)`` of a store written by ``A.to_zarr``
``to_dask``           ``A.to_dask().compute()`` on every rank
====================  ==========================================================================

``h`` is the host matrix :func:`source_matrix` (NumPy's ``default_rng(0)`` normals, the same on
every rank) and ``A = bm.from_numpy(h)``, both made outside the timed region. The zarr rows use
a directory that every rank sees (:class:`StoreDir`, the command's ``--dir``); the store a timed
``to_zarr`` writes is removed after the call, outside the timed region (``to_zarr`` refuses an
existing destination). Stores are written to and read from the page cache.

Checks (``--check``) give the same verdict on every rank:

* the random rows: the matrix built again through the public API on another grid (the
  transposed one) with another block must be equal element for element (the seed contract of
  :mod:`blasmp_array.random`), and the sample mean and variance must lie within
  :data:`Z_MAX` standard errors of the distribution's (:func:`sample_statistics`);
* the data moves: exact equality with ``h``, each rank checking what it holds: its local tiles
  through the layout's index maps (``from_numpy``, ``from_zarr``), its gathered copy
  (``to_numpy``, ``to_dask``; ``None`` off the root), or, on rank 0, the store read back with
  zarr itself (``to_zarr``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import blasmp_array as bm

__all__ = [
    "DOOR_OPERATORS",
    "RANDOM_ROWS",
    "STORE_ROWS",
    "Z_MAX",
    "DoorRow",
    "StoreDir",
    "check_row",
    "prepare_row",
    "sample_statistics",
    "source_matrix",
    "store_layout",
]

#: the random rows and the :mod:`blasmp_array.random` function each one times
RANDOM_ROWS = {"random": "standard_normal", "random_uniform": "uniform", "random_random": "random"}
#: every row of the data door, in the order a full run measures them
DOOR_OPERATORS = (
    *RANDOM_ROWS,
    "from_numpy",
    "to_numpy",
    "to_numpy_root",
    "to_zarr",
    "from_zarr",
    "to_dask",
)
#: rows that write zarr stores into the command's directory
STORE_ROWS = ("to_zarr", "from_zarr")
#: seed of the random rows
SEED = 0
#: a random row's sample mean and variance must lie within this many standard errors
Z_MAX = 6.0

_SOURCE: dict[tuple[int, int, str], np.ndarray] = {}


def source_matrix(m: int, n: int, dtype: Any) -> np.ndarray:
    """The host matrix the data rows move: ``default_rng(0).standard_normal((m, n))`` rounded to
    ``dtype`` (complex: real, then imaginary parts). The same on every rank; one kept per
    process, so that the rows of one command generate it once."""
    dt = np.dtype(dtype)
    key = (m, n, dt.str)
    if key not in _SOURCE:
        _SOURCE.clear()
        rng = np.random.default_rng(SEED)
        h = rng.standard_normal((m, n))
        if dt.kind == "c":
            h = h + 1j * rng.standard_normal((m, n))
        _SOURCE[key] = h.astype(dt, copy=False)
    return _SOURCE[key]


@dataclass
class DoorRow:
    """A data row made concrete: the call to time and what its check and peers need."""

    call: Callable[[], Any]
    inputs: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    #: after every call, outside the timed region (collective)
    cleanup: Callable[[], None] | None = None
    #: once, when the row is done (collective)
    close: Callable[[], None] | None = None
    #: the zarr store of the row: ``path`` on every rank; on rank 0 ``layout``
    #: (:func:`store_layout`) once a store exists
    store: dict[str, Any] = field(default_factory=dict)
    directory: Path | None = None


class StoreDir:
    """A fresh directory for the zarr rows, made by rank 0 and seen by every rank. Collective.

    Parameters
    ----------
    backend
        The grid's backend (``rank``, ``bcast``, ``barrier``).
    parent : str, optional
        Where to make it (default: the system's temporary directory of rank 0). It must be on a
        filesystem that every rank sees.
    """

    def __init__(self, backend: Any, parent: str | None = None) -> None:
        self.backend = backend
        made: tuple[str | None, str | None] = (None, None)
        if backend.rank == 0:
            try:
                made = (tempfile.mkdtemp(prefix="blasmp-bench-", dir=parent), None)
            except OSError as exc:
                made = (None, f"{type(exc).__name__}: {exc}")
        path, error = backend.bcast(made, root=0)
        if error is not None:
            raise OSError(
                f"--dir {parent or tempfile.gettempdir()!r}: cannot make the directory of the "
                f"zarr stores ({error}); pass --dir with a writable directory that every rank sees"
            )
        self.path = Path(path)

    def remove(self) -> None:
        """Remove the directory and everything in it (collective: rank 0, after all ranks)."""
        self.backend.barrier()
        if self.backend.rank == 0:
            shutil.rmtree(self.path, ignore_errors=True)


def _remover(backend: Any, path: Path, before: Callable[[], None] | None = None) -> Any:
    """A collective cleanup: every rank done, then rank 0 runs ``before`` and removes ``path``."""

    def remove() -> None:
        backend.barrier()
        if backend.rank == 0:
            if before is not None and path.exists():
                before()
            shutil.rmtree(path, ignore_errors=True)
        backend.barrier()

    return remove


def store_layout(path: str | os.PathLike[str]) -> dict[str, Any]:
    """How a zarr store is cut and encoded, as the keyword arguments that make another store
    like it (``dask.array.to_zarr``, ``zarr.create_array``, ``zarr.create``).

    Returns ``{"kwargs": ..., "unit": (rows, cols), "description": str}``: ``unit`` is the piece
    one writer writes (the shard if the store is sharded, else the chunk).
    """
    import zarr

    z = zarr.open_array(str(path), mode="r")
    chunks = tuple(int(c) for c in z.chunks)
    major = int(zarr.__version__.split(".")[0])
    shards = None
    if major >= 3:
        fmt = int(z.metadata.zarr_format)
        kwargs: dict[str, Any] = {
            "chunks": chunks,
            "compressors": z.compressors,
            "filters": z.filters,
            "fill_value": z.fill_value,
            "zarr_format": fmt,
        }
        if fmt == 3:
            kwargs["serializer"] = z.serializer
            if z.shards is not None:
                shards = tuple(int(s) for s in z.shards)
                kwargs["shards"] = shards
        codecs = [*z.filters, *z.compressors]
    else:  # zarr-python 2
        fmt = 2
        kwargs = {
            "chunks": chunks,
            "compressor": z.compressor,
            "filters": z.filters,
            "fill_value": z.fill_value,
        }
        codecs = [*(z.filters or []), *([z.compressor] if z.compressor is not None else [])]
    names = ", ".join(repr(c) for c in codecs) or "none"
    text = f"zarr format {fmt}, chunks {chunks}"
    if shards is not None:
        text += f", shards {shards}"
    return {"kwargs": kwargs, "unit": shards or chunks, "description": f"{text}, codecs {names}"}


def prepare_row(case: Any, grid: Any, directory: Path | None) -> DoorRow:
    """Build the inputs of data row ``case.op`` on ``grid`` (collective) and the call to time."""
    op, m, n = case.op, case.m, case.n
    dt, blk = np.dtype(case.dtype), case.block
    be = grid.backend
    if op in RANDOM_ROWS:
        fn = getattr(bm.random, RANDOM_ROWS[op])

        def draw() -> Any:
            return fn((m, n), seed=SEED, block=blk, grid=grid, dtype=dt)

        return DoorRow(draw, {}, notes=[f"bm.random.{RANDOM_ROWS[op]}, seed {SEED}"])
    h = source_matrix(m, n, dt)
    if op == "from_numpy":
        root = case.root
        arg = h if root is None or grid.rank == root else None

        def scatter() -> Any:
            return bm.from_numpy(arg, block=blk, grid=grid, root=root)

        return DoorRow(scatter, {"host": h}, notes=[f"root {root}"])
    A = bm.from_numpy(h, block=blk, grid=grid)
    inputs = {"host": h, "A": A}
    if op == "to_numpy":
        return DoorRow(lambda: A.to_numpy(), inputs)
    if op == "to_numpy_root":
        root = 0 if case.root is None else case.root
        return DoorRow(lambda: A.to_numpy(root=root), inputs, notes=[f"root {root}"])
    if op == "to_dask":
        return DoorRow(lambda: A.to_dask().compute(), inputs)
    if directory is None:
        raise ValueError(f"{op}: no directory for the zarr stores (prepare_row(directory=...))")
    row = DoorRow(lambda: None, inputs, directory=directory)
    if op == "to_zarr":
        path = directory / "to_zarr.zarr"

        def record_layout() -> None:  # the first store written: what the peers copy
            if "layout" not in row.store:
                try:
                    row.store["layout"] = store_layout(path)
                except Exception as exc:  # noqa: BLE001 - the peers say why they were skipped
                    row.store["layout_error"] = f"{type(exc).__name__}: {exc}"

        row.call = lambda: A.to_zarr(str(path))
        row.cleanup = _remover(be, path, before=record_layout)
        row.store["path"] = path
        return row
    if op == "from_zarr":
        path = directory / "from_zarr.zarr"
        A.to_zarr(str(path))
        text, error = None, None
        if grid.rank == 0:
            try:
                row.store["layout"] = store_layout(path)
                text = row.store["layout"]["description"]
            except Exception as exc:  # noqa: BLE001 - raised below on every rank
                error = f"{type(exc).__name__}: {exc}"
        text, error = be.bcast((text, error), root=0)
        if error is not None:
            raise RuntimeError(f"from_zarr row: zarr cannot read the store at {path}: {error}")
        row.call = lambda: bm.from_zarr(str(path), grid=grid)
        row.close = _remover(be, path)
        row.store["path"] = path
        row.notes.append(f"store written by A.to_zarr: {text}")
        return row
    raise ValueError(f"{op} is not a data-door row; choose one of {', '.join(DOOR_OPERATORS)}")


# -- checks --------------------------------------------------------------------------------
def sample_statistics(x: np.ndarray, kind: str) -> dict[str, Any]:
    """How far the sample mean and second moment of ``x`` lie from the distribution's, in
    standard errors (z-scores), for ``kind`` ``'normal'`` (standard normal; complex: standard
    complex normal, whose real and imaginary parts are ``N(0, 1/2)``) or ``'uniform'`` (in
    ``[0, 1)``, each part of a complex value).

    For ``N`` samples of a standard normal, ``mean(x)`` has standard error ``1 / sqrt(N)`` and
    ``mean(x^2)`` (expected 1) ``sqrt(2 / N)``; uniform in ``[0, 1)``: ``mean(x)`` (1/2) has
    ``sqrt(1 / (12 N))`` and ``mean((x - 1/2)^2)`` (1/12) ``sqrt(1 / (180 N))``. Also reports
    whether every value lies in the support (finite; ``[0, 1]`` for uniform, 1 included for the
    rounding to float32).
    """
    if kind not in ("normal", "uniform"):
        raise ValueError(f"kind must be 'normal' or 'uniform', got {kind!r}")
    v = np.asarray(x)
    parts = np.concatenate([v.real.ravel(), v.imag.ravel()]) if v.dtype.kind == "c" else v.ravel()
    s = parts.astype(np.float64, copy=False)
    count = s.size
    if count == 0:
        return {"mean_z": 0.0, "moment_z": 0.0, "in_support": True, "samples": 0}
    if kind == "normal":
        scale = np.sqrt(2.0) if v.dtype.kind == "c" else 1.0  # N(0, 1/2) parts -> N(0, 1)
        mean_z = float(s.mean() * scale * np.sqrt(count))
        moment = float(np.dot(s, s)) * scale**2 / count
        moment_z = (moment - 1.0) / float(np.sqrt(2.0 / count))
        in_support = bool(np.isfinite(moment))  # a NaN or an infinity makes the sum so
    else:
        mean = float(s.mean())
        # mean((x - 1/2)^2) = mean(x^2) - mean(x) + 1/4, without an n-sized temporary
        moment = float(np.dot(s, s)) / count - mean + 0.25
        mean_z = (mean - 0.5) / float(np.sqrt(1.0 / (12.0 * count)))
        moment_z = (moment - 1.0 / 12.0) / float(np.sqrt(1.0 / (180.0 * count)))
        in_support = bool(s.min() >= 0.0 and s.max() <= 1.0)
    return {"mean_z": mean_z, "moment_z": moment_z, "in_support": in_support, "samples": count}


def _host(x: Any) -> Any:
    """A NumPy array of ``x`` (a CuPy array is copied to the host)."""
    if x is not None and type(x).__module__.split(".")[0] == "cupy":
        return x.get()
    return x


def _same(x: Any, h: np.ndarray) -> bool:
    x = _host(x)
    return (
        isinstance(x, np.ndarray)
        and x.shape == h.shape
        and x.dtype == h.dtype
        and bool(np.array_equal(x, h))
    )


def _local_tiles_equal(A: Any, h: np.ndarray) -> bool:
    """Whether this rank's local matrix of ``A`` is ``h`` at the layout's global indices."""
    if not isinstance(A, bm.BlockCyclicArray) or A.shape != h.shape or A.dtype != h.dtype:
        return False
    g = A.grid
    rows, cols = A.layout.local_rows(g.myrow), A.layout.local_cols(g.mycol)
    local = g.backend.asnumpy(A.local)
    return bool(np.array_equal(local, h[np.ix_(rows, cols)]))


def _exact(passed: bool, measure: str, note: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {
        "measure": measure,
        "error_eps": 0.0 if passed else float("inf"),
        "bound_eps": 0.0,
        "passed": passed,
    }
    if note:
        out["note"] = note
    return out


def _on_every_rank(be: Any, judge: Callable[[], bool], measure: str) -> dict[str, Any]:
    """Each rank's ``judge()``; the verdict passes where every rank's does (collective)."""
    try:
        ok, why = judge(), ""
    except Exception as exc:  # noqa: BLE001 - reported as a failed check on every rank
        ok, why = False, f"rank {be.rank}: {type(exc).__name__}: {exc}"
    reasons = [r for r in be.allgather(why) if r]
    failed = [r for r, good in enumerate(be.allgather(bool(ok))) if not good]
    note = "; ".join(reasons) or (f"differs on rank(s) {failed}" if failed else "")
    return _exact(not failed, measure, note)


def _on_rank0(be: Any, judge: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    verdict: dict[str, Any] | None = None
    if be.rank == 0:
        try:
            verdict = judge()
        except Exception as exc:  # noqa: BLE001 - reported as a failed check on every rank
            verdict = _exact(False, "error", f"check raised {type(exc).__name__}: {exc}")
    return be.bcast(verdict, root=0)


def _reference_grid(grid: Any) -> Any:
    return bm.ProcessGrid(grid.npcol, grid.nprow, backend=grid.backend.name)


def _reference_block(block: tuple[int, int]) -> tuple[int, int]:
    other = (max(1, block[0] // 2), max(1, block[1] // 2))
    return other if other != tuple(block) else (block[0] + 1, block[1] + 2)


def check_row(case: Any, grid: Any, row: DoorRow, result: Any) -> dict[str, Any]:
    """The verdict of data row ``case.op`` on ``result`` (collective; the same on every rank)."""
    op, be = case.op, grid.backend
    if op in RANDOM_ROWS:
        return _check_random(case, grid, result)
    h = row.inputs["host"]
    if op in ("from_numpy", "from_zarr"):
        return _on_every_rank(be, lambda: _local_tiles_equal(result, h), "exact equality")
    if op in ("to_numpy", "to_dask"):
        return _on_every_rank(be, lambda: _same(result, h), "exact equality")
    if op == "to_numpy_root":
        root = 0 if case.root is None else case.root

        def judge() -> bool:
            return _same(result, h) if grid.rank == root else result is None

        return _on_every_rank(be, judge, "exact equality on the root, None elsewhere")
    if op == "to_zarr":
        import zarr

        path = row.store["path"]

        def read_back() -> dict[str, Any]:
            stored = zarr.open_array(str(path), mode="r")[...]
            return _exact(_same(stored, h), "exact equality (the store read back with zarr)")

        return _on_rank0(be, read_back)
    raise ValueError(f"{op} is not a data-door row")


def _check_random(case: Any, grid: Any, result: Any) -> dict[str, Any]:
    name = RANDOM_ROWS[case.op]
    fn = getattr(bm.random, name)
    shape, dt = (case.m, case.n), np.dtype(case.dtype)
    block = _reference_block(tuple(case.block))
    with _reference_grid(grid) as ref_grid:
        ref = fn(shape, seed=SEED, block=block, grid=ref_grid, dtype=dt)
        want = ref.to_numpy(root=0)
    got = result.to_numpy(root=0) if isinstance(result, bm.BlockCyclicArray) else None
    where = f"grid {ref_grid.nprow}x{ref_grid.npcol}, block {block}"

    def judge() -> dict[str, Any]:
        if got is None:
            return _exact(False, "error", f"bm.random.{name} returned {type(result).__name__}")
        same = _same(got, want)
        stats = sample_statistics(got, "normal" if name == "standard_normal" else "uniform")
        fits = stats["in_support"] and max(abs(stats["mean_z"]), abs(stats["moment_z"])) <= Z_MAX
        notes = []
        if not same:
            notes.append(f"differs from the same seed on {where}")
        if not fits:
            notes.append(f"statistics off: {stats}")
        verdict = _exact(
            same and fits,
            f"exact equality with {where}; mean and 2nd moment within {Z_MAX:g} std errors",
            "; ".join(notes),
        )
        verdict["stats"] = stats
        return verdict

    return _on_rank0(grid.backend, judge)
