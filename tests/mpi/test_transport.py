"""The backend's stream-ordered one-sided transport, host collectives and local BLAS3 kernels.

Runs on every rank under mpiexec; backend-agnostic (``BLASMP_BACKEND`` picks it), so the same
tests check the GPU backend: arrays are made with ``backend.xp`` and read with
``backend.asnumpy``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time

import numpy as np
import pytest

import blasmp_array as bm
from blasmp_array.backends import SignalTimeoutError

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


@pytest.fixture(scope="module")
def backend():
    return bm.ProcessGrid(backend=os.environ.get("BLASMP_BACKEND", "cpu")).backend


@pytest.fixture
def short_timeout(backend):
    old = backend.signal_timeout
    backend.signal_timeout = 0.5
    yield backend
    backend.signal_timeout = old


def values(n: int, dtype, seed: int) -> np.ndarray:
    """Distinct deterministic values (exact in every dtype) tagged with ``seed``."""
    x = np.arange(n, dtype=np.float64) + 1000.0 * seed
    if np.dtype(dtype).kind == "c":
        return (x - 1j * (seed + 1)).astype(dtype)
    return x.astype(dtype)


# -- symmetric memory and puts --------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_ring_put(backend, dtype):
    be = backend
    r, p = be.rank, be.size
    n = 37
    buf = be.alloc_symmetric(2 * n + 3, dtype, name="ring")
    buf.array[...] = be.xp.asarray(np.full(buf.size, np.nan, dtype=dtype))
    be.barrier()
    # rank r writes its values into the second half of rank r+1 and the first half of itself
    be.put(buf, n + 3, be.asarray(values(n, dtype, r)), (r + 1) % p, be.comm_stream)
    be.put(buf, 0, be.asarray(values(n, dtype, 100 + r)), r, be.comm_stream)
    be.quiet(be.comm_stream)
    be.barrier()
    got = be.asnumpy(buf.array)
    np.testing.assert_array_equal(got[:n], values(n, dtype, 100 + r))
    assert np.isnan(got[n : n + 3]).all()  # untouched gap
    np.testing.assert_array_equal(got[n + 3 :], values(n, dtype, (r - 1) % p))
    be.free(buf)


def test_put_split_into_small_messages(backend):
    be = backend
    r, p = be.rank, be.size
    old = getattr(be, "max_message_elements", None)
    be.max_message_elements = 40  # bytes per message on the CPU backend: 2 complex128
    try:
        buf = be.alloc_symmetric(41, np.complex128, name="split")
        be.put(buf, 1, be.asarray(values(37, np.complex128, r)), (r + 1) % p, be.comm_stream)
        be.barrier()
        got = be.asnumpy(buf.array)
        np.testing.assert_array_equal(got[1:38], values(37, np.complex128, (r - 1) % p))
        be.free(buf)
    finally:
        if old is not None:
            be.max_message_elements = old


def test_zero_size_allocations(backend):
    be = backend
    buf = be.alloc_symmetric(0, np.float64, name="empty")
    sig = be.alloc_signals(0, name="nosig")
    assert buf.size == 0 and sig.count == 0
    be.put(buf, 0, be.xp.zeros(0), (be.rank + 1) % be.size, be.comm_stream)
    be.barrier()
    be.free(buf)
    be.free(sig)


def test_signals_start_zero(backend):
    be = backend
    sig = be.alloc_signals(5, name="zeros")
    assert (be.asnumpy(sig.array) == 0).all()
    be.free(sig)


def test_put_signal_rounds_with_ack(backend):
    """A ring pipeline reusing one receive buffer: round k may overwrite it only after the
    receiver acknowledged round k-1 (the ACK protocol of the panel pipelines)."""
    be = backend
    r, p = be.rank, be.size
    right, left = (r + 1) % p, (r - 1) % p
    n, rounds = 50, 6
    buf = be.alloc_symmetric(n, np.float64, name="stage")
    recv_sig = be.alloc_signals(1, name="recv")
    ack_sig = be.alloc_signals(1, name="ack")
    seen: list[np.ndarray] = []
    for k in range(rounds):
        src = be.asarray(values(n, np.float64, 10 * k + r))
        if k > 0:  # the right neighbour has read round k-1 out of its buffer
            be.signal_wait(ack_sig, 0, k, be.comm_stream, what=f"ack round {k}", peer=right)
        be.put_signal(buf, 0, src, right, recv_sig, 0, k + 1, "set", be.comm_stream)
        # receiver side, on the compute stream: wait for the data, consume it, acknowledge
        be.signal_wait(recv_sig, 0, k + 1, be.compute, what=f"recv round {k}", peer=left)
        be.launch(be.compute, lambda: seen.append(be.asnumpy(buf.array).copy()))
        be.signal_op(ack_sig, 0, k + 1, left, "set", be.compute)
    be.synchronize()
    be.barrier()
    assert len(seen) == rounds
    for k, got in enumerate(seen):
        np.testing.assert_array_equal(got, values(n, np.float64, 10 * k + left))
    be.free(buf)
    be.free(recv_sig)
    be.free(ack_sig)


def test_signal_add_from_all_ranks(backend):
    be = backend
    r, p = be.rank, be.size
    sig = be.alloc_signals(2, name="count")
    reps = 5
    for _ in range(reps):
        # both streams add concurrently: the adds must be atomic
        be.signal_op(sig, 1, r + 1, 0, "add", be.comm_stream)
        be.signal_op(sig, 1, 1, 0, "add", be.compute)
    total = reps * (p * (p + 1) // 2 + p)
    if r == 0:
        be.signal_wait(sig, 1, total, be.compute, what="sum of adds", peer=None)
    be.synchronize()
    be.barrier()
    got = int(be.asnumpy(sig.array)[1])
    assert got == (total if r == 0 else 0)
    be.free(sig)


def test_signal_set_to_self(backend):
    be = backend
    sig = be.alloc_signals(3, name="self")
    be.signal_op(sig, 2, 7, be.rank, "set", be.comm_stream)
    be.signal_wait(sig, 2, 7, be.compute, what="self signal", peer=be.rank)
    be.synchronize()
    assert be.asnumpy(sig.array).tolist() == [0, 0, 7]
    be.barrier()
    be.free(sig)


def test_quiet_then_signal(backend):
    """put (no signal) + quiet + a separate signal: the data is there when the signal is."""
    be = backend
    r, p = be.rank, be.size
    n = 1000
    buf = be.alloc_symmetric(n, np.complex128, name="quiet")
    sig = be.alloc_signals(1, name="quiet_sig")
    be.put(buf, 0, be.asarray(values(n, np.complex128, r)), (r + 1) % p, be.comm_stream)
    be.quiet(be.comm_stream)
    be.signal_op(sig, 0, 1, (r + 1) % p, "set", be.comm_stream)
    be.signal_wait(sig, 0, 1, be.compute, what="quiet", peer=(r - 1) % p)
    out = []
    be.launch(be.compute, lambda: out.append(be.asnumpy(buf.array).copy()))
    be.synchronize()
    np.testing.assert_array_equal(out[0], values(n, np.complex128, (r - 1) % p))
    be.barrier()
    be.free(buf)
    be.free(sig)


# -- streams, events, errors ----------------------------------------------------------------


def test_event_orders_compute_before_comm(backend):
    be = backend
    r, p = be.rank, be.size
    n = 64
    buf = be.alloc_symmetric(n, np.float64, name="evt")
    sig = be.alloc_signals(1, name="evt_sig")
    staging = be.xp.zeros(n)

    def produce():
        time.sleep(0.05)  # a slow producer: without the event the put would send zeros
        staging[...] = be.asarray(values(n, np.float64, r))

    be.launch(be.compute, produce)
    ev = be.record_event(be.compute)
    be.wait_event(be.comm_stream, ev)
    be.put_signal(buf, 0, staging, (r + 1) % p, sig, 0, 1, "set", be.comm_stream)
    be.signal_wait(sig, 0, 1, be.compute, what="event test", peer=(r - 1) % p)
    be.synchronize()
    np.testing.assert_array_equal(be.asnumpy(buf.array), values(n, np.float64, (r - 1) % p))
    be.barrier()
    be.free(buf)
    be.free(sig)


def test_host_wait_returns_after_the_event_not_after_the_stream(backend):
    """``host_wait(event)``: the work before the event has run when it returns, while work
    enqueued after the event on the same stream may still be pending (LU's rank 0 reads the
    pivots while the update keeps running)."""
    be = backend
    gate = threading.Event()
    out = be.xp.zeros(4)

    def produce():
        time.sleep(0.05)  # without the wait the host would read zeros
        out[...] = 7.0

    be.launch(be.comm_stream, produce)
    ev = be.record_event(be.comm_stream)
    if be.name == "cpu" and not be.comm_stream.inline:  # streams that are host threads
        be.launch(be.comm_stream, gate.wait, 10)  # held until the host opens it
    t = time.perf_counter()
    be.host_wait(ev)
    waited = time.perf_counter() - t
    np.testing.assert_array_equal(be.asnumpy(out), np.full(4, 7.0))
    gate.set()
    be.synchronize()
    assert waited < 5, f"host_wait waited {waited:.1f} s: for the work after the event too"


def test_streams_run_in_order(backend):
    be = backend
    order: list[int] = []
    for i in range(20):
        be.launch(be.compute, order.append, i)
    be.synchronize()
    assert order == list(range(20))


def test_error_propagates_through_synchronize(backend):
    be = backend
    ran = threading.Event()

    def fail():
        raise ZeroDivisionError("boom on purpose")

    be.launch(be.compute, fail)
    be.launch(be.compute, ran.set)  # dropped: the stream failed before it
    with pytest.raises(ZeroDivisionError, match="boom on purpose"):
        be.synchronize()
    assert not ran.is_set()
    # the error is cleared: the stream works again
    be.launch(be.compute, ran.set)
    be.synchronize()
    assert ran.is_set()
    be.barrier()


def test_missing_signal_times_out(short_timeout):
    be = short_timeout
    r, p = be.rank, be.size
    sig = be.alloc_signals(4, name="never")
    what = "test_op step 3 (panel recv)"
    peer = (r + 1) % p
    t0 = time.monotonic()
    be.signal_wait(sig, 2, 5, be.compute, what=what, peer=peer)
    with pytest.raises(SignalTimeoutError) as info:
        be.synchronize()
    elapsed = time.monotonic() - t0
    msg = str(info.value)
    assert 0.4 < elapsed < 30
    assert what in msg
    assert "never[2]" in msg
    assert f"rank {r}" in msg and f"peer {peer}" in msg
    assert ">= 5" in msg and "seen: 0" in msg
    be.barrier()
    be.free(sig)


# -- host collectives -----------------------------------------------------------------------


def test_host_collectives(backend):
    be = backend
    r, p = be.rank, be.size
    assert be.allreduce(r + 1) == p * (p + 1) // 2
    assert be.allreduce(float(r), "max") == p - 1
    assert be.allreduce(r, "min") == 0
    assert be.allreduce(r == 0, "lor") is True or be.allreduce(r == 0, "lor") == 1
    assert bool(be.allreduce(r == 0, "land")) == (p == 1)
    arr = np.array([r, -r, 1], dtype=np.float64)
    np.testing.assert_array_equal(be.allreduce(arr, "sum"), [p * (p - 1) / 2, -p * (p - 1) / 2, p])
    np.testing.assert_array_equal(be.allreduce(arr, "max"), [p - 1, 0, 1])
    assert be.bcast({"x": r}, root=p - 1) == {"x": p - 1}
    assert be.allgather((r, "a")) == [(q, "a") for q in range(p)]


@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=lambda d: np.dtype(d).name)
def test_allgather_array(backend, dtype):
    """Typed pieces of every length (0 included) concatenated in rank order on every rank;
    a piece that disagrees with counts is refused on that rank before any message."""
    be = backend
    r, p = be.rank, be.size
    counts = [(2 * q + 1) % 4 for q in range(p)]  # some ranks send nothing
    send = values(counts[r], dtype, 10 * r + 1)
    got = be.allgather_array(send, counts)
    assert got.dtype == np.dtype(dtype) and got.shape == (sum(counts),)
    want = np.concatenate([values(counts[q], dtype, 10 * q + 1) for q in range(p)])
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="counts"):
        be.allgather_array(np.zeros(counts[r] + 1, dtype), counts)


def _a2a_len(src: int, dst: int) -> int:
    return (3 * src + 2 * dst + 1) % 8  # includes empty messages


@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("limit", [2**31 - 1, 3, 1])
def test_alltoallv_split_and_empty(backend, dtype, limit):
    be = backend
    r, p = be.rank, be.size
    old = getattr(be, "max_message_elements", None)
    be.max_message_elements = limit
    try:
        send = [be.asarray(values(_a2a_len(r, d), dtype, 100 * r + d)) for d in range(p)]
        recv = [be.xp.full(_a2a_len(s, r), np.nan, dtype=dtype) for s in range(p)]
        be.alltoallv(send, recv)
        for s in range(p):
            np.testing.assert_array_equal(
                be.asnumpy(recv[s]), values(_a2a_len(s, r), dtype, 100 * s + r)
            )
        # a strided receive buffer and a strided send buffer
        base = be.xp.full((p, 16), np.nan, dtype=dtype)
        recv = [base[s, : 2 * _a2a_len(s, r) : 2] for s in range(p)]
        send_base = [be.asarray(np.repeat(values(_a2a_len(r, d), dtype, d), 2)) for d in range(p)]
        send = [x[::2] for x in send_base]
        be.alltoallv(send, recv)
        for s in range(p):
            np.testing.assert_array_equal(be.asnumpy(recv[s]), values(_a2a_len(s, r), dtype, r))
    finally:
        if old is not None:
            be.max_message_elements = old


# -- local BLAS3 kernels --------------------------------------------------------------------


def _rand(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _op(x, trans):
    return x if trans == "N" else (x.T if trans == "T" else x.conj().T)


def _eps(dtype):
    return float(np.finfo(dtype).eps)


LAYOUTS = ("strided", "rows", "transposed")


def _view(big, m, n, layout):
    if layout == "strided":  # every 2nd row, every 3rd column
        return big[1 : 1 + 2 * m : 2, 2 : 2 + 3 * n : 3]
    if layout == "rows":  # a sub-block: unit column stride, leading dimension > n
        return big[1 : 1 + m, 2 : 2 + n]
    return big[2 : 2 + n, 1 : 1 + m].T  # column-major: the transpose of a sub-block


def _embed(be, x, layout):
    """Place ``x`` as a ``layout`` view inside a larger C-ordered NaN-filled array (on the
    backend); return ``(big, view)``."""
    m, n = x.shape
    big = np.full((2 * max(m, n) + 3, 3 * max(m, n) + 2), np.nan, dtype=x.dtype)
    _view(big, m, n, layout)[...] = x
    dev = be.asarray(big)
    return dev, _view(dev, m, n, layout)


def _check_outside(be, big, shape, layout, where):
    host = be.asnumpy(big).copy()
    _view(host, *shape, layout)[...] = 0
    assert np.isnan(host).sum() == host.size - shape[0] * shape[1], (
        f"{where}: wrote outside the {layout} view"
    )


def _layouts(be):
    """Three rotations, so each operand is seen in each layout; the local kernel tests are the
    same on every rank, so the rotations are shared out among the ranks to save time."""
    rotations = [tuple(LAYOUTS[(i + j) % 3] for j in range(3)) for i in range(3)]
    share = min(be.size, 3)
    return [rot for i, rot in enumerate(rotations) if i % share == be.rank % share]


@contextlib.contextmanager
def all_ranks_agree(be):
    """Fail on every rank when the body failed on any rank (so no rank runs ahead into the next
    test's collectives)."""
    error = None
    try:
        yield
    except Exception as exc:  # re-raised below, after the agreement
        error = exc
    failed_somewhere = be.allreduce(error is not None, "lor")
    if error is not None:
        raise error
    if failed_somewhere:
        pytest.fail("failed on another rank (see its report)")


def _tri(x, uplo, k=0):
    return np.tril(x, k) if uplo == "L" else np.triu(x, k)


def _poison_triangle(a, uplo, diag):
    """NaN everywhere BLAS must not read: the other triangle, and the diagonal if unit."""
    a = a.copy()
    mask = ~(np.tril(np.ones(a.shape, bool)) if uplo == "L" else np.triu(np.ones(a.shape, bool)))
    if diag == "U":
        np.fill_diagonal(mask, True)
    a[mask] = np.nan
    return a


def _assert_within(got, ref, bound, what):
    err = np.abs(got.astype(np.complex128) - ref)
    assert np.all(np.isfinite(got)), f"{what}: non-finite values"
    bad = err > bound
    assert not bad.any(), f"{what}: max err {err.max():.3g}, bound {bound[bad].min():.3g}"


def _scalars(dtype, herm=False):
    if herm:
        return 1.5, 0.5  # HERK/HER2K need a real beta (and HERK a real alpha)
    if np.dtype(dtype).kind == "c":
        return 1.5 - 0.5j, 0.5 + 0.25j
    return 1.5, 0.5


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("trans_a,trans_b", list(itertools.product("NTC", "NTC")))
def test_gemm_kernel(backend, dtype, trans_a, trans_b):
    be = backend
    rng = np.random.default_rng(7)
    m, n, k = 9, 7, 11
    eps = _eps(dtype)
    am, bm_ = _rand(rng, (m, k), dtype), _rand(rng, (k, n), dtype)
    # stored so that op(a) == am and op(b) == bm_
    a = _op(am, trans_a).copy()
    b = _op(bm_, trans_b).copy()
    c0 = _rand(rng, (m, n), dtype)
    alpha, beta = _scalars(dtype)
    prod = am.astype(np.complex128) @ bm_
    absprod = np.abs(am).astype(np.float64) @ np.abs(bm_)
    with all_ranks_agree(be):
        for lc, la, lb in _layouts(be):
            _, a_dev = _embed(be, a, la)
            _, b_dev = _embed(be, b, lb)
            big, c_dev = _embed(be, c0, lc)
            be.gemm(alpha, a_dev, b_dev, beta, c_dev, trans_a, trans_b, be.compute)
            be.synchronize()
            where = f"gemm {trans_a}{trans_b} c:{lc} a:{la} b:{lb}"
            bound = 4 * (k + 2) * eps * (abs(alpha) * absprod + abs(beta) * np.abs(c0))
            _assert_within(be.asnumpy(c_dev), alpha * prod + beta * c0, bound, where)
            _check_outside(be, big, (m, n), lc, where)
            # beta == 0: c is not read (NaN in c must not leak)
            c_dev[...] = np.nan
            be.gemm(alpha, a_dev, b_dev, 0, c_dev, trans_a, trans_b, be.compute)
            be.synchronize()
            bound = 4 * (k + 2) * eps * abs(alpha) * absprod
            _assert_within(be.asnumpy(c_dev), alpha * prod, bound, where + " beta=0")
            _check_outside(be, big, (m, n), lc, where + " beta=0")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("uplo,trans", list(itertools.product("LU", "NTC")))
def test_syrk_syr2k_kernels(backend, dtype, uplo, trans):
    be = backend
    rng = np.random.default_rng(11)
    n, k = 8, 5
    eps = _eps(dtype)
    herm = trans == "C" and np.dtype(dtype).kind == "c"
    shape = (n, k) if trans == "N" else (k, n)
    a, b = _rand(rng, shape, dtype), _rand(rng, shape, dtype)
    c0 = _rand(rng, (n, n), dtype)
    tri = np.tril(np.ones((n, n), bool)) if uplo == "L" else np.triu(np.ones((n, n), bool))
    c_in = c0.copy()
    c_in[~tri] = np.nan  # the other triangle is neither read nor written
    alpha, beta = _scalars(dtype, herm)
    alpha2 = 1.5 - 0.5j if np.dtype(dtype).kind == "c" else 1.5  # HER2K: complex alpha
    oa, ob = _op(a, trans).astype(np.complex128), _op(b, trans).astype(np.complex128)
    ta = (lambda x: x.conj().T) if herm else (lambda x: x.T)
    syrk_ref = alpha * (oa @ ta(oa)) + beta * c0
    syrk_bound = (
        4 * (k + 2) * eps * (abs(alpha) * (np.abs(oa) @ np.abs(oa).T) + abs(beta) * np.abs(c0))
    )
    if herm:
        syr2k_ref = alpha2 * (oa @ ta(ob)) + np.conj(alpha2) * (ob @ ta(oa)) + beta * c0
    else:
        syr2k_ref = alpha2 * (oa @ ob.T + ob @ oa.T) + beta * c0
    syr2k_bound = (
        4
        * (k + 2)
        * eps
        * (
            abs(alpha2) * (np.abs(oa) @ np.abs(ob).T + np.abs(ob) @ np.abs(oa).T)
            + abs(beta) * np.abs(c0)
        )
    )
    if herm:  # HERK/HER2K: the diagonal is real
        np.fill_diagonal(syrk_ref, syrk_ref.diagonal().real)
        np.fill_diagonal(syr2k_ref, syr2k_ref.diagonal().real)
    with all_ranks_agree(be):
        for lc, la, lb in _layouts(be):
            for name in ("syrk", "syr2k"):
                where = f"{name} {uplo}{trans} c:{lc} a:{la} b:{lb}"
                big, c_dev = _embed(be, c_in, lc)
                _, a_dev = _embed(be, a, la)
                if name == "syrk":
                    be.syrk(alpha, a_dev, beta, c_dev, uplo, trans, be.compute)
                    ref, bound = syrk_ref, syrk_bound
                else:
                    _, b_dev = _embed(be, b, lb)
                    be.syr2k(alpha2, a_dev, b_dev, beta, c_dev, uplo, trans, be.compute)
                    ref, bound = syr2k_ref, syr2k_bound
                be.synchronize()
                got = be.asnumpy(c_dev)
                _assert_within(got[tri], ref[tri], bound[tri], where)
                assert np.isnan(got[~tri]).all(), f"{where}: wrote the other triangle"
                if herm:
                    assert np.all(got.diagonal().imag == 0), f"{where}: complex diagonal"
                _check_outside(be, big, (n, n), lc, where)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("side,uplo,trans,diag", list(itertools.product("LR", "LU", "NTC", "NU")))
def test_trmm_trsm_kernels(backend, dtype, side, uplo, trans, diag):
    be = backend
    rng = np.random.default_rng(13)
    n, m = 7, 6
    eps = _eps(dtype)
    bshape = (n, m) if side == "L" else (m, n)
    # well-conditioned triangle: dominant diagonal, small off-diagonal
    shift = (2 + 0.5j) if np.dtype(dtype).kind == "c" else 2
    a = (_rand(rng, (n, n), dtype) / n + shift * np.eye(n)).astype(dtype)
    t = _tri(a.astype(np.complex128), uplo)
    if diag == "U":
        np.fill_diagonal(t, 1)
    opt = _op(t, trans)
    b0 = _rand(rng, bshape, dtype)
    alpha = (0.75 + 0.5j) if np.dtype(dtype).kind == "c" else 0.75
    a_poisoned = _poison_triangle(a, uplo, diag)
    mul = (lambda x, y: x @ y) if side == "L" else (lambda x, y: y @ x)
    with all_ranks_agree(be):
        for lb, la, _ in _layouts(be):
            where = f"{side}{uplo}{trans}{diag} b:{lb} a:{la}"
            _, a_dev = _embed(be, a_poisoned, la)

            big, b_dev = _embed(be, b0, lb)
            be.trmm(alpha, a_dev, b_dev, side, uplo, trans, diag, be.compute)
            be.synchronize()
            bound = 4 * (n + 2) * eps * abs(alpha) * mul(np.abs(opt), np.abs(b0))
            _assert_within(be.asnumpy(b_dev), alpha * mul(opt, b0), bound, "trmm " + where)
            _check_outside(be, big, bshape, lb, "trmm " + where)

            # TRSM: residual |op(T) X - alpha B| <= c n eps (|op(T)| |X| + |alpha B|)
            big, b_dev = _embed(be, b0, lb)
            be.trsm(alpha, a_dev, b_dev, side, uplo, trans, diag, be.compute)
            be.synchronize()
            x = be.asnumpy(b_dev).astype(np.complex128)
            assert np.all(np.isfinite(x)), f"trsm {where}: non-finite (read the poisoned part?)"
            bound = 4 * (n + 2) * eps * (mul(np.abs(opt), np.abs(x)) + abs(alpha) * np.abs(b0))
            _assert_within(mul(opt, x), alpha * b0.astype(np.complex128), bound, "trsm " + where)
            _check_outside(be, big, bshape, lb, "trsm " + where)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_kernels_degenerate_shapes(backend, dtype):
    """k == 0 (beta scaling only) and empty outputs."""
    be = backend
    c0 = np.arange(12, dtype=dtype).reshape(3, 4)
    c = be.asarray(c0.copy())
    be.gemm(2, be.xp.zeros((3, 0), dtype), be.xp.zeros((0, 4), dtype), 0.5, c, "N", "N", be.compute)
    be.syrk(2, be.xp.zeros((3, 0), dtype), 0.5, c[:, :3], "L", "N", be.compute)
    be.gemm(
        1, be.xp.zeros((0, 5), dtype), be.xp.zeros((5, 4), dtype), 0, c[:0], "N", "N", be.compute
    )
    be.trsm(1, be.xp.eye(0, dtype=dtype), c[:0], "L", "L", "N", "N", be.compute)
    be.synchronize()
    expect = 0.5 * c0
    expect[np.tril_indices(3)] *= 0.5
    np.testing.assert_array_equal(be.asnumpy(c), expect)
