"""Distributed tests of the NumPy door: from_numpy / to_numpy on both routes (host MPI
messages of strided views; row panels over the device exchange), every root, dtype, view and
input layout, bit for bit against NumPy; the backends' host messages and row streams; the
staged (pinned-buffer) send and receive logic of the GPU backend driven on the CPU by a NumPy
"device"; and, marked ``gpu``, the pinned staging itself (run on every rank under mpiexec).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import blasmp_array as bm
from blasmp_array import creation
from blasmp_array._local_views import col_ranges, local_view
from blasmp_array.backends import _staging, gpu_available
from blasmp_array.backends._host_messages import message_tag
from blasmp_array.backends._staging import HostCopier, StagingPool, recv_staged, send_staged
from blasmp_array.layout import BlockCyclicLayout

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
ROUTES = ["host", "device"]
ON_GPU = os.environ.get("BLASMP_BACKEND") == "gpu" and gpu_available()
gpu = pytest.mark.skipif(not ON_GPU, reason="needs BLASMP_BACKEND=gpu and a usable GPU")

# (shape, block): block 1, 3, larger than the matrix, mb != nb, ragged, 1 x 1, empty
CASES = [
    ((7, 5), 1),
    ((13, 11), 3),
    ((9, 4), (100, 100)),
    ((20, 17), (3, 8)),
    ((1, 1), 1),
    ((0, 5), 2),
    ((6, 0), (2, 3)),
]


def _matrix(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def _assert_bits(got, want):
    """Bit-for-bit equality (dtype, shape and every byte; -0.0 differs from 0.0)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes()


def _check_gather(A, want, comm, roots):
    """A.to_numpy() on every rank and A.to_numpy(root=r) for each r equal ``want``."""
    _assert_bits(A.to_numpy(), want)
    for r in roots:
        got = A.to_numpy(root=r)
        if comm.rank == r:
            _assert_bits(got, want)
        else:
            assert got is None


@pytest.fixture(params=ROUTES)
def route(request, monkeypatch, grid):
    """Both routes of the scatter and the gather, on the backend under test."""
    monkeypatch.setitem(creation.ROUTE, grid.backend.name, request.param)
    return request.param


def _many_chunks(monkeypatch):
    """A few rows per staging chunk and per panel: many messages, DMAs and exchanges."""
    monkeypatch.setattr(_staging, "CHUNK_BYTES", 8)
    monkeypatch.setattr(creation, "PANEL_BYTES", 400)


@pytest.fixture(params=["one", "many"])
def chunks(request, monkeypatch):
    """Default staging chunks and panels, or :func:`_many_chunks`."""
    if request.param == "many":
        _many_chunks(monkeypatch)
    return request.param


@pytest.mark.parametrize(
    "chunking, dtype",
    [("one", d) for d in DTYPES] + [("many", np.float64), ("many", np.complex64)],
    ids=lambda x: x if isinstance(x, str) else np.dtype(x).name,
)
def test_roundtrip_every_root(grid, comm, route, monkeypatch, chunking, dtype):
    if chunking == "many":
        _many_chunks(monkeypatch)
    roots = sorted({0, comm.size - 1})
    for k, (shape, block) in enumerate(CASES):
        a = _matrix(shape, dtype, seed=k)
        A = bm.from_numpy(a, block=block, grid=grid)
        ref = a[np.ix_(A.layout.local_rows(grid.myrow), A.layout.local_cols(grid.mycol))]
        _assert_bits(A.backend.asnumpy(A._data), ref)
        _check_gather(A, a, comm, roots)
        for root in roots:
            B = bm.from_numpy(a if comm.rank == root else None, block=block, grid=grid, root=root)
            _assert_bits(B.backend.asnumpy(B._data), ref)
        _check_gather(B, a, comm, roots[:1])


def test_views_gather_as_viewed(grid, comm, route, chunks):
    a = _matrix((11, 14), np.complex128, seed=3)
    A = bm.from_numpy(a, block=(2, 5), grid=grid)
    roots = [comm.size - 1]
    _check_gather(A.T, a.T.copy(), comm, roots)
    _check_gather(A.conj(), a.conj(), comm, roots)
    _check_gather(A.H, a.conj().T.copy(), comm, roots)
    # window views, starting inside a block (copied first), and their transposes
    _check_gather(A[1:10, 3:13], a[1:10, 3:13].copy(), comm, roots)
    _check_gather(A[1:10, 3:13].H, a[1:10, 3:13].conj().T.copy(), comm, roots)
    r = _matrix((13, 9), np.float32, seed=4)
    R = bm.from_numpy(r, block=(4, 3), grid=grid)
    _check_gather(R.T, r.T.copy(), comm, [0])


def test_gather_with_preposted_receives(grid, comm, monkeypatch, chunks):
    """The host route of a backend whose local arrays are not host memory (the GPU's, for
    bools): to_numpy() posts every receive straight into place before sending."""
    monkeypatch.setattr(grid.backend, "host_resident", False)
    for k, (shape, block) in enumerate(CASES[:5]):
        a = _matrix(shape, np.complex64, seed=20 + k)
        A = bm.from_numpy(a, block=block, grid=grid)
        _assert_bits(A.to_numpy(), a)
        _assert_bits(A.H.to_numpy(), a.conj().T.copy())
    r = np.ascontiguousarray(a.real)
    R = bm.from_numpy(r, block=(2, 3), grid=grid)
    _assert_bits((R.T > 0).to_numpy(), r.T > 0)


def test_bool_arrays(grid, comm, route, chunks):
    a = _matrix((17, 10), np.float64, seed=6)
    A = bm.from_numpy(a, block=(3, 4), grid=grid)
    _check_gather(A > 0, a > 0, comm, sorted({0, comm.size - 1}))
    _check_gather((A > 0).T, (a > 0).T.copy(), comm, [0])


def test_input_layouts_and_conversion(grid, comm, route):
    a = _matrix((15, 12), np.float64, seed=7)
    inputs = {
        "fortran": np.asfortranarray(a),
        "strided": np.pad(a, 2)[2:-2, 2:-2],
        "every other": np.repeat(np.repeat(a, 2, axis=0), 3, axis=1)[::2, ::3],
        "reversed": a[::-1, ::-1].copy()[::-1, ::-1],
        "transposed": a.T.copy().T,
        "read-only broadcast": np.broadcast_to(a[3], a.shape),
    }
    for x in inputs.values():
        want = np.ascontiguousarray(x)
        for root in (None, comm.size - 1):
            given = x if root is None or comm.rank == root else None
            A = bm.from_numpy(given, block=(4, 5), grid=grid, root=root)
            _assert_bits(A.to_numpy(), want)
    ints = np.arange(12 * 7).reshape(12, 7)
    for root in (None, 0):
        A = bm.from_numpy(
            ints if root is None or comm.rank == 0 else None,
            block=3,
            grid=grid,
            root=root,
            dtype=np.complex64,
        )
        _assert_bits(A.to_numpy(), ints.astype(np.complex64))
    s = np.array([["1.5", "2"], ["3", "-4"]])
    _assert_bits(bm.from_numpy(s, grid=grid, dtype=np.float32).to_numpy(), s.astype(np.float32))


def test_inputs_are_not_modified(grid, comm, route):
    a = _matrix((10, 9), np.complex64, seed=8)
    keep = a.copy()
    A = bm.from_numpy(a, block=(3, 2), grid=grid)
    bm.from_numpy(a if comm.rank == 0 else None, block=(3, 2), grid=grid, root=0)
    A.H.to_numpy(root=0)
    _assert_bits(a, keep)


# -- the backends' host messages and row streams ------------------------------------------------
def test_views_messages_between_ranks(grid, comm):
    """Rank p sends its local matrix of a global matrix row chunk by row chunk and column run
    by column run; every other rank receives it into the strided views of its own copy."""
    be = grid.backend
    layout = BlockCyclicLayout((19, 23), (3, 4), grid.shape)
    a = _matrix(layout.shape, np.float64, seed=9)
    for p in range(comm.size):
        coords = grid.coords_of(p)
        local = a[np.ix_(layout.local_rows(coords[0]), layout.local_cols(coords[1]))].copy()
        chunks = [(0, 2), (2, local.shape[0])] if local.shape[0] > 2 else [(0, local.shape[0])]
        chunks = [c for c in chunks if c[1] > c[0]] if local.size else []
        dest = np.full(layout.shape, np.nan)
        reqs = []
        if comm.rank != p:
            view = local_view(dest, layout, *coords)
            parts = len(view.col_ranges)
            for k, (lo, hi) in enumerate(chunks):
                for j in range(parts):
                    reqs.append(be.post_recv(view.views(lo, hi, j), p, message_tag(k * parts + j)))
        else:
            others = [r for r in range(comm.size) if r != p]
            be.send_rows(local, chunks, col_ranges(layout, coords[1]), others)
        be.wait_requests(reqs)
        if comm.rank != p:
            mask = np.zeros(layout.shape, bool)
            mask[np.ix_(layout.local_rows(coords[0]), layout.local_cols(coords[1]))] = True
            np.testing.assert_array_equal(dest[mask], a[mask])
            assert np.isnan(dest[~mask]).all()


def test_empty_views_send_nothing(grid):
    be = grid.backend
    assert be.view_datatype([np.empty((0, 3))]) is None
    assert be.post_send([np.empty((2, 0))], 0, 0) is None
    be.wait_requests([None])


class _NumpyDevice:
    """A NumPy array standing in for a device array, with DMA calls and completion tokens."""

    def __init__(self, data):
        self.data = data
        self.inflight = set()

    def dma_in(self, lo, hi, rows):
        self.data[lo:hi] = rows
        self.inflight.add(id(rows))
        return id(rows)

    def dma_out(self, lo, hi, rows):
        rows[...] = self.data[lo:hi]
        self.inflight.add(id(rows))
        return id(rows)

    def wait(self, token):
        self.inflight.discard(token)


@pytest.mark.parametrize("nbytes", [8, 1 << 20])
def test_staged_row_streams(grid, comm, monkeypatch, nbytes):
    """The GPU backend's staged send/receive (two reused buffers, a DMA per chunk) between real
    ranks, with a NumPy array as the device: rank 0 sends its matrix to every other rank."""
    monkeypatch.setattr(_staging, "CHUNK_BYTES", nbytes)
    be = grid.backend
    a = _matrix((29, 6), np.complex64, seed=10)
    chunks = _staging.row_chunks(a.shape, a.itemsize)
    parts = [(0, 4), (4, 6)]
    pool = StagingPool(lambda n: np.empty(n, np.uint8))
    if comm.rank == 0:
        dev = _NumpyDevice(a.copy())

        def post_sends(k, rows):
            return [
                be.post_send([rows[:, c0:c1]], d, message_tag(k * len(parts) + j))
                for j, (c0, c1) in enumerate(parts)
                for d in range(1, comm.size)
            ]

        send_staged(chunks, 6, a.dtype, pool, dev.dma_out, dev.wait, post_sends, be.wait_requests)
    else:
        dev = _NumpyDevice(np.full(a.shape, np.nan, a.dtype))

        def post_recvs(k, rows):
            return [
                be.post_recv([rows[:, c0:c1]], 0, message_tag(k * len(parts) + j))
                for j, (c0, c1) in enumerate(parts)
            ]

        recv_staged(chunks, 6, a.dtype, pool, post_recvs, be.wait_requests, dev.dma_in, dev.wait)
        _assert_bits(dev.data, a)
    assert not dev.inflight
    assert pool.allocations == (2 if comm.size > 1 or comm.rank == 0 else 0)


def test_threaded_copies_on_the_cpu(grid, comm, monkeypatch):
    """from_numpy and to_numpy with the host copies split over several threads."""
    if grid.backend.name != "cpu":
        pytest.skip("the CPU backend's copier")
    monkeypatch.setattr(_staging, "MIN_SPLIT_BYTES", 64)
    monkeypatch.setattr(grid.backend, "_host_copier", HostCopier(3))
    a = _matrix((40, 31), np.float64, seed=11)
    A = bm.from_numpy(a, block=(3, 4), grid=grid)
    _assert_bits(A.to_numpy(), a)
    _assert_bits(A.T.to_numpy(), a.T.copy())
    grid.backend._host_copier.close()


# -- the GPU backend's pinned staging ----------------------------------------------------------
@gpu
def test_pinned_staging_is_reused_and_bounded(grid, comm, monkeypatch):
    be = grid.backend
    a = _matrix((300, 257), np.float64, seed=12)

    def transfers():
        for root in (None, 0):
            A = bm.from_numpy(
                a if root is None or comm.rank == 0 else None, block=(32, 64), grid=grid, root=root
            )
            _check_gather(A, a, comm, [0])
            _check_gather(A.T, a.T.copy(), comm, [comm.size - 1])

    monkeypatch.setattr(_staging, "CHUNK_BYTES", 1 << 16)  # forces many chunks
    transfers()  # pins the buffers if no earlier transfer did
    pool = be.pinned_staging().pool
    before, size = pool.allocations, pool.nbytes
    transfers()
    assert pool.allocations == before and pool.nbytes == size  # reused, nothing pinned again
    assert 0 < size <= 64 * 2**20  # two buffers of one chunk each (the default chunk at most)


@gpu
@pytest.mark.parametrize("dtype", DTYPES + [np.bool_], ids=lambda d: np.dtype(d).name)
def test_pinned_asarray_asnumpy(grid, dtype):
    import cupy

    from blasmp_array.backends import gpu as gpu_backend

    be = grid.backend
    a = _matrix((700, 400), np.float64, seed=13)
    a = (a > 0) if dtype == np.bool_ else a.astype(dtype)
    d = be.asarray(a)  # over PINNED_MIN_BYTES for every dtype but bool: the pinned path
    assert isinstance(d, cupy.ndarray)
    _assert_bits(cupy.asnumpy(d), a)
    _assert_bits(be.asnumpy(d), a)
    _assert_bits(be.asnumpy(d.T), a.T.copy())  # a strided device array
    out = np.empty((400, 700), a.dtype).T  # a strided host destination
    be.to_host(d, out)
    _assert_bits(out, a)
    pinned = a.nbytes >= gpu_backend.PINNED_MIN_BYTES
    f = be.asarray(np.asfortranarray(a), dtype=np.complex128 if dtype != np.bool_ else None)
    assert f.flags.f_contiguous or not pinned  # the order is kept, as cupy.asarray keeps it
    _assert_bits(cupy.asnumpy(f), a.astype(f.dtype))
    s = be.asarray(np.pad(a, 1)[1:-1, 1:-1])  # a strided host array
    _assert_bits(cupy.asnumpy(s), a)


def test_gather_to_backend_and_back(grid, comm, route, chunks):
    """``creation.gather_to_backend`` gives the root the whole matrix as viewed (transposes,
    conjugates, windows, integers) as one C-ordered array of the backend's module, None
    elsewhere; ``scatter_from_backend`` distributes such an array (any strides) into a new
    array, bit for bit, on both routes."""
    xp = grid.backend.xp
    root = comm.size - 1
    a = _matrix((11, 14), np.complex128, seed=8)
    A = bm.from_numpy(a, block=(2, 5), grid=grid)
    cases = [
        (A, a),
        (A.T, a.T),
        (A.H, a.conj().T),
        (A[1:10, 3:13], a[1:10, 3:13]),
        (A[1:10, 3:13].T, a[1:10, 3:13].T),
        (A[2:2, :], a[2:2, :]),
        (
            bm.from_numpy(np.arange(12).reshape(3, 4), block=2, grid=grid),
            np.arange(12).reshape(3, 4),
        ),
    ]
    for x, want in cases:
        got = creation.gather_to_backend(x, root=root)
        if comm.rank != root:
            assert got is None
            continue
        assert isinstance(got, xp.ndarray) and got.flags.c_contiguous
        _assert_bits(grid.backend.asnumpy(got), np.ascontiguousarray(want))
    for src, block in ((a, (3, 3)), (a.T, (4, 2)), (a[:, 1:12:2], (5, 1))):
        dev = grid.backend.asarray(src) if comm.rank == root else None
        B = creation.scatter_from_backend(dev, src.shape, block, grid, src.dtype, root=root)
        assert B.shape == src.shape and B.block == block and B.dtype == src.dtype
        _assert_bits(B.to_numpy(), np.ascontiguousarray(src))
    # the root's array must have the shape every rank names: the same error on every rank
    dev = grid.backend.asarray(a) if comm.rank == root else None
    with pytest.raises(ValueError, match="holds"):
        creation.scatter_from_backend(dev, (14, 11), (3, 3), grid, a.dtype, root=root)
