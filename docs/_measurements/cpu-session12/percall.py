"""Per-call host cost of small operations (1 process, n = 64): min of 40 x 100 calls each.

Run with PYTHONPATH pointing at the tree to measure, e.g.
BLASMP_BACKEND=cpu OMP_NUM_THREADS=1 PYTHONPATH=/tmp/oldwin python percall.py
"""

import timeit

import numpy as np

import blasmp_array as bm

n = 64
rng = np.random.default_rng(0)
A = bm.from_numpy(rng.random((n, n)))
B = bm.from_numpy(rng.random((n, n)))
cases = {
    "A @ B": lambda: A @ B,
    "A.T @ A": lambda: A.T @ A,
    "A + B": lambda: A + B,
    "A.sum()": lambda: A.sum(),
}
for name, fn in cases.items():
    fn()
    best = min(timeit.repeat(fn, number=100, repeat=40)) / 100
    print(f"{name:8s} {best * 1e6:7.1f} us")
