"""The tall routes of the distributed SVD against the gather (run under mpiexec; rank 0
prints).

    mpiexec -n 2 python docs/_scripts/svd_tall.py M N BLOCK

``M x N`` float64 (``M >= 2 N``: ``method='auto'`` takes the QR route), the most square grid of
the ranks, ``full_matrices`` False and True; medians of 3 calls.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from mpi4py import MPI

import blasmp_array as bm
from blasmp_array.ops.lapack.svd import svd

comm = MPI.COMM_WORLD
m, n, b = (int(x) for x in sys.argv[1:4])
grid = bm.ProcessGrid(*bm.square_grid_shape(comm.size))
A = bm.random.standard_normal((m, n), block=b, grid=grid, seed=0)
for full in (False, True):
    for meth in ("auto", "gather"):
        times = []
        for _ in range(3):
            comm.Barrier()
            t0 = time.perf_counter()
            svd(A, full_matrices=full, method=meth)
            comm.Barrier()
            times.append(time.perf_counter() - t0)
        if comm.rank == 0:
            print(f"{m}x{n} full_matrices={full} method={meth}: {np.median(times):.3f} s")
