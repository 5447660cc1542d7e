"""The everyday small calls on one process (``blasmp_array.bench.small_calls``): ``A @ x``,
element-wise operators, sums and norms at ``n = 256``, where the Python path of a call is a
visible share of its time. asv times them in its own process (a 1 x 1 grid; no ``mpiexec``);
``tools/bench_vectors.py`` prints them beside NumPy's in the same run."""

from __future__ import annotations

import numpy as np

from blasmp_array.bench.small_calls import CALLS


class SmallCalls:
    params = (list(CALLS), [256])
    param_names = ["call", "n"]

    def setup(self, call: str, n: int) -> None:
        import blasmp_array as bm

        rng = np.random.default_rng(0)
        a = rng.standard_normal((n, n)) + n * np.eye(n)
        x = rng.standard_normal(n)
        grid = bm.ProcessGrid(1, 1, backend="cpu")
        A, X = bm.from_numpy(a, grid=grid), bm.from_numpy(x, grid=grid)
        f = CALLS[call]
        self.run = lambda: f(A, X, np)
        self.reference = lambda: f(a, x, np)

    def time_call(self, call: str, n: int) -> None:
        self.run()

    def time_numpy(self, call: str, n: int) -> None:
        self.reference()
