"""The backend interface: array module, symmetric memory, local BLAS3, and a one-sided,
stream-ordered transport.

Every distributed algorithm in :mod:`blasmp_array.ops` is written once against this interface;
``backends/cpu.py`` (NumPy + SciPy BLAS + MPI-3 RMA) and ``backends/gpu.py`` (CuPy + cuBLAS +
NVSHMEM) implement it. Backends never import ``ops``.

Execution model
---------------
A backend owns two *streams*: ``compute`` and ``comm``. Every method that takes a ``stream``
argument is *stream-ordered*: it is enqueued on that stream and returns at once; operations of
one stream run in the order they were enqueued, operations of different streams run
concurrently. Ordering across streams is expressed with events (``record_event`` /
``wait_event``) and, across processes, with signals. ``synchronize()`` blocks the host until
both streams are drained and re-raises the first error any stream hit.

On the GPU a stream is a CUDA stream. On the CPU a stream is a worker thread consuming a FIFO
queue of closures, so the two streams truly overlap (BLAS releases the GIL).

Symmetric memory and signals
----------------------------
``alloc_symmetric`` and ``alloc_signals`` are collective over the backend's communicator and
return an object of the same shape on every process, addressable remotely by process rank
("PE"). Signals are ``uint64`` words, zero-initialised, updated with ``'set'`` or ``'add'``.

* ``put(dst, dst_offset, src, pe, stream)``: copy the contiguous array ``src`` into the flat
  element range ``[dst_offset, dst_offset + src.size)`` of ``dst`` on ``pe``.
* ``put_signal(..., sig, index, value, op)``: the same, then update signal ``index`` of ``sig``
  on ``pe``; the signal becomes visible only after the data (NVSHMEM's put-with-signal).
* ``signal_op(sig, index, value, pe, op, stream)``: update a remote (or local) signal.
* ``signal_wait(sig, index, value, stream, what=...)``: block the *stream* until the local
  signal word is ``>= value``. It never hangs forever: after ``timeout`` seconds the stream fails
  with :class:`SignalTimeoutError` naming ``what`` (operator and step), the signal, the value
  waited for, the value seen and the expected peer.
* ``quiet(stream)``: all puts issued on ``stream`` so far are complete at their targets.
* ``barrier()``: host-blocking barrier of all processes (drains both streams first).

Host collectives (``allreduce``, ``bcast``, ``alltoallv``, ...) are blocking and used for set-up,
reductions and redistribution, never inside a pipeline.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .._local_views import as_local_view
from ._host_copy import assign
from ._staging import HostCopier, copy_threads

__all__ = [
    "Backend",
    "SignalTimeoutError",
    "Stream",
    "Event",
    "SymmetricBuffer",
    "SignalSet",
    "env_flag",
]


def env_flag(name: str, env: Mapping[str, str] | None = None) -> bool:
    """Whether the environment variable ``name`` is set to ``1``, ``true`` or ``yes`` (any
    case): the one spelling of an on/off switch (``BLASMP_NO_ABORT``, ...)."""
    value = (os.environ if env is None else env).get(name, "")
    return value.strip().lower() in ("1", "true", "yes")


DEFAULT_SIGNAL_TIMEOUT = 60.0


class SignalTimeoutError(RuntimeError):
    """A wait on a signal did not complete in time (a deadlock or a lost message)."""


class Stream(abc.ABC):
    """An ordered queue of work (a CUDA stream, or a worker thread on the CPU)."""

    name: str


class Event:  # noqa: B024 (a marker type: each backend defines its own events)
    """A point in a stream's order that another stream (or the host) can wait for."""


class SymmetricBuffer:
    """A flat buffer of ``size`` elements of ``dtype`` allocated on every process.

    ``array`` is this process's local part (a 1-D NumPy or CuPy array). Remote processes address
    it through the backend's transport with element offsets.
    """

    def __init__(self, array: Any, handle: Any = None, name: str = "") -> None:
        self.array = array
        self.handle = handle
        self.name = name

    @property
    def size(self) -> int:
        return int(self.array.size)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.array.dtype)

    def view(self, shape: tuple[int, ...], offset: int = 0) -> Any:
        """A C-ordered view of ``prod(shape)`` elements starting at element ``offset``."""
        count = int(np.prod(shape))
        return self.array[offset : offset + count].reshape(shape)


class SignalSet:
    """``count`` uint64 signal words allocated on every process, zero-initialised."""

    def __init__(self, count: int, array: Any, handle: Any = None, name: str = "") -> None:
        self.count = count
        self.array = array
        self.handle = handle
        self.name = name


class Backend(abc.ABC):
    """Interface that every backend implements (see the module docstring)."""

    #: ``'cpu'`` or ``'gpu'``
    name: str
    #: the array module of local data (``numpy`` or ``cupy``)
    xp: Any
    #: the MPI communicator of all processes of the grid
    comm: Any
    rank: int
    size: int
    compute: Stream
    comm_stream: Stream
    signal_timeout: float = DEFAULT_SIGNAL_TIMEOUT
    #: True where element-wise kernels are compiled and loaded on first use, and loading one
    #: waits for the device (CuPy): operators then warm them before a pipeline starts
    #: (``ops/engine/_warmup.py``)
    jit_kernels: bool = False
    #: True where work enqueued on the comm stream runs beside the compute stream's without
    #: taking its resources (a GPU: a few SMs beside a GEMM); False where both streams are host
    #: threads sharing the cores with the BLAS (the CPU backend). Operators that could put
    #: computation on the comm stream (LU's panel factorisation) keep it on compute otherwise.
    concurrent_streams: bool = False
    #: True where :meth:`geqrt` exists: a QR panel factored with its compact-WY ``T`` in one
    #: recursive, BLAS3 call (LAPACK ``xgeqrt``; about 3x ``xgeqrf`` on a 2048 x 256 panel on
    #: one core). cuSOLVER has none: the GPU forms ``T`` after ``geqrf``
    #: (ops/lapack/_householder.py).
    has_geqrt: bool = False
    #: the triangle (``'L'`` or ``'U'``) of a C-ordered matrix that this backend's Cholesky
    #: (``potrf`` and the TRSM/SYRK of a recursive factorisation) computes fastest, or None when
    #: both run alike. The GPU's is ``'U'``: cuSOLVER is column-major, and the upper factor of a
    #: C-ordered matrix is its lower one (one H200, n = 16384: 44.2 ms for the upper factor,
    #: 59.5 ms for the lower one). One process then computes a lower factor as the upper factor
    #: of the conjugate transpose (``ops/lapack/cholesky.py``).
    potrf_fast_uplo: str | None = None
    #: the BLAS threads per rank chosen when the backend was created
    #: (:class:`._blas_threads.BlasThreads`; see ``backends/_blas_threads.py``)
    blas_threads: Any = None

    # -- memory ---------------------------------------------------------------------------
    @abc.abstractmethod
    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """Uninitialised local array (for local tiles; collective on the GPU backend)."""

    @abc.abstractmethod
    def alloc_symmetric(self, size: int, dtype: Any, name: str = "") -> SymmetricBuffer:
        """Collectively allocate a flat symmetric buffer of ``size`` elements."""

    @abc.abstractmethod
    def alloc_signals(self, count: int, name: str = "") -> SignalSet:
        """Collectively allocate ``count`` zeroed uint64 signal words."""

    @abc.abstractmethod
    def free(self, obj: SymmetricBuffer | SignalSet) -> None:
        """Collectively release a symmetric buffer or signal set (drains the streams first)."""

    def asnumpy(self, a: Any) -> np.ndarray:
        """Copy a local array to host memory (identity on the CPU backend)."""
        return np.asarray(a)

    def asarray(self, a: Any, dtype: Any = None) -> Any:
        """Move a host array to the backend's memory."""
        return self.xp.asarray(a, dtype=dtype)

    def copy_local(self, out: Any, src: Any, conjugate: bool = False) -> None:
        """``out[...] = src`` (``conj(src)`` where asked and complex) for local matrices of one
        shape, ``src`` of any strides (``x.T`` of a C-ordered ``x``: a transposing copy), on the
        array module's current stream: the one copy of the one-process transpose and
        redistribution. Here the host's (``?omatcopy`` where it transposes,
        ``_host_copy.assign``)."""
        assign(out, src, conjugate)

    # -- host staging (NumPy in and out of local matrices) -----------------------------------
    #: processes of this node sharing its cores (set by the backends; sizes the copy threads)
    ranks_on_node: int = 1
    #: True where local arrays are host (NumPy) memory: host messages go straight from them
    host_resident: bool = False
    _host_copier: HostCopier | None = None

    @property
    def host_copier(self) -> HostCopier:
        """The host copy threads of this process (``backends/_staging.py``), created on first
        use: :func:`~._staging.copy_threads` threads, or as many as the node gives one process
        for the copies of ``from_host``/``to_host`` with ``all_cores=True``."""
        if self._host_copier is None:
            self._host_copier = HostCopier(copy_threads(self.ranks_on_node), copy_threads(1))
        return self._host_copier

    def from_host(self, src: Any, out: Any, all_cores: bool = False) -> None:
        """``out[...] = src``: fill a local array from host memory.

        ``out`` is a 2-D backend array (C-ordered on a device backend). ``src`` is a 2-D NumPy
        array of ``out.shape`` (any strides) or a :class:`~blasmp_array._local_views.LocalView`
        (a process's local matrix inside a global host matrix); it is cast to ``out.dtype``
        as ``astype`` does. Host copies run on :attr:`host_copier`'s threads (all the node's
        cores with ``all_cores``: the other ranks of the node wait meanwhile); a device backend
        streams through reusable pinned buffers. Returns when ``out`` holds the data for any
        later work (host or stream-ordered).
        """
        view = as_local_view(src)
        if tuple(out.shape) != view.shape:
            raise ValueError(f"from_host: source of shape {view.shape} for a {out.shape} array")
        if view.shape[0]:
            with self.host_copier.on_all_cores(all_cores):
                self.host_copier.read(view, 0, view.shape[0], out)

    def to_host(
        self, a: Any, out: Any = None, conjugate: bool = False, all_cores: bool = False
    ) -> Any:
        """Copy a 2-D local array to host memory; return the host copy.

        ``out``: ``None`` (a new C-ordered NumPy array), a 2-D NumPy array of ``a.shape`` (any
        strides), or a :class:`~blasmp_array._local_views.LocalView` whose global matrix
        receives the data (then that global matrix is returned). ``conjugate`` writes the
        complex conjugate; ``all_cores`` as in :meth:`from_host`. Waits for the work enqueued
        so far that writes ``a``.
        """
        if out is None:
            out = np.empty(tuple(a.shape), dtype=a.dtype)
        view = as_local_view(out)
        if tuple(a.shape) != view.shape:
            raise ValueError(f"to_host: a {a.shape} array into a destination of {view.shape}")
        if view.shape[0]:
            with self.host_copier.on_all_cores(all_cores):
                self.host_copier.write(view, 0, view.shape[0], a, conjugate)
        return view.glob

    # -- streams and events ---------------------------------------------------------------
    @abc.abstractmethod
    def record_event(self, stream: Stream) -> Event:
        """An event completed once all work enqueued so far on ``stream`` has run."""

    @abc.abstractmethod
    def wait_event(self, stream: Stream, event: Event) -> None:
        """Make later work on ``stream`` wait for ``event``."""

    def host_wait(self, event: Event) -> None:
        """Block the host until ``event`` is reached, without draining the streams' later work
        (e.g. read a result one stream produced while another keeps computing). Errors stay
        with their stream and are raised by :meth:`synchronize`. The default drains both
        streams (correct, without the overlap)."""
        self.synchronize()

    @abc.abstractmethod
    def launch(self, stream: Stream, fn: Callable[..., Any], *args: Any) -> None:
        """Enqueue ``fn(*args)`` (local array work, e.g. a pack or an xp expression)."""

    @abc.abstractmethod
    def synchronize(self) -> None:
        """Block until both streams are drained; re-raise the first error a stream hit."""

    def begin(self) -> None:  # noqa: B027 (optional hook, no-op by default)
        """Order both streams after host/default-stream work done before an operator."""

    # -- tracing (used by blasmp_array.trace only while a trace is active) -----------------
    def stamp(self, stream: Stream, callback: Callable[[float], Any]) -> None:
        """Timestamp the point ``stream`` has reached: ``callback(t)`` gets the time in
        ``time.perf_counter()`` seconds at which the stream *executes* this point.

        The default enqueues a closure that reads the clock, which is exact where streams are
        host threads (CPU). A device backend overrides it: record an event on ``stream`` and
        call ``callback`` later from :meth:`flush_stamps`.
        """
        import time

        self.launch(stream, lambda: callback(time.perf_counter()))

    def flush_stamps(self) -> None:
        """Deliver the timestamps of :meth:`stamp` still pending (called after
        :meth:`synchronize`); the default has none pending."""
        return None

    def poll_stamps(self) -> None:
        """Deliver, without waiting, the pending timestamps whose point the stream has already
        passed; keep the others pending (used after a timeout, when a stream may be stuck).
        The default has none pending."""
        return None

    # -- one-sided transport (stream-ordered) ---------------------------------------------
    @abc.abstractmethod
    def put(self, dst: SymmetricBuffer, dst_offset: int, src: Any, pe: int, stream: Stream) -> None:
        """Copy contiguous ``src`` into ``dst[dst_offset : dst_offset + src.size]`` on ``pe``."""

    @abc.abstractmethod
    def put_signal(
        self,
        dst: SymmetricBuffer,
        dst_offset: int,
        src: Any,
        pe: int,
        sig: SignalSet,
        index: int,
        value: int,
        op: str,
        stream: Stream,
    ) -> None:
        """``put``, then update signal ``sig[index]`` on ``pe`` (``op`` is 'set' or 'add')."""

    @abc.abstractmethod
    def signal_op(
        self, sig: SignalSet, index: int, value: int, pe: int, op: str, stream: Stream
    ) -> None:
        """Update signal ``sig[index]`` on ``pe`` with ``op`` ('set' or 'add')."""

    @abc.abstractmethod
    def signal_wait(
        self,
        sig: SignalSet,
        index: int,
        value: int,
        stream: Stream,
        what: str = "",
        peer: int | None = None,
    ) -> None:
        """Block ``stream`` until local ``sig[index] >= value`` (timeout -> SignalTimeoutError)."""

    @abc.abstractmethod
    def quiet(self, stream: Stream) -> None:
        """Complete every put issued on ``stream`` so far."""

    @abc.abstractmethod
    def barrier(self) -> None:
        """Host barrier over all processes (after draining the streams)."""

    def device_key(self) -> Any:
        """What names the device this process computes on: processes with equal keys share
        one (several ranks on one GPU under MPS). By default every process has its own
        (the CPU backend: each rank computes on its own cores)."""
        return ("process", self.rank)

    def device_bytes_free(self) -> int | None:
        """Bytes this process could still allocate on its device for local work arrays, or
        None where that is not tracked (host memory: the CPU backend)."""
        return None

    # -- host collectives (blocking; set-up, reductions, redistribution) -------------------
    @abc.abstractmethod
    def allreduce(self, value: Any, op: str = "sum") -> Any:
        """Reduce a Python scalar or small host array over all processes ('sum','max','min')."""

    @abc.abstractmethod
    def bcast(self, obj: Any, root: int = 0) -> Any:
        """Broadcast a picklable Python object from ``root``."""

    @abc.abstractmethod
    def allgather(self, obj: Any) -> list[Any]:
        """Gather a picklable Python object from every process onto every process."""

    @abc.abstractmethod
    def allgather_array(self, send: np.ndarray, counts: Sequence[int]) -> np.ndarray:
        """Gather the 1-D host arrays of every process, ``counts[p]`` elements from process ``p``
        (the same ``counts`` and dtype on every rank), onto every process: their concatenation
        in rank order. One typed ``Allgatherv``: no pickling (for the ``O(n)`` pieces of the
        vector paths, where :meth:`allgather`'s pickles cost about twice the message)."""

    def solve_local(self, a: Any, b: Any) -> tuple[Any, int] | None:
        """``a^{-1} b`` on this process's own ``n x n`` ``a`` and ``n x k`` ``b`` by an LU with
        partial pivoting, waited for: ``(x, -1)``, or ``(None, j)`` when ``a`` is exactly
        singular (a zero pivot in column ``j`` of the factorization used). None where the
        backend has no one-call solve (the caller factors with :meth:`getrf` instead)."""
        return None

    @abc.abstractmethod
    def run_on_root(self, fn: Callable[[], Any], root: int = 0) -> Any:
        """``fn()`` on process ``root`` alone (its result there, None elsewhere), the others
        waiting idle while the root uses their share of the node; ``fn``'s exception raised on
        every process. For a one-process LAPACK call on a gathered matrix."""

    @abc.abstractmethod
    def alltoallv(self, send: Sequence[Any], recv: Sequence[Any]) -> None:
        """Exchange: ``send[p]`` (contiguous 1-D, maybe empty) goes to process ``p`` and lands in
        ``recv[p]`` (preallocated 1-D of the matching size). Messages over 2**31 elements are
        split. Arrays are backend arrays (host or device)."""

    # -- local BLAS3 (stream-ordered on ``stream``); all matrices are 2-D local arrays ---------
    # trans arguments are 'N', 'T' or 'C'; side 'L'/'R'; uplo 'L'/'U'; diag 'N'/'U'.
    @abc.abstractmethod
    def gemm(
        self,
        alpha: Any,
        a: Any,
        b: Any,
        beta: Any,
        c: Any,
        trans_a: str,
        trans_b: str,
        stream: Stream,
    ) -> None:
        """``c := alpha op(a) op(b) + beta c`` in place (c may be a strided 2-D view)."""

    @abc.abstractmethod
    def syrk(
        self, alpha: Any, a: Any, beta: Any, c: Any, uplo: str, trans: str, stream: Stream
    ) -> None:
        """``c := alpha op(a) op(a)^T + beta c`` on the ``uplo`` triangle only ('C' -> HERK)."""

    @abc.abstractmethod
    def syr2k(
        self,
        alpha: Any,
        a: Any,
        b: Any,
        beta: Any,
        c: Any,
        uplo: str,
        trans: str,
        stream: Stream,
    ) -> None:
        """``c := alpha (op(a) op(b)^T + op(b) op(a)^T) + beta c`` on ``uplo`` ('C' -> HER2K)."""

    @abc.abstractmethod
    def trmm(
        self,
        alpha: Any,
        a: Any,
        b: Any,
        side: str,
        uplo: str,
        trans: str,
        diag: str,
        stream: Stream,
        out: Any = None,
    ) -> None:
        """``b := alpha op(a) b`` (side 'L') or ``alpha b op(a)`` (side 'R'), in place; with
        ``out`` (shaped like ``b``, not overlapping it) the product goes to ``out`` and ``b`` is
        only read (cuBLAS's out-of-place TRMM: on one H200 at n = 4096 ``bm.linalg.trmm`` took
        1.58 ms with it, 2.56 ms in place on a copy; the same at n = 16384)."""

    @abc.abstractmethod
    def trsm(
        self,
        alpha: Any,
        a: Any,
        b: Any,
        side: str,
        uplo: str,
        trans: str,
        diag: str,
        stream: Stream,
    ) -> None:
        """Solve ``op(a) x = alpha b`` (side 'L') or ``x op(a) = alpha b`` (side 'R'); x -> b."""

    # -- local LAPACK (stream-ordered on ``stream``) ------------------------------------------
    def potrf(self, a: Any, uplo: str, info: Any, stream: Stream) -> None:
        """Cholesky factorisation of the Hermitian positive definite ``a`` in place (LAPACK
        ``xpotrf``): ``a = L L^H`` (``uplo`` 'L') or ``U^H U`` ('U'). Only the ``uplo`` triangle
        of ``a`` is read and written. ``info`` is a one-element ``int32`` backend array that
        receives LAPACK's INFO on the stream (``0``, or ``j > 0`` when the leading minor of
        order ``j`` is not positive definite: the factor is then incomplete); the host sees it
        only after a synchronisation, so a failure never raises inside a pipeline."""
        raise NotImplementedError(f"{type(self).__name__} has no local potrf")

    def getrf(self, a: Any, ipiv: Any, info: Any, stream: Stream) -> None:
        """LU factorisation with partial pivoting of the ``m x k`` ``a`` in place (LAPACK
        ``xgetrf``): ``a = P L U`` with ``L`` unit lower (stored below the diagonal) and ``U``
        upper. ``ipiv`` (an ``int32`` backend array of ``min(m, k)`` entries) receives the
        0-based row interchanges (row ``i`` was swapped with row ``ipiv[i]``, in order),
        ``info`` (one ``int32`` element) LAPACK's INFO: ``0``, or ``j > 0`` when ``U[j - 1,
        j - 1]`` is exactly zero (the factorisation is completed anyway). Both are written on
        the stream; the host sees them only after a synchronisation."""
        raise NotImplementedError(f"{type(self).__name__} has no local getrf")

    def modified_lu(self, a: Any, d: Any, stream: Stream) -> None:
        """The LU without pivoting of the ``h x w`` ``a`` (``h >= w``) in place, its top
        ``w x w`` shifted by the signs it chooses (LAPACK ``xLAORHR_COL_GETRFNP2``, the leaf of
        Householder reconstruction): column by column ``d_j = -sign(Re a_jj)`` (``+1`` for
        ``Re a_jj < 0``), ``u_jj = a_jj - d_j`` (so ``|u_jj| >= 1`` where the columns of ``a``
        are orthonormal), the column below divided by ``u_jj`` and the rank-1 update of the
        rest. Writes ``L`` (unit, below the diagonal) and ``U`` over ``a``, ``d`` (``w``
        elements of ``a``'s dtype, values +-1) on the stream."""
        raise NotImplementedError(f"{type(self).__name__} has no modified_lu")

    # -- random construction ------------------------------------------------------------------
    @abc.abstractmethod
    def random_fill(
        self,
        out: Any,
        layout: Any,
        coords: tuple[int, int],
        key: tuple[int, int],
        dist: str,
        low: float = 0.0,
        high: float = 1.0,
        local_rows: tuple[int, int] | None = None,
    ) -> None:
        """Fill ``out``, the local matrix of process ``coords`` in the block-cyclic ``layout``
        (a :class:`~blasmp_array.layout.BlockCyclicLayout`), with the random values of
        :mod:`blasmp_array.random`: Philox4x64-10 keyed by ``key`` and the global position of
        each element (the contract is ``blasmp_array/_philox.py``'s docstring and
        ``docs/random.md``). ``dist`` is ``'uniform'`` (``low + (high - low) * u``, ``u`` in
        ``[0, 1)``) or ``'normal'`` (standard normal; standard complex normal for a complex
        ``out``). ``local_rows=(r0, r1)`` fills only local rows ``r0:r1``.

        Uniform values are bit-identical on every backend; normal values agree to within a few
        ulps (each backend's ``log1p``, ``sin`` and ``cos``). The fill is ordered like the
        constructors' ``out[...] = value``: done on the host thread (CPU), or enqueued on the
        current CuPy stream (GPU), which the backend's streams are ordered after. Collective
        the first time it is called on a backend (the GPU backend loads its kernel then): every
        process calls it, also with an empty ``out``."""

    def geqrf(self, a: Any, tau: Any, info: Any, stream: Stream) -> None:
        """QR factorisation of the ``m x k`` ``a`` in place (LAPACK ``xgeqrf``): ``R`` on and
        above the diagonal, the Householder vectors ``v_i`` (unit first entry not stored) below
        it, ``a = H_0 H_1 ... H_{p-1} R`` with ``H_i = I - tau_i v_i v_i^H``, ``p = min(m, k)``.
        ``tau`` (a backend array of ``a``'s dtype, ``p`` entries) receives the scalars,
        ``info`` (one ``int32`` element) LAPACK's INFO (``0``; negative: an illegal argument).
        Both are written on the stream."""
        raise NotImplementedError(f"{type(self).__name__} has no local geqrf")

    def geqrt(self, a: Any, tau: Any, t: Any, info: Any, stream: Stream) -> None:
        """:meth:`geqrf` of the ``m x k`` ``a`` in place, also writing the upper triangular
        ``T`` (``p x p``, ``p = min(m, k)``) of ``H_0 ... H_{p-1} = I - V T V^H`` (LAPACK
        ``xgeqrt`` with one block of width ``p``: its recursive ``xgeqrt3``); ``tau`` receives
        ``T``'s diagonal. Only where :attr:`has_geqrt`."""
        raise NotImplementedError(f"{type(self).__name__} has no local geqrt")

    def orgqr(self, a: Any, tau: Any, info: Any, stream: Stream) -> None:
        """Form, in place, the ``m x n`` matrix ``Q`` of the first ``n`` columns of
        ``H_0 ... H_{p-1}`` (LAPACK ``xorgqr``/``xungqr``), ``p = tau.size <= n <= m``: the
        first ``p`` columns of ``a`` hold the Householder vectors as :meth:`geqrf` left
        them (what lies on and above their diagonal is not read)."""
        raise NotImplementedError(f"{type(self).__name__} has no local orgqr")

    def ormqr(
        self, side: str, trans: str, a: Any, tau: Any, c: Any, info: Any, stream: Stream
    ) -> None:
        """``c := op(Q) c`` (``side`` 'L') or ``c op(Q)`` ('R') in place, ``Q = H_0 ... H_{p-1}``
        from the Householder vectors in the first ``p = tau.size`` columns of ``a`` as
        :meth:`geqrf` left them (LAPACK ``xormqr``/``xunmqr``); ``trans`` 'N', or 'C' for
        ``Q^H`` ('T' is read as 'C' for real dtypes). ``a`` has ``c``'s rows (side 'L') or
        columns ('R')."""
        raise NotImplementedError(f"{type(self).__name__} has no local ormqr")

    def eigh_local(
        self,
        a: Any,
        lower: bool,
        vectors: bool,
        subset_by_index: tuple[int, int] | None = None,
        subset_by_value: tuple[float, float] | None = None,
    ) -> tuple[Any, Any]:
        """Eigenvalues (real, ascending) and, with ``vectors``, eigenvectors (columns) of the
        Hermitian ``n x n`` local matrix ``a``, read from its lower (``lower``) or upper
        triangle only (LAPACK ``xsyevd``/``xheevd``; a subset: ``subset_by_index``
        ``(lo, hi)`` inclusive, or the eigenvalues in the half-open ``subset_by_value``
        ``(vl, vu]``). Returns backend arrays ``(w, v)``, ``v`` None without ``vectors``.
        Synchronous (call it after :meth:`synchronize`); ``a`` is not written."""
        raise NotImplementedError(f"{type(self).__name__} has no local eigh")

    #: the order (the smaller dimension) from which ``svd(method='auto')`` of a matrix that is
    #: not tall computes the SVD through the polar decomposition, where QDWH's GEMMs, QRs and
    #: Choleskys beat the backend's one-call SVD; None: never (the CPU, whose LAPACK ``xgesdd``
    #: does a third of the flops; ``docs/svd.md``)
    polar_svd_n: int | None = None

    #: whether ``eigvalsh(method='auto')`` on several processes gathers the matrix at every
    #: order (the root's one-process route) rather than only up to ``eigh.GATHER_N``: the GPU,
    #: whose root runs the device two-stage method (4 ranks on one H100, n = 16384: 1.73 s
    #: gathered against more than 40 s distributed; ``docs/eigh.md``)
    eigvalsh_always_gathered: bool = False

    #: whether the tall-skinny QR's passes on whole rows run as GEMMs (``ops.lapack._cholqr``):
    #: the Gram matrix as a batched GEMM of row chunks and ``X R^{-1}`` as ``X`` times the
    #: explicit ``R^{-1}``: the GPU, whose SYRK and TRSM with a 256-column operand run far
    #: below its GEMM rate (one H100, 1048576 x 256: ``docs/qr.md``); the CPU's BLAS runs its
    #: SYRK and TRSM near the GEMM rate, and the inverse would double the flops
    cholqr_gemms: bool = False

    def band_eig_width(self, dtype: Any, vectors: bool) -> int | None:
        """The widest band whose :meth:`eig_banded` of ``dtype`` (with ``vectors``) runs on
        the device, or None where it runs on the host (the two-stage eigensolver then keeps
        its block as the bandwidth)."""
        return None

    def band_solve_times(self) -> dict[str, float]:
        """Seconds per part of the last :meth:`eig_banded` where the backend times its parts
        (the GPU's chase and bisection), else empty."""
        return {}

    def eig_banded(
        self,
        band: np.ndarray,
        vectors: bool,
        subset_by_index: tuple[int, int] | None = None,
        subset_by_value: tuple[float, float] | None = None,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Eigenvalues (ascending) and, with ``vectors``, eigenvectors of the Hermitian band
        matrix in LAPACK's lower band storage ``band[i - j, j] = B[i, j]`` (a host array,
        overwritten), on the host: LAPACK ``xsbevd``/``xhbevd`` (``xsbevx``/``xhbevx`` for a
        subset, as :meth:`eigh_local`'s). Returns host arrays; the same input gives the same
        bytes on every process. Synchronous."""
        from scipy.linalg import eig_banded

        select: str = "a"
        rng: tuple[float, float] | None = None
        if subset_by_index is not None:
            select, rng = "i", subset_by_index
        elif subset_by_value is not None:
            select, rng = "v", subset_by_value
        out = eig_banded(
            band,
            lower=True,
            eigvals_only=not vectors,
            overwrite_a_band=True,
            select=select,
            select_range=rng,
            check_finite=False,
        )
        if vectors:
            return out[0], out[1]
        return out, None

    def eig_banded_local(
        self,
        band: np.ndarray,
        vectors: bool,
        subset_by_index: tuple[int, int] | None = None,
        subset_by_value: tuple[float, float] | None = None,
    ) -> tuple[np.ndarray, Any]:
        """:meth:`eig_banded` with the eigenvectors as a local (backend) array: on a device
        they stay there where the band is solved there. Here the host's call, its ``Z`` moved
        to the backend's array module."""
        w, z = self.eig_banded(band, vectors, subset_by_index, subset_by_value)
        return w, (None if z is None else self.asarray(z))

    def free_all(self) -> None:  # noqa: B027 (optional hook, no-op by default)
        """Release backend resources at exit (collective)."""

    # -- the SVD's local LAPACK ------------------------------------------------------------
    def gesdd(self, a: Any, full_matrices: bool, compute_uv: bool, driver: str = "gesdd") -> Any:
        """The SVD ``a = U diag(s) V^H`` of the local ``m x n`` matrix ``a`` (a backend array,
        not written): ``(U, s, Vh)`` as backend arrays (``U`` ``m x m`` or ``m x k``, ``Vh``
        ``n x n`` or ``k x n``, ``k = min(m, n)``; ``s`` real, descending), or ``s`` alone
        without ``compute_uv``. ``driver`` 'gesdd' (divide and conquer; LAPACK ``xgesdd``,
        falling back to ``xgesvd`` where it does not converge) or 'gesvd'. Runs at once, after
        the caller synchronised the streams; ``numpy.linalg.LinAlgError`` when no driver
        converges."""
        raise NotImplementedError(f"{type(self).__name__} has no local gesdd")

    def eigvalsh_banded(self, ab: np.ndarray) -> np.ndarray:
        """The eigenvalues (ascending, real) of the Hermitian band matrix held in LAPACK's upper
        band storage ``ab`` (a host array, ``ab[u + i - j, j] = A[i, j]`` for
        ``max(0, j - u) <= i <= j``), on the host (LAPACK ``xsbevd``/``xhbevd``: reduction to
        tridiagonal form by bulge chasing, ``O(n^2 u)`` flops, then a tridiagonal solver)."""
        from scipy.linalg import eig_banded

        return np.asarray(eig_banded(ab, lower=False, eigvals_only=True, check_finite=False))
