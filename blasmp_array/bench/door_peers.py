"""The peers of the data-door rows (``--compare``): what a user of NumPy, CuPy, Dask or zarr
writes for the same move of the same matrix, measured in the same run, in GB/s of the matrix.

The single-process peers run on rank 0 while the other ranks wait in a sleeping barrier (as the
baselines of :mod:`.compare`); ``--baselines`` picks among them:

==================  =============================  ============================================
row                 baseline                       the timed call
==================  =============================  ============================================
random rows         ``numpy`` (one thread)         ``np.random.default_rng(0).standard_normal``
                                                   (``uniform``, ``random``) of ``(m, n)``
                    ``cupy`` (one GPU)             ``cupy.random.standard_normal`` (``uniform``,
                                                   ``random``)
``from_numpy``      ``numpy``                      ``h.copy()``
                    ``cupy``                       ``cupy.asarray(h)``
``to_numpy(_root)`` ``numpy``                      ``h.copy()``
                    ``cupy``                       ``cupy.asnumpy(a)``
``to_zarr``         ``dask`` (``threads`` workers)  ``da.from_array(h, chunks=).to_zarr(path,
                                                   **codecs)``
                    ``zarr``                       ``zarr.create_array(path, ...)[...] = h``
``from_zarr``       ``dask``                       ``da.from_zarr(path).compute()``
                    ``zarr``                       ``zarr.open_array(path)[...]``
``to_dask``         ``numpy``                      ``h.copy()``
                    ``dask``                       ``da.from_array(h, chunks=block).compute()``
==================  =============================  ============================================

``threads`` is ``--compare-threads`` (default: the number of ranks). The zarr peers write and read
with the chunks (and shards) and codecs of the store our ``to_zarr`` wrote, read from its
metadata (:func:`.door.store_layout`), so that both sides encode the same bytes; Dask's chunks
are that store's write unit. Stores the peers write are removed after each call, outside the
timed region. zarr runs its codecs on its own thread pool, which the bench leaves as zarr
configures it, for our calls as for the peers' (a note names ``threading.max_workers`` when it is
set): ``threads`` bounds Dask's workers, not zarr's pool.

The ``to_dask`` row also times ``A.to_numpy()`` on every rank in the same run (library
``blasmp_array to_numpy()``), the move that ``to_dask().compute()`` amounts to.

Every peer makes at least one untimed call before its timed ones (``max(warmup, 1)``), as our
call makes the bench's first, untimed call: a cold first call (cuRAND's set-up, kernel loads,
imports) is never timed on either side.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .compare import _cupy_usable, _entry, _installed, quiet_barrier
from .door import RANDOM_ROWS, SEED, DoorRow
from .timing import time_collective

__all__ = ["PEERS", "measure_door_peers"]

_COPIES = ("numpy", "cupy")
#: the peer libraries of each row (``--baselines`` names)
PEERS: dict[str, tuple[str, ...]] = {
    **{op: _COPIES for op in RANDOM_ROWS},
    "from_numpy": _COPIES,
    "to_numpy": _COPIES,
    "to_numpy_root": _COPIES,
    "to_zarr": ("dask", "zarr"),
    "from_zarr": ("dask", "zarr"),
    "to_dask": ("numpy", "dask"),
}


@dataclass
class _Peer:
    library: str
    call: Callable[[], Any]
    note: str
    threads: int | None = None
    sync: Callable[[], None] = lambda: None
    #: after each call, outside the timed region
    cleanup: Callable[[], None] = lambda: None
    #: makes the context the peer is timed in (e.g. Dask's scheduler settings)
    context: Callable[[], Any] | None = None


def measure_door_peers(
    p: Any,
    row: DoorRow,
    threads: int,
    warmup: int,
    repeat: int,
    which: tuple[str, ...],
) -> list[dict[str, Any]]:
    """The peers of data row ``p.case.op`` (collective): the same list on every rank."""
    grid, case = p.grid, p.case
    nbytes = float(case.m * case.n * np.dtype(case.dtype).itemsize)
    comm = grid.comm
    warmup = max(warmup, 1)
    results: list[dict[str, Any]] | None = None
    if comm.Get_rank() == 0:
        results = _measure_rank0(case, row, threads, warmup, repeat, which, nbytes)
    quiet_barrier(comm)
    results = comm.bcast(results, root=0)
    assert results is not None
    if case.op == "to_dask":
        A = row.inputs["A"]
        prof = time_collective(A.to_numpy, grid.backend, warmup, repeat)
        results.append(
            _entry(
                "blasmp_array to_numpy()",
                note="A.to_numpy() on every rank, same run",
                **_rates(prof["times_s"], nbytes),
            )
        )
    return results


def _rates(times: list[float], nbytes: float) -> dict[str, Any]:
    med = float(np.median(times))
    return {
        "median_s": med,
        "min_s": float(min(times)),
        "max_s": float(max(times)),
        "gbytes_per_s": nbytes / med / 1e9 if med > 0 else None,
    }


def _measure_rank0(
    case: Any,
    row: DoorRow,
    threads: int,
    warmup: int,
    repeat: int,
    which: tuple[str, ...],
    nbytes: float,
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    makers = {"numpy": _numpy_peers, "cupy": _cupy_peers, "dask": _dask_peers, "zarr": _zarr_peers}
    for library in PEERS[case.op]:
        if library not in which:
            continue
        make = makers[library]
        try:
            peers = make(case, row, threads)
        except _Skip as skip:
            out.append(_entry(skip.library or library, note=f"{skip}; skipped"))
            continue
        except Exception as exc:  # noqa: BLE001 - reported, never faked
            out.append(_entry(library, note=f"set-up failed: {type(exc).__name__}: {exc}"))
            continue
        for peer in peers:
            out.append(_measure(peer, warmup, repeat, nbytes))
        if library == "cupy" and peers:
            _free_cupy_pool()
    return out


class _Skip(Exception):
    """A peer that cannot run here (not installed, no GPU, no call for this dtype)."""

    def __init__(self, why: str, library: str | None = None) -> None:
        super().__init__(why)
        self.library = library


def _measure(peer: _Peer, warmup: int, repeat: int, nbytes: float) -> dict[str, Any]:
    try:
        if peer.context is not None:
            with peer.context():
                times = _timed(peer, warmup, repeat)
        else:
            times = _timed(peer, warmup, repeat)
    except Exception as exc:  # noqa: BLE001 - reported, never faked
        return _entry(peer.library, note=f"{peer.note}; failed: {type(exc).__name__}: {exc}")
    return _entry(peer.library, threads=peer.threads, note=peer.note, **_rates(times, nbytes))


def _timed(peer: _Peer, warmup: int, repeat: int) -> list[float]:
    """Time the peer's calls; its result is dropped and its cleanup runs after the clock stops
    (as for our calls: freeing a matrix is not timed on either side)."""
    times: list[float] = []
    for _ in range(warmup + repeat):
        t0 = time.perf_counter()
        out = peer.call()
        peer.sync()
        times.append(time.perf_counter() - t0)
        del out
        peer.cleanup()
    return times[warmup:]


def _remove(path: Path) -> Callable[[], None]:
    return lambda: shutil.rmtree(path, ignore_errors=True)


# -- the peers, by library -----------------------------------------------------------------
def _numpy_peers(case: Any, row: DoorRow, threads: int) -> list[_Peer]:
    op, shape, dt = case.op, (case.m, case.n), np.dtype(case.dtype)
    if op in RANDOM_ROWS:
        name = RANDOM_ROWS[op]
        if dt.kind == "c":
            raise _Skip(f"{op}: NumPy's generators draw real values only")

        def draw() -> Any:
            rng = np.random.default_rng(SEED)
            if name == "standard_normal":
                return rng.standard_normal(shape, dtype=dt)
            if name == "random":
                return rng.random(shape, dtype=dt)
            return rng.uniform(0.0, 1.0, shape).astype(dt, copy=False)

        return [_Peer("numpy", draw, f"np.random.default_rng({SEED}).{name}, one thread", 1)]
    h = row.inputs["host"]
    return [_Peer("numpy", h.copy, "h.copy(), one thread", 1)]


def _cupy_peers(case: Any, row: DoorRow, threads: int) -> list[_Peer]:
    op, shape, dt = case.op, (case.m, case.n), np.dtype(case.dtype)
    why = _cupy_usable()
    if why is not None:
        raise _Skip(why)
    import cupy as cp

    def sync() -> None:
        cp.cuda.get_current_stream().synchronize()

    if op in RANDOM_ROWS:
        name = RANDOM_ROWS[op]
        if dt.kind == "c":
            raise _Skip(f"{op}: cupy.random draws real values only")
        fn = getattr(cp.random, name)
        return [_Peer("cupy", lambda: fn(size=shape, dtype=dt), f"cupy.random.{name}", sync=sync)]
    h = row.inputs["host"]
    if op == "from_numpy":
        return [_Peer("cupy", lambda: cp.asarray(h), "cupy.asarray(h), one GPU", sync=sync)]
    a = cp.asarray(h)
    return [_Peer("cupy", lambda: cp.asnumpy(a), "cupy.asnumpy(a), one GPU", sync=sync)]


def _free_cupy_pool() -> None:
    import cupy as cp

    cp.get_default_memory_pool().free_all_blocks()


def _store_kwargs(row: DoorRow) -> dict[str, Any]:
    """The layout our store was written with (rank 0 read it; see :func:`.door.store_layout`)."""
    layout = row.store.get("layout")
    if layout is None:
        why = row.store.get("layout_error", "no store of ours was read")
        raise _Skip(f"the codecs of our store are unknown ({why})")
    return layout


def _zarr_threads() -> str:
    """zarr's codec thread pool, when configured (else zarr's default: said in the docs)."""
    import zarr

    workers = zarr.config.get("threading.max_workers", None)
    return "" if workers is None else f"; zarr threading.max_workers {workers}"


def _dask_peers(case: Any, row: DoorRow, threads: int) -> list[_Peer]:
    op = case.op
    if not _installed("dask"):
        raise _Skip("not installed", "dask.array")
    import dask
    import dask.array as da

    def context() -> Any:
        return dask.config.set(scheduler="threads", num_workers=threads)

    h = row.inputs["host"]
    if op == "to_dask":
        chunks = tuple(case.block)
        return [
            _Peer(
                "dask.array",
                lambda: da.from_array(h, chunks=chunks).compute(),
                f"da.from_array(h, chunks={chunks}).compute(), threaded scheduler",
                threads,
                context=context,
            )
        ]
    layout = _store_kwargs(row)
    note = f"threaded scheduler; chunks and codecs of our store{_zarr_threads()}"
    if op == "to_zarr":
        assert row.directory is not None
        path = row.directory / "peer-dask.zarr"
        unit, kwargs = layout["unit"], layout["kwargs"]

        def write() -> None:
            da.from_array(h, chunks=unit).to_zarr(str(path), **kwargs)

        text = f"da.from_array(h, chunks={unit}).to_zarr(path, ...); {note}"
        return [_Peer("dask.array", write, text, threads, cleanup=_remove(path), context=context)]
    src = str(row.store["path"])
    return [
        _Peer(
            "dask.array",
            lambda: da.from_zarr(src).compute(),
            f"da.from_zarr(path).compute(); {note}",
            threads,
            context=context,
        )
    ]


def _zarr_peers(case: Any, row: DoorRow, threads: int) -> list[_Peer]:
    op = case.op
    if not _installed("zarr"):
        raise _Skip("not installed")
    import zarr

    layout = _store_kwargs(row)
    note = f"chunks and codecs of our store{_zarr_threads()}"
    if op == "from_zarr":
        src = str(row.store["path"])
        return [_Peer("zarr", lambda: zarr.open_array(src, mode="r")[...], f"z[...]; {note}")]
    assert row.directory is not None
    h, path, kwargs = row.inputs["host"], row.directory / "peer-zarr.zarr", layout["kwargs"]

    def write() -> None:
        if int(zarr.__version__.split(".")[0]) >= 3:
            z = zarr.create_array(store=str(path), shape=h.shape, dtype=h.dtype, **kwargs)
        else:
            z = zarr.create(store=str(path), shape=h.shape, dtype=h.dtype, **kwargs)
        z[...] = h

    return [_Peer("zarr", write, f"z[...] = h, a new array; {note}", cleanup=_remove(path))]
