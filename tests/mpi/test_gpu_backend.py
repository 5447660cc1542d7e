"""GPU-backend specifics: symmetric-heap padding, the deferred free queue, NVSHMEM transport on
CUDA streams, cuBLAS kernels against the CPU backend's kernels, and the MPS check.

The GPU tests are marked ``gpu`` and skipped unless ``BLASMP_BACKEND=gpu`` and a GPU is usable
(the same on every rank). The generic transport and operator tests run on the GPU backend too
when ``BLASMP_BACKEND=gpu``. The MPS-check tests need no GPU and run everywhere.
"""

from __future__ import annotations

import gc
import itertools
import os
import sys
import time
import zlib

import numpy as np
import pytest

import blasmp_array as bm
from blasmp_array import linalg
from blasmp_array.backends import gpu_available
from blasmp_array.backends._nvshmem_runtime import MPS_PID_FILE, mps_problem, mps_running

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from blas3_reference import assert_within_bound, random_matrix, sym_from  # noqa: E402

ON_GPU = os.environ.get("BLASMP_BACKEND") == "gpu" and gpu_available()
gpu = pytest.mark.skipif(not ON_GPU, reason="needs BLASMP_BACKEND=gpu and a usable GPU")
DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


# -- MPS check (no GPU needed) --------------------------------------------------------------


def test_mps_problem_message():
    msg = mps_problem(4, 1, running=False)
    assert msg is not None
    assert "4 MPI ranks share 1 GPU" in msg
    assert "nvidia-cuda-mps-control -d" in msg and "CUDA_MPS_PIPE_DIRECTORY" in msg
    assert "tools/node-run.sh" in msg
    assert mps_problem(4, 1, running=True) is None
    assert mps_problem(2, 2, running=False) is None
    assert mps_problem(1, 8, running=False) is None


def test_mps_running_reads_the_pid_file(tmp_path):
    env = {"CUDA_MPS_PIPE_DIRECTORY": str(tmp_path)}
    (tmp_path / "control").touch()  # left behind by a daemon that quit: not running
    assert not mps_running(env)
    (tmp_path / MPS_PID_FILE).write_text(str(os.getpid()))
    assert mps_running(env)
    (tmp_path / MPS_PID_FILE).write_text("999999999")  # no such process
    assert not mps_running(env)
    assert mps_running(dict(env, BLASMP_ASSUME_MPS="1"))


# -- GPU backend ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def be():
    if not ON_GPU:
        pytest.skip("needs BLASMP_BACKEND=gpu and a usable GPU")
    return bm.ProcessGrid(backend="gpu").backend


def _alloc_of(be, arr):
    ptr = arr.data.mem.ptr
    found = [a for a in be._allocs.values() if a.ptr == ptr]
    assert len(found) == 1
    return found[0]


@pytest.mark.gpu
@gpu
def test_empty_pads_to_the_largest_rank(be):
    import cupy

    r = be.rank
    x = be.empty((r + 1, 3), np.complex64)
    assert isinstance(x, cupy.ndarray) and x.shape == (r + 1, 3) and x.flags.c_contiguous
    alloc = _alloc_of(be, x)
    largest = be.size * 3 * 8
    expect = max(512, -(-largest // 512) * 512)
    assert alloc.nbytes == expect
    assert be.allgather(alloc.nbytes) == [expect] * be.size
    assert len(set(be.allgather(alloc.id))) == 1  # the same collective id everywhere
    z = be.empty((0, 5), np.float64)  # empty tiles still take part
    assert z.shape == (0, 5)
    x[...] = 1
    assert float(abs(x).sum().get()) == (r + 1) * 3


@pytest.mark.gpu
@gpu
def test_free_queue_frees_only_what_is_dead_everywhere(be):
    r = be.rank
    x = be.empty((100,), np.float64)
    xid = _alloc_of(be, x).id
    view = x[10:20]
    del x
    gc.collect()
    assert xid not in be._dead  # a view keeps the allocation alive
    del view
    gc.collect()
    assert xid in be._dead and xid in be._allocs  # queued, not freed: no collective in __del__
    # the next allocation frees it (dead on every rank)
    y = be.empty((7,), np.float64)
    assert xid not in be._allocs
    # dead on some ranks only: stays until every rank has dropped it
    yid = _alloc_of(be, y).id
    keep = y if r == 0 else None
    del y
    gc.collect()
    w = be.empty((3,), np.float64)
    assert yid in be._allocs  # rank 0 still holds it
    del keep
    gc.collect()
    w2 = be.empty((3,), np.float64)
    assert yid not in be._allocs
    # an explicitly freed buffer is not freed again when its arrays die
    buf = be.alloc_symmetric(10, np.float32, name="explicit")
    bid = buf.handle.id
    be.free(buf)
    assert bid not in be._allocs
    del buf
    gc.collect()
    w3 = be.empty((3,), np.float64)
    del w, w2, w3


@pytest.mark.gpu
@gpu
def test_dead_allocation_of_the_same_size_is_taken_over(be):
    x = be.empty((300,), np.float64)
    old = _alloc_of(be, x)
    x[...] = 1
    del x
    gc.collect()
    y = be.empty((299,), np.float64)  # the same padded size: the same memory, a new id
    new = _alloc_of(be, y)
    assert new.ptr == old.ptr and new.nbytes == old.nbytes and new.id != old.id
    assert old.id not in be._allocs and old.id not in be._dead
    assert len(set(be.allgather(new.id))) == 1
    y[...] = 2
    assert float(y.sum().get()) == 2 * 299
    z = be.empty((5000,), np.float64)  # another size: a fresh allocation
    assert _alloc_of(be, z).ptr != new.ptr
    del y, z


@pytest.mark.gpu
@gpu
def test_too_large_allocation_names_the_heap_size(be):
    import cupy

    total = cupy.cuda.runtime.memGetInfo()[1]
    with pytest.raises(MemoryError, match="NVSHMEM_SYMMETRIC_SIZE"):
        be.empty((int(total) // 8 + 1,), np.float64)
    x = be.empty((4,), np.float64)  # still usable afterwards
    del x


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_put_sources_and_auto_order(be, dtype):
    """Sources: a fresh device array filled on the default stream (ordered by auto_order), a
    strided device view, a host array; every put lands at its offset on the right PE."""
    import cupy

    r, p = be.rank, be.size
    n = 33
    buf = be.alloc_symmetric(3 * n, dtype, name="sources")
    sig = be.alloc_signals(1, name="sources_sig")
    buf.array.fill(np.nan)
    be.barrier()
    right, left = (r + 1) % p, (r - 1) % p
    fresh = cupy.full(n, r + 1, dtype=dtype)  # default stream, not synchronised
    strided = (cupy.arange(2 * n, dtype=dtype) + 1000 * r)[::2]
    assert not strided.flags.c_contiguous
    host = (np.arange(n) - 7 * r).astype(dtype)
    be.put(buf, 0, fresh, right, be.comm_stream)
    be.put(buf, n, strided, right, be.comm_stream)
    be.quiet(be.comm_stream)  # the plain puts are complete before the signal of the next one
    be.put_signal(buf, 2 * n, host, right, sig, 0, 1, "add", be.comm_stream)
    be.signal_wait(sig, 0, 1, be.compute, what="sources", peer=left)
    got = []
    be.launch(be.compute, lambda: got.append(be.asnumpy(buf.array)))
    be.synchronize()
    want = np.concatenate(
        [np.full(n, left + 1), np.arange(0, 2 * n, 2) + 1000 * left, np.arange(n) - 7 * left]
    ).astype(dtype)
    np.testing.assert_array_equal(got[0], want)
    be.barrier()
    be.free(buf)
    be.free(sig)


@pytest.mark.gpu
@gpu
def test_waits_block_the_stream_not_the_host(be):
    """Work enqueued behind a pending wait neither runs nor blocks the host. The wait is
    released from another host thread (a host-to-device copy into the signal word), so
    an implicit synchronisation in the enqueue path shows up as a failure, not a hang."""
    import threading

    import cupy

    sig = be.alloc_signals(2, name="async")
    c = cupy.full((64, 64), np.nan)
    a = cupy.eye(64)
    side = cupy.cuda.Stream(non_blocking=True)
    word = sig.array[1:2]

    def release():
        # a host-to-device copy: no kernel, hence no module load (which would wait for the
        # blocked stream itself)
        word.set(np.array([3], dtype=word.dtype), stream=side)
        side.synchronize()

    # cuBLAS loads a kernel at its first launch and loading waits for the device (the blocked
    # stream included): load this gemm's kernel first, as ops/engine/_warmup.py does for operators
    be.gemm(1.0, a, a, 0.0, c, "N", "N", be.compute)
    be.synchronize()
    c.fill(np.nan)
    timer = threading.Timer(2.0, release)
    t0 = time.monotonic()
    be.signal_wait(sig, 1, 3, be.compute, what="async", peer=be.rank)
    timer.start()
    be.gemm(1.0, a, a, 0.0, c, "N", "N", be.compute)  # queued behind the wait
    enqueued = time.monotonic() - t0
    pending = not be.compute.cupy.done
    be.synchronize()
    timer.join()
    assert enqueued < 1.0, f"enqueueing behind a pending wait blocked the host {enqueued:.2f} s"
    assert pending, "the gemm ran before its stream's wait was released"
    np.testing.assert_array_equal(be.asnumpy(c), np.eye(64))
    be.barrier()
    be.free(sig)


@pytest.mark.gpu
@gpu
def test_put_signal_ring_many_rounds_both_ops(be):
    """Every rank streams ``rounds`` chunks to every other rank; 'add' counts arrivals."""
    r, p = be.rank, be.size
    n, rounds = 257, 4
    buf = be.alloc_symmetric(p * rounds * n, np.float64, name="a2a")
    sig = be.alloc_signals(p, name="a2a_sig")
    for k in range(rounds):
        for q in range(p):
            src = be.asarray(np.full(n, 100.0 * r + k))
            off = (r * rounds + k) * n
            be.put_signal(buf, off, src, q, sig, r, 1, "add", be.comm_stream)
    for q in range(p):
        be.signal_wait(sig, q, rounds, be.compute, what=f"from {q}", peer=q)
    be.synchronize()
    got = be.asnumpy(buf.array).reshape(p, rounds, n)
    want = 100.0 * np.arange(p)[:, None, None] + np.arange(rounds)[None, :, None]
    np.testing.assert_array_equal(got, np.broadcast_to(want, got.shape))
    assert be.asnumpy(sig.array).tolist() == [rounds] * p
    be.barrier()
    be.free(buf)
    be.free(sig)


# -- local BLAS3: cuBLAS against the CPU backend's kernels ----------------------------------


def _cases(seed: int, count: int):
    rng = np.random.default_rng(seed)
    combos = list(itertools.product(DTYPES, "LU", "NTC", "LR", "NU"))
    picks = rng.choice(len(combos), size=count, replace=False)
    return [combos[i] for i in sorted(picks)]


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("dtype,uplo,trans,side,diag", _cases(5, 24))
def test_kernels_match_cpu_kernels(be, dtype, uplo, trans, side, diag):
    """The same calls on the CPU kernels (NumPy) and cuBLAS agree to rounding, with complex
    scalars and Fortran-ordered inputs; both refuse the same complex scalars of HERK/HER2K."""
    from blasmp_array.backends import _cpu_kernels as cpu

    rng = np.random.default_rng(
        zlib.crc32(f"{np.dtype(dtype).name}{uplo}{trans}{side}{diag}".encode())
    )
    eps = np.finfo(dtype).eps
    cplx = np.dtype(dtype).kind == "c"
    m, n, k = 40, 33, 27
    al = (0.7 - 0.4j) if cplx else 0.7
    bt = (0.3 + 0.2j) if cplx else 0.3

    def run(fn_gpu, fn_cpu, args_np, out_index):
        dev = [be.asarray(x) if isinstance(x, np.ndarray) else x for x in args_np]
        fn_gpu(*dev, be.compute)
        be.synchronize()
        ref = [x.copy() if isinstance(x, np.ndarray) else x for x in args_np]
        fn_cpu(*ref)
        got = be.asnumpy(dev[out_index])
        scale = np.abs(ref[out_index][np.isfinite(ref[out_index])]).max() + 1
        ok = np.isfinite(ref[out_index])
        assert np.array_equal(np.isfinite(got), ok)
        assert np.abs(got[ok] - ref[out_index][ok]).max() <= 64 * k * eps * scale

    # GEMM with Fortran-ordered a (a C-ordered array's transpose)
    a = np.asfortranarray(random_matrix(rng, (m, k) if trans == "N" else (k, m), dtype))
    b = random_matrix(rng, (k, n) if trans == "N" else (n, k), dtype)
    c = random_matrix(rng, (m, n), dtype)
    run(be.gemm, cpu.gemm, [al, a, b, bt, c, trans, trans], 4)
    # SYRK/HERK and SYR2K/HER2K, complex scalars included
    a = random_matrix(rng, (m, k) if trans == "N" else (k, m), dtype)
    b = random_matrix(rng, a.shape, dtype)
    c = random_matrix(rng, (m, m), dtype)
    c[~(np.tril(np.ones((m, m), bool)) if uplo == "L" else np.triu(np.ones((m, m), bool)))] = np.nan
    herm = cplx and trans == "C"
    if herm:  # HERK's alpha and beta and HER2K's beta must be real, on both backends
        cases = [
            ("HERK", be.syrk, cpu.syrk, [al, a, 1.0, c.copy(), uplo, trans]),
            ("HER2K", be.syr2k, cpu.syr2k, [al, a, b, bt, c.copy(), uplo, trans]),
        ]
        for what, fn_gpu, fn_cpu, args in cases:
            with pytest.raises(TypeError, match=f"{what} .* needs a real scalar"):
                fn_cpu(*args)
            dev = [be.asarray(x) if isinstance(x, np.ndarray) else x for x in args]
            with pytest.raises(TypeError, match=f"{what} .* needs a real scalar"):
                fn_gpu(*dev, be.compute)
                be.synchronize()  # kernel errors surface here
    rk_alpha, rk_beta = (0.7, 0.3) if herm else (al, bt)
    run(be.syrk, cpu.syrk, [rk_alpha, a, rk_beta, c, uplo, trans], 3)
    run(be.syr2k, cpu.syr2k, [al, a, b, rk_beta, c, uplo, trans], 4)
    # TRMM / TRSM
    nn = m if side == "L" else n
    t = random_matrix(rng, (nn, nn), dtype) / nn + 2 * np.eye(nn, dtype=dtype)
    b = random_matrix(rng, (m, n), dtype)
    run(be.trmm, cpu.trmm, [al, t, b, side, uplo, trans, diag], 2)
    run(be.trsm, cpu.trsm, [al, t, b, side, uplo, trans, diag], 2)


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_gemm_copies_unaligned_operands_into_padded_rows(be, dtype, monkeypatch):
    """With the size threshold lowered, GEMM operands whose start or rows are not 16-byte
    aligned (windows ``x[1:, 1:]``, odd widths, a transposed view) are copied into padded rows
    (leading dimension a multiple of 16 bytes, the start aligned), and the product, written
    into a window of a NaN-poisoned output, matches the CPU kernel."""
    import cupy

    from blasmp_array.backends import _cpu_kernels as cpu
    from blasmp_array.backends import _cublas

    monkeypatch.setattr(_cublas, "_ALIGN_COPY_MIN", 0)
    copies = []
    real = _cublas._aligned_copy
    monkeypatch.setattr(_cublas, "_aligned_copy", lambda x: copies.append(real(x)) or copies[-1])
    rng = np.random.default_rng(7)
    a = random_matrix(rng, (20, 18), dtype)
    b = random_matrix(rng, (18, 22), dtype)
    c = np.full((21, 22), np.nan, dtype)  # the output window starts at row 1
    small = np.dtype(dtype).itemsize < 16  # a one-element offset misaligns the start
    cases = [
        (lambda x: x[1:, 1:], lambda y: y[1:, 1:], small),  # unaligned starts
        # odd widths in rows of 18 and 22 elements: aligned unless 4-byte elements
        (lambda x: x[:, :17], lambda y: y[:17, :], np.dtype(dtype).itemsize == 4),
        (lambda x: x[1:, 1:].T.copy().T, lambda y: y[1:, 1:], True),  # Fortran-ordered a
    ]
    for view_a, view_b, copied in cases:
        copies.clear()
        av, bv = view_a(a), view_b(b)
        dav, dbv = view_a(cupy.asarray(a)), view_b(cupy.asarray(b))
        dc = cupy.asarray(c)
        rows, cols = av.shape[0], bv.shape[1]
        be.gemm(1, dav, dbv, 0, dc[1 : rows + 1, :cols], "N", "N", be.compute)
        be.synchronize()
        ref = c.copy()
        cpu.gemm(1, av, bv, 0, ref[1 : rows + 1, :cols], "N", "N")
        got = cupy.asnumpy(dc)
        assert np.array_equal(np.isnan(got), np.isnan(ref)), "wrote outside the output window"
        ok = ~np.isnan(ref)
        scale = (np.abs(av) @ np.abs(bv)).max()
        assert np.abs(got[ok] - ref[ok]).max() <= 4 * av.shape[1] * np.finfo(dtype).eps * scale
        assert bool(copies) == copied
        for buf, ld in copies:
            assert buf.data.ptr % 16 == 0 and (ld * buf.itemsize) % 16 == 0


@pytest.mark.gpu
@gpu
def test_kernel_errors_are_raised_by_synchronize(be):
    import cupy

    a = cupy.ones((3, 4))
    c = cupy.zeros((3, 3))
    be.gemm(1.0, a, a, 0.0, c, "N", "N", be.compute)  # 3x4 @ 3x4: wrong shapes
    with pytest.raises(ValueError, match="gemm shapes"):
        be.synchronize()
    be.gemm(1.0, a, a, 0.0, c, "N", "T", be.compute)
    be.synchronize()
    np.testing.assert_array_equal(be.asnumpy(c), np.full((3, 3), 4.0))
    with pytest.raises(TypeError):
        be.gemm(1j, a, a, 0.0, c, "N", "T", be.compute)
        be.synchronize()


# -- operators: the GPU backend against the CPU backend on the same processes ---------------
_CPU_GRIDS: dict[tuple[int, int], bm.ProcessGrid] = {}
OP_N, OP_K, OP_BLOCK = 37, 23, 8


def _cpu_twin(grid):
    """A CPU-backend grid of ``grid``'s shape over the same processes (one per shape)."""
    if grid.shape not in _CPU_GRIDS:
        _CPU_GRIDS[grid.shape] = bm.ProcessGrid(*grid.shape, backend="cpu")
    return _CPU_GRIDS[grid.shape]


# name -> (call on A, B (n x k) and T (lower triangular n x n), inner dimension of the bound,
#          |.|-scale of the exact result from the NumPy operands)
OPERATORS = {
    "gemm": (
        lambda A, B, T: linalg.gemm(A, B, trans_b="T"),
        OP_K,
        lambda a, b, t: np.abs(a) @ np.abs(b).T,
    ),
    "symm": (
        lambda A, B, T: linalg.symm(T, A),
        OP_N,
        lambda a, b, t: np.abs(sym_from(t, True)) @ np.abs(a),
    ),
    "syrk": (lambda A, B, T: linalg.syrk(A), OP_K, lambda a, b, t: np.abs(a) @ np.abs(a).T),
    "syr2k": (
        lambda A, B, T: linalg.syr2k(A, B),
        2 * OP_K,
        lambda a, b, t: np.abs(a) @ np.abs(b).T + np.abs(b) @ np.abs(a).T,
    ),
    "trmm": (
        lambda A, B, T: linalg.trmm(T, A),
        OP_N,
        lambda a, b, t: np.abs(np.tril(t)) @ np.abs(a),
    ),
    "trsm": (lambda A, B, T: linalg.trsm(T, A), None, None),
}


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_operators_match_cpu_backend(grid, name, dtype):
    """Each distributed operator on GPU tiles gives the CPU backend's result on the same inputs
    to rounding: both are within C k eps |exact| of the exact result, so they differ by at most
    twice that (TRSM: the componentwise forward bound |T^-1| |T| |X| of a backward-stable
    solve)."""
    n, k = OP_N, OP_K
    rng = np.random.default_rng(zlib.crc32(f"{name}{np.dtype(dtype).name}".encode()))
    a, b = random_matrix(rng, (n, k), dtype), random_matrix(rng, (n, k), dtype)
    t = np.asarray(np.tril(random_matrix(rng, (n, n), dtype)) / n + 2 * np.eye(n), dtype)
    call, inner, scale_of = OPERATORS[name]
    results = []
    for g in (grid, _cpu_twin(grid)):
        A, B, T = (bm.from_numpy(x, block=OP_BLOCK, grid=g) for x in (a, b, t))
        out = call(A, B, T).to_numpy()
        results.append(np.tril(out) if name in ("syrk", "syr2k") else out)
    got_gpu, got_cpu = results
    assert np.isfinite(got_gpu).all() and np.isfinite(got_cpu).all()
    if name == "trsm":
        tl = np.tril(t).astype(np.complex128)
        scale, inner = np.abs(np.linalg.inv(tl)) @ np.abs(tl) @ np.abs(got_cpu), n
    else:
        scale = scale_of(a, b, t)
        scale = np.tril(scale) if name in ("syrk", "syr2k") else scale
    assert_within_bound(got_gpu, got_cpu, scale, 2 * inner, dtype, f"{name}: GPU vs CPU backend")
