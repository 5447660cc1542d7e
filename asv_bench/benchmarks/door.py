"""The data door: random construction, NumPy in and out, zarr and Dask (the bench's data rows,
``blasmp_array/bench/door.py``), in GB/s of the matrix, and each row's speed against its peer
measured in the same run (``--compare``).

One bench command per rank count and backend runs every row (``setup_cache``, so that a rank
count costs one ``mpiexec`` launch); the ``track_*`` methods report what it measured. Parameters:
row, ranks, backend (GPU cases are skipped without a usable GPU). Environment variables as
:mod:`.distributed` (``BLASMP_ASV_N``, ``BLASMP_ASV_REPEAT``, ``BLASMP_ASV_RANKS``).

The peers (``track_speed_vs_peer``: our rate over the peer's, > 1 when we are faster): NumPy's
``default_rng`` and ``h.copy()`` on the CPU backend, ``cupy.random``, ``cupy.asarray`` and
``cupy.asnumpy`` on the GPU backend; Dask's ``to_zarr`` and ``from_zarr().compute()`` with the
codecs of our store; our own ``A.to_numpy()`` for ``to_dask().compute()``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from .distributed import BACKENDS, RANKS, REPEAT, N, _gpu_usable, _mpiexec

ROWS = [
    "random",
    "random_uniform",
    "random_random",
    "from_numpy",
    "to_numpy",
    "to_numpy_root",
    "to_zarr",
    "from_zarr",
    "to_dask",
]
_COPY_PEER = {"cpu": "numpy", "gpu": "cupy"}
#: the peer each row is compared with, by backend (library names of the bench's records)
PEER = {
    backend: {
        **{row: _COPY_PEER[backend] for row in ROWS[:6]},
        "to_zarr": "dask.array",
        "from_zarr": "dask.array",
        "to_dask": "blasmp_array to_numpy()",
    }
    for backend in BACKENDS
}


def run_rows(ranks: int, backend: str) -> dict:
    """Every data row under ``mpiexec -n ranks``, with its peers: the records by row name."""
    launcher = _mpiexec()
    if launcher is None:
        raise RuntimeError("no mpiexec found")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        cmd = [
            launcher,
            "-n",
            str(ranks),
            sys.executable,
            "-m",
            "blasmp_array.bench",
            ",".join(ROWS),
            "--n",
            str(N),
            "--backend",
            backend,
            "--profile",
            "--compare",
            "--baselines",
            "numpy,dask,zarr,cupy",
            "--repeat",
            str(REPEAT),
            "--warmup",
            "1",
            "--dir",
            tmp,
            "--json",
            str(out),
            "--quiet",
        ]
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
        return {r["op"]: r for r in json.loads(out.read_text())["results"]}


def _peer_rate(record: dict, peer: str) -> float | None:
    for b in record["compare"] or []:
        if b["library"] == peer and b.get("gbytes_per_s"):
            return b["gbytes_per_s"]
    return None


class _Door:
    """Every row's record, measured once per rank count and backend (the subclasses share this
    ``setup_cache``: asv runs one cache per definition)."""

    params = (ROWS, RANKS, BACKENDS)
    param_names = ["row", "ranks", "backend"]
    timeout = 1800
    number = 1
    repeat = 1

    def setup_cache(self):
        measured = {}
        for backend in BACKENDS:
            if backend == "gpu" and not _gpu_usable():
                continue
            for ranks in RANKS:
                measured[(ranks, backend)] = run_rows(ranks, backend)
        return measured

    setup_cache.timeout = 3600

    def setup(self, measured, row, ranks, backend):
        if (ranks, backend) not in measured:
            raise NotImplementedError("no usable GPU: GPU benchmark skipped")


class DoorRate(_Door):
    """GB/s of the matrix (the median over repeats of the slowest rank's time)."""

    def track_gbytes_per_s(self, measured, row, ranks, backend):
        return measured[(ranks, backend)][row]["profile"]["gbytes_per_s"]

    track_gbytes_per_s.unit = "GB/s"


class DoorSpeedVsPeer(_Door):
    """Our rate over the peer's of the same run (> 1: faster than the peer)."""

    def setup(self, measured, row, ranks, backend):
        super().setup(measured, row, ranks, backend)
        peer = PEER[backend][row]
        if _peer_rate(measured[(ranks, backend)][row], peer) is None:
            raise NotImplementedError(f"{row}: the peer {peer} was not measured")

    def track_speed_vs_peer(self, measured, row, ranks, backend):
        record = measured[(ranks, backend)][row]
        return record["profile"]["gbytes_per_s"] / _peer_rate(record, PEER[backend][row])

    track_speed_vs_peer.unit = "x peer"
