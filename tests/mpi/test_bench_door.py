"""The bench's data-door rows in one process per rank (``blasmp_array/bench/door.py`` and
``door_peers.py``): each row's check passes on the right result and fails, identically on every
rank, on a wrong one; the peers of each row are measured (or say why not) in GB/s.

Runs on the backend of ``BLASMP_BACKEND``; on the GPU node (``tools/gpu-node-test.sh``) the
rows run on the GPU backend and the ``gpu`` tests also require the CuPy peers to be measured.
"""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pytest

import blasmp_array as bm
from blasmp_array.backends import gpu_available
from blasmp_array.bench.door import DOOR_OPERATORS, RANDOM_ROWS, StoreDir
from blasmp_array.bench.door_peers import PEERS, measure_door_peers
from blasmp_array.bench.operators import Case, check_result, prepare

BACKEND = os.environ.get("BLASMP_BACKEND", "cpu")
ON_GPU = BACKEND == "gpu" and gpu_available()
gpu = pytest.mark.skipif(not ON_GPU, reason="needs BLASMP_BACKEND=gpu and a usable GPU")
#: ragged blocks on every grid: 37 x 29 in 8 x 5 blocks
BASE = Case("random", 37, 29, 0, block=(8, 5), backend=BACKEND)
CASES = [replace(BASE, op=op) for op in DOOR_OPERATORS] + [
    replace(BASE, op=op, dtype=dt) for op in RANDOM_ROWS for dt in ("float32", "complex128")
]
COPY_ROWS = (*RANDOM_ROWS, "from_numpy", "to_numpy", "to_numpy_root")


@pytest.fixture(scope="module")
def stores():
    backend = bm.ProcessGrid(backend=BACKEND).backend
    made = StoreDir(backend)
    yield made.path
    made.remove()


def _label(case: Case) -> str:
    return f"{case.op}-{case.dtype}"


def _same_everywhere(comm, verdict: dict) -> None:
    assert all(v == verdict["passed"] for v in comm.allgather(verdict["passed"]))


def _run(case: Case, stores):
    p = prepare(case, stores)
    p.run()
    p.grid.backend.synchronize()
    return p


def _finish(p) -> None:
    if p.cleanup is not None:
        p.cleanup()
    if p.close is not None:
        p.close()


@pytest.mark.parametrize("case", CASES, ids=_label)
def test_row_passes_its_check(comm, stores, case):
    p = _run(case, stores)
    verdict = check_result(p)
    _same_everywhere(comm, verdict)
    assert verdict["passed"], verdict
    if case.op in RANDOM_ROWS:
        stats = verdict["stats"]
        assert stats["samples"] == case.m * case.n * (2 if "complex" in case.dtype else 1)
    _finish(p)


def _spoil(p, stores) -> None:
    """Change one element of what the row produced (on one rank, or in the store)."""
    op, g = p.case.op, p.grid
    if op == "to_zarr":
        if g.rank == 0:
            import zarr

            z = zarr.open_array(str(p.door.store["path"]), mode="r+")
            z[0, 0] = z[0, 0] + 1
        g.backend.barrier()
    elif isinstance(p.result, bm.BlockCyclicArray):
        if g.rank == 0:  # process (0, 0) holds element (0, 0) at local (0, 0)
            p.result.local[0, 0] += 1
    elif op == "to_numpy_root":
        if g.rank == 0:
            p.result[-1, -1] += 1
    elif g.rank == g.size - 1:  # to_numpy, to_dask: one rank's copy is wrong
        p.result[-1, -1] += 1


@pytest.mark.parametrize("op", DOOR_OPERATORS)
def test_row_check_fails_on_a_wrong_result(comm, stores, op):
    p = _run(replace(BASE, op=op), stores)
    _spoil(p, stores)
    verdict = check_result(p)
    _same_everywhere(comm, verdict)
    assert not verdict["passed"], verdict
    _finish(p)


def test_random_check_rejects_a_wrong_distribution(comm, stores, monkeypatch):
    """Grid-independent values with the wrong variance pass the cross-grid comparison but fail
    the statistics (E x^2 = 2.25: some 29 standard errors off at 37 x 29)."""
    normal = bm.random.standard_normal

    def too_wide(*args, **kwargs):
        return normal(*args, **kwargs) * 1.5

    monkeypatch.setattr(bm.random, "standard_normal", too_wide)
    p = _run(BASE, stores)
    verdict = check_result(p)
    _same_everywhere(comm, verdict)
    assert not verdict["passed"]
    assert verdict["stats"]["moment_z"] > 6 and "statistics off" in verdict["note"]


def _peers(case: Case, stores, which=("numpy", "dask", "zarr", "cupy")) -> list[dict]:
    p = _run(case, stores)
    if p.cleanup is not None:
        p.cleanup()  # the store our to_zarr wrote: its layout is what the peers copy
    entries = measure_door_peers(p, p.door, threads=1, warmup=0, repeat=1, which=which)
    if p.close is not None:
        p.close()
    return entries


@pytest.mark.parametrize("op", DOOR_OPERATORS)
def test_peers_measured_or_skipped_with_the_reason(comm, stores, op):
    entries = _peers(replace(BASE, op=op), stores)
    assert comm.allgather(entries) == [entries] * comm.Get_size()
    libraries = [e["library"] for e in entries]
    expected = [{"dask": "dask.array"}.get(lib, lib) for lib in PEERS[op]]
    if op == "to_dask":
        expected.append("blasmp_array to_numpy()")
    assert libraries == expected
    nbytes = BASE.m * BASE.n * 8
    for e in entries:
        if e["library"] == "cupy" and not ON_GPU:
            assert e["median_s"] is None and "skipped" in e["note"], e
            continue
        assert e["median_s"] > 0, e
        assert e["gbytes_per_s"] == pytest.approx(nbytes / e["median_s"] / 1e9)


def test_peer_files_are_removed(comm, stores):
    _peers(replace(BASE, op="to_zarr"), stores)
    _peers(replace(BASE, op="from_zarr"), stores)
    comm.Barrier()
    assert sorted(os.listdir(stores)) == []


def test_complex_random_has_no_generator_peer(stores):
    (entry, *_) = _peers(replace(BASE, dtype="complex128"), stores, which=("numpy",))
    assert entry["median_s"] is None and "real values only" in entry["note"]


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("op", COPY_ROWS)
def test_gpu_rows_against_cupy(comm, stores, op):
    case = replace(BASE, op=op, backend="gpu")
    p = _run(case, stores)
    verdict = check_result(p)
    assert verdict["passed"], verdict
    _finish(p)
    (entry,) = _peers(case, stores, which=("cupy",))
    assert entry["library"] == "cupy" and entry["median_s"] > 0, entry
    assert np.isfinite(entry["gbytes_per_s"])
