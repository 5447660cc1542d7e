import sys, time, timeit, numpy as np, warnings
import blasmp_array as bm
n = 64
A = bm.from_numpy(np.random.rand(n, n)); B = bm.from_numpy(np.random.rand(n, n))
cases = {"A @ B": lambda: A @ B, "A.T @ A": lambda: A.T @ A, "A + B": lambda: A + B, "A.sum()": lambda: A.sum()}
for name, fn in cases.items():
    fn()
    best = min(timeit.repeat(fn, number=100, repeat=40)) / 100
    print(f"{name:8s} {best*1e6:7.1f} us")
