"""The one-sided exchange engine (ops/engine/_exchange.py) under every operator that moves data.

Every data movement of ``ops/`` is a plan over one engine; here its protocol is exercised
through the operators: a sender that puts its data without the ready signal makes the
receiver's wait time out, and every rank raises ``SignalTimeoutError`` naming the operator,
step, signal and peer (no rank is left waiting); afterwards the operator works again on fresh
pools. The redistribution case lives in ``test_redistribute.py``.

Which wait times out first on a rank is a race when the lost message stalls several streams
(e.g. a comm stream waiting for an ack that the stalled compute stream would send): each rank
reports its first failure, so the message is checked for the form of every rank's report
(operator, step, signal word, peer), and for the lost signal itself where only one wait can
fail (one exchange, one step in flight).
"""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
from mpi4py import MPI

import blasmp_array as bm
from blasmp_array.backends.base import SignalTimeoutError
from blasmp_array.ops.engine import _exchange

COMM = MPI.COMM_WORLD
SIZE = COMM.Get_size()
BACKEND = os.environ.get("BLASMP_BACKEND", "cpu")

_GRIDS: dict[tuple[int, int], bm.ProcessGrid] = {}


def cached_grid(nprow: int, npcol: int) -> bm.ProcessGrid:
    """Grids are collective to create: each shape once (same order on every rank)."""
    if (nprow, npcol) not in _GRIDS:
        _GRIDS[(nprow, npcol)] = bm.ProcessGrid(nprow, npcol, backend=BACKEND)
    return _GRIDS[(nprow, npcol)]


pytestmark = pytest.mark.skipif(SIZE == 1, reason="one rank puts nothing: no signal to lose")


def _matrix(n: int, seed: int, spd: bool = False) -> np.ndarray:
    a = np.random.default_rng(seed).standard_normal((n, n))
    return a @ a.T + n * np.eye(n) if spd else a


#: one rank's report: "<operator> step <k>: ready[slot s, sender p] ... peer p" (or an ack)
REPORT = re.compile(
    r"rank (\d+): SignalTimeoutError: .*?(?P<what>[a-z_ ]+) step \d+: "
    r"(ready\[slot \d+, sender \d+\]|ack\[slot \d+, receiver \d+\]).*?peer \d+"
)


def _drops(monkeypatch, backend, key, run, expect, names):
    """``run()`` with ``key``'s ready signal dropped raises SignalTimeoutError on every rank;
    each failing rank's report names one of ``names``, a step, a signal word and a peer, and
    the message contains each string of ``expect``; then ``run()`` works again."""
    timeout = backend.signal_timeout
    monkeypatch.setattr(_exchange, "_DROP_SIGNAL", key)
    backend.signal_timeout = 1.0
    try:
        with pytest.raises(SignalTimeoutError) as info:
            run()
    finally:
        backend.signal_timeout = timeout
        monkeypatch.setattr(_exchange, "_DROP_SIGNAL", None)
    text = str(info.value)
    for part in expect:
        assert part in text, (part, text)
    reports = [m.group("what").strip() for m in REPORT.finditer(text)]
    assert reports and all(r in names for r in reports), (names, text)
    return run()


@pytest.mark.parametrize("op", ["gemm", "syrk"])
def test_summa_missing_signal_times_out_on_every_rank(monkeypatch, op):
    """A SUMMA operator (panels.py's plan on the engine): rank 0 owns A's first block column
    on a 1xP grid and puts it to the rest of its process row."""
    grid = cached_grid(1, SIZE)
    n, nb = 24, 4
    a, b = _matrix(n, 1), _matrix(n, 2)
    A = bm.from_numpy(a, block=(nb, nb), grid=grid)
    B = bm.from_numpy(b, block=(nb, nb), grid=grid)
    if op == "gemm":
        run, want = (lambda: bm.linalg.gemm(A, B)), a @ b
    else:
        run, want = (lambda: bm.linalg.syrk(A, lower=True, method="summa")), np.tril(a @ a.T)
    expect = ["exchange.signals["]
    C = _drops(monkeypatch, grid.backend, (op, 0, 0), run, expect, [op])
    got = C.to_numpy()
    if op == "syrk":
        got = np.tril(got)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-10)


@pytest.mark.parametrize(
    "key, shape", [("trsm a_panel", (1, SIZE)), ("trsm x_row", (SIZE, 1))], ids=["panel", "x"]
)
def test_trsm_missing_signal_times_out_on_every_rank(monkeypatch, key, shape):
    """TRSM's two exchanges alive at once (left, lower, forward: step 0 is block 0): on a 1xP
    grid rank 0 owns A's first block column and puts it to its process row; on a Px1 grid it
    solves X_0 and puts it down its process column."""
    grid = cached_grid(*shape)
    n, nb = 24, 4
    a = np.tril(_matrix(n, 3)) + n * np.eye(n)
    b = _matrix(n, 4)
    A = bm.from_numpy(a, block=(nb, nb), grid=grid)
    B = bm.from_numpy(b, block=(nb, nb), grid=grid)

    def run():
        return bm.linalg.trsm(A, B, side="left", lower=True)

    names = ["trsm a_panel", "trsm x_row"]
    X = _drops(monkeypatch, grid.backend, (key, 0, 0), run, ["trsm."], names)
    np.testing.assert_allclose(a @ X.to_numpy(), b, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("key", ["cholesky tile", "cholesky"], ids=["tile", "panel"])
def test_cholesky_missing_signal_times_out_on_every_rank(monkeypatch, key):
    """Cholesky's tile and panel exchanges, alive at once: on a Px1 grid rank 0 owns the first
    diagonal tile and the first block column's top, and sends both down its grid column."""
    grid = cached_grid(SIZE, 1)
    n, nb = 24, 4
    a = _matrix(n, 5, spd=True)
    A = bm.from_numpy(a, block=(nb, nb), grid=grid)

    def run():
        return bm.linalg.cholesky(A, lower=True)

    names = ["cholesky", "cholesky tile"]
    L = _drops(monkeypatch, grid.backend, (key, 0, 0), run, ["cholesky."], names)
    np.testing.assert_allclose(L.to_numpy(), np.linalg.cholesky(a), rtol=1e-10, atol=1e-10)
