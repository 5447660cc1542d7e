"""Per-stage times of the distributed SVD's routes (run under mpiexec; rank 0 prints).

    mpiexec -n 2 python docs/_scripts/svd_stages.py N BLOCK [REPEATS]

Square ``N x N`` float64, the most square grid of the ranks. The band route (``method='band'``):
stage 1 (the reduction to band form), the gather of ``B`` on rank 0, LAPACK's SVD of ``B``
there, the scatter of ``U_B``/``V_B``, the back-transform; the gather route (``'gather'``): the
gather of ``A``, LAPACK's SVD, the scatter; and both whole calls. Medians of REPEATS (3).
"""

from __future__ import annotations

import sys
import time

import numpy as np
from mpi4py import MPI

import blasmp_array as bm
from blasmp_array.ops.lapack import _bidiag_reduction as bd
from blasmp_array.ops.lapack.svd import svd

comm = MPI.COMM_WORLD
n, b = int(sys.argv[1]), int(sys.argv[2])
reps = int(sys.argv[3]) if len(sys.argv) > 3 else 3
grid = bm.ProcessGrid(*bm.square_grid_shape(comm.size))
A = bm.random.standard_normal((n, n), block=b, grid=grid, seed=0)
root = comm.rank == 0


def clock() -> float:
    comm.Barrier()
    return time.perf_counter()


def band_stages() -> list[float]:
    t = [clock()]
    red = bd.reduce_to_band(A)
    t.append(clock())
    band = red.band.to_numpy(root=0)
    t.append(clock())
    ub = vb = None
    if root:
        ub, _, vhb = np.linalg.svd(band)
        vb = np.ascontiguousarray(vhb.conj().T)
    t.append(clock())
    u = bm.from_numpy(ub, block=b, grid=grid, root=0, dtype=A.dtype)
    v = bm.from_numpy(vb, block=b, grid=grid, root=0, dtype=A.dtype)
    t.append(clock())
    bd.apply_left(red, u)
    bd.apply_right(red, v)
    t.append(clock())
    return list(np.diff(t))


def gather_stages() -> list[float]:
    t = [clock()]
    host = A.to_numpy(root=0)
    t.append(clock())
    u = vh = None
    if root:
        u, _, vh = np.linalg.svd(host)
    t.append(clock())
    bm.from_numpy(u, block=b, grid=grid, root=0, dtype=A.dtype)
    bm.from_numpy(vh, block=b, grid=grid, root=0, dtype=A.dtype)
    t.append(clock())
    return list(np.diff(t))


def whole(**kw) -> float:
    t0 = clock()
    svd(A, **kw)
    return clock() - t0


rows = {
    "band: stage 1, gather B, host SVD, scatter, back-transform": band_stages,
    "gather: gather A, host SVD, scatter": gather_stages,
    "svd(method='band')": lambda: [whole(method="band")],
    "svd(method='gather')": lambda: [whole(method="gather")],
    "svd(method='band', compute_uv=False)": lambda: [whole(method="band", compute_uv=False)],
    "svd(method='gather', compute_uv=False)": lambda: [whole(method="gather", compute_uv=False)],
}
for name, fn in rows.items():
    times = np.median(np.array([fn() for _ in range(reps)]), axis=0)
    if root:
        print(f"{name}: " + ", ".join(f"{x:.3f}" for x in times) + " s", flush=True)
