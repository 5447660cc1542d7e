"""Race detector: every pipelined operator, repeated many times on the same input, gives
bit-identical results, and writes every element of its output (poisoned with NaN first).

A result that changes between identical calls is a race (a slot reused while still read, a
signal counted twice) and fails here instead of being tolerated. ``BLASMP_RACE_REPEATS`` sets
the loop count (default 3 for the CPU CI; tools/gpu-node-test.sh uses more on the GPU node).
Small blocks and narrow steps give many pipeline steps with pieces from many owners.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import blasmp_array as bm
from blasmp_array import _alloc, linalg
from blasmp_array.ops.engine import redistribute as rd

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from blas3_reference import random_matrix  # noqa: E402

REPEATS = int(os.environ.get("BLASMP_RACE_REPEATS", "3"))
N, K, BLOCK, WIDTH = 61, 45, 4, 8


def _operands(grid, dtype):
    rng = np.random.default_rng(17)
    a, b = random_matrix(rng, (N, K), dtype), random_matrix(rng, (N, K), dtype)
    t = np.tril(rng.standard_normal((N, N))) / N + 2 * np.eye(N)
    bt = rng.standard_normal((N, K))
    make = lambda x: bm.from_numpy(np.asarray(x, dtype), block=BLOCK, grid=grid)  # noqa: E731
    return make(a), make(b), make(t), make(bt)


def _poisoned(grid, shape, dtype):
    return bm.from_numpy(np.full(shape, np.nan, dtype), block=BLOCK, grid=grid)


PIPE = {"method": "summa", "step_width": WIDTH}
REDIST_BUDGET = 4096  # bytes per rank and round of the redistribution cases
CASES = {
    # name: (call on the operands A, B (N x K), T (triangular N x N), X (N x K), C, stages;
    #        shape of the NaN-poisoned C, or None when the operator makes its own output)
    "gemm": (
        lambda A, B, T, X, C, s: linalg.gemm(A, B, C, trans_b="T", num_stages=s, **PIPE),
        (N, N),
    ),
    "symm": (lambda A, B, T, X, C, s: linalg.symm(T, A, C, num_stages=s, **PIPE), (N, K)),
    "syrk": (lambda A, B, T, X, C, s: linalg.syrk(A, C, num_stages=s, **PIPE), (N, N)),
    "syr2k": (lambda A, B, T, X, C, s: linalg.syr2k(A, B, C, num_stages=s, **PIPE), (N, N)),
    "trmm": (lambda A, B, T, X, C, s: linalg.trmm(T, X, num_stages=s, **PIPE), None),
    "trsm": (lambda A, B, T, X, C, s: linalg.trsm(T, X, num_stages=s), None),
    # redistribution plans: a small memory budget gives many rounds through the same slots
    "redistribute": (
        lambda A, B, T, X, C, s: rd.redistribute(
            A, block=(3, 5), num_stages=s, memory_budget=REDIST_BUDGET
        ),
        None,
    ),
    "transpose": (
        lambda A, B, T, X, C, s: rd.transpose(
            A, conjugate=True, num_stages=s, memory_budget=REDIST_BUDGET
        ),
        None,
    ),
    # factorisations (their own stages): LU of a matrix whose pivots move rows across blocks
    # and processes, Cholesky of T T^H (T has 2 on its diagonal: positive definite)
    "lu_factor": (lambda A, B, T, X, C, s: linalg.lu_factor(A @ B.T + T)[0], None),
    "cholesky": (lambda A, B, T, X, C, s: linalg.cholesky(T @ T.T, lower=True), None),
}


@pytest.mark.parametrize("stages", [1, 2, 3])
@pytest.mark.parametrize("op", sorted(CASES))
@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=lambda d: np.dtype(d).name)
def test_repeated_calls_are_bit_identical(grid, op, dtype, stages, monkeypatch):
    monkeypatch.setattr(_alloc, "_DEBUG_FILL", np.nan)  # results made by an operator too
    dtype = np.dtype(dtype)
    A, B, T, X = _operands(grid, dtype)
    fn, shape = CASES[op]
    first = None
    for i in range(REPEATS):
        C = _poisoned(grid, shape, dtype) if shape is not None else None
        got = fn(A, B, T, X, C, stages).to_numpy()
        if op in ("syrk", "syr2k"):
            got = np.tril(got)  # the upper triangle of C is not written: it stays NaN
        assert np.isfinite(got).all(), f"{op}: output elements left unwritten (NaN) in call {i}"
        if first is None:
            first = got
        else:
            assert np.array_equal(got, first), (
                f"{op} (stages={stages}): call {i} differs from call 0 on the same input (race)"
            )
