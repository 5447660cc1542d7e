"""Local BLAS3 of the GPU backend: cuBLAS (through ``nvmath.bindings.cublas``) on C-ordered CuPy
views, enqueued on a CUDA stream without host synchronisation.

Semantics are those of the CPU backend's ``_cpu_kernels`` (reference BLAS): ``beta == 0`` never
reads ``c``; SYRK/SYR2K write only the ``uplo`` triangle of ``c``; TRMM/TRSM read only the ``uplo``
triangle of ``a`` (without its diagonal when ``diag == 'U'``); ``trans == 'C'`` on a complex
SYRK/SYR2K is HERK/HER2K (``a^H a``; ``alpha a^H b + conj(alpha) b^H a``), which zeroes the
imaginary part of ``c``'s diagonal.

C order and cuBLAS's column-major order
---------------------------------------
A C-ordered ``m x n`` matrix with row stride ``ld`` is, read column-major, the ``n x m`` matrix
``X^T`` with leading dimension ``ld``. So every call is made on transposes:

* GEMM: ``C^T = op(B)^T op(A)^T``: swap the operands and the dimensions, keep the op characters.
* SYRK/HERK, SYR2K/HER2K: ``C^T`` is the same update with ``'N' <-> 'T'`` (``'N' <-> 'C'`` for the
  Hermitian ones) and the other triangle; HER2K also swaps ``a`` and ``b``.
* TRMM/TRSM: ``op(A) B = (B^T op(A)^T)^T``: the other side and the other triangle, same op.

Views whose rows are not unit-stride (or whose row stride is not a whole number of elements)
are copied into a contiguous temporary on the stream (and, for outputs, copied back).
"""

from __future__ import annotations

from typing import Any

import cupy
import numpy as np
from nvmath.bindings import cublas

from ._cpu_kernels import _scalar  # one rule for the scalars of both backends

__all__ = ["CublasKernels"]

_OP = {"N": int(cublas.Operation.N), "T": int(cublas.Operation.T), "C": int(cublas.Operation.C)}
_FILL = {"L": int(cublas.FillMode.LOWER), "U": int(cublas.FillMode.UPPER)}
_SIDE = {"L": int(cublas.SideMode.LEFT), "R": int(cublas.SideMode.RIGHT)}
_DIAG = {"N": int(cublas.DiagType.NON_UNIT), "U": int(cublas.DiagType.UNIT)}
_OTHER = {"L": "U", "U": "L"}
_OTHER_SIDE = {"L": "R", "R": "L"}
_PREFIX = {
    np.dtype(np.float32): "s",
    np.dtype(np.float64): "d",
    np.dtype(np.complex64): "c",
    np.dtype(np.complex128): "z",
}


#: ``cudaDataType`` of the real dtypes (CUDA_R_32F, CUDA_R_64F), for cuSOLVER's 64-bit API
_CUDA_REAL = {np.dtype(np.float32): 0, np.dtype(np.float64): 1}
#: the dtypes :meth:`CublasKernels.transpose` copies exactly. ``geam`` computes ``alpha * a``:
#: for a complex ``a`` a complex product (a NaN or an infinity of one part turns the other into
#: NaN), not a copy; ``sgeam`` changed float32 bits of special values (a transpose of -0.0,
#: infinities, NaN and subnormals, one H100, ``tests/mpi/test_redistribute.py``), ``dgeam`` did not
_GEAM = frozenset((np.dtype(np.float64),))
#: host scalars ``(1, 0)`` of each dtype of :data:`_GEAM`, kept alive (cuBLAS reads them in the
#: call)
_UNITS = {dt: (np.ones((), dt), np.zeros((), dt)) for dt in _GEAM}


def _check(name: str, value: str, allowed: str) -> str:
    if not isinstance(value, str) or value.upper() not in allowed:
        raise ValueError(f"{name} must be one of {list(allowed)}, got {value!r}")
    return value.upper()


def _real_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float32) if dtype in (np.float32, np.complex64) else np.dtype(np.float64)


def _blas_layout(x: cupy.ndarray) -> int | None:
    """The row stride in elements if ``x`` is usable by cuBLAS as a C-ordered matrix, else None."""
    item = x.itemsize
    m, n = x.shape
    s0, s1 = x.strides
    if n > 1 and s1 != item:
        return None
    if m <= 1:
        return max(1, n)
    if s0 <= 0 or s0 % item or s0 // item < n:
        return None
    if x.data.ptr % item:
        return None
    return s0 // item


def _span(x: cupy.ndarray, ld: int) -> int:
    """Bytes from the first to one past the last element of the C-layout matrix ``x`` with row
    stride ``ld``."""
    rows, cols = x.shape
    return ((rows - 1) * ld + cols) * x.itemsize


#: elements of a GEMM input above which a matrix whose start or rows are not 16-byte aligned
#: (a window such as ``A[1:, 1:]``, or an odd width) is copied first into rows padded to 16
#: bytes: an O(mn) copy, against cuBLAS's GEMM on unaligned data. One H100, n = 16384,
#: ``A[1:, 1:] @ B[1:, 1:]`` (16383 x 16383 views): cuBLAS's ``dgemm`` 207.7 ms on the views,
#: 206.3 ms on contiguous copies (whose rows of 16383 elements are unaligned again), 189.5 ms on
#: padded copies and 193.1 ms with the two copies made in the call; CuPy's product 189.2 ms
#: (docs/blas3.md, "Window views")
_ALIGN_COPY_MIN = 1 << 22


def _aligned_copy(x: cupy.ndarray) -> tuple[cupy.ndarray, int]:
    """A copy of the 2-D ``x`` whose start and rows are 16-byte aligned (rows padded), with
    its leading dimension."""
    rows, cols = x.shape
    per = max(1, 16 // x.itemsize)  # elements per 16 bytes
    ld = max(per, -(-cols // per) * per)
    buf = cupy.empty((rows, ld), x.dtype)
    buf[:, :cols] = x
    return buf[:, :cols], ld


def _operand(x: cupy.ndarray, align: bool = False) -> tuple[cupy.ndarray, int]:
    """``x`` (or a contiguous copy, made on the current stream) and its leading dimension;
    ``align``: a large ``x`` whose start or rows are not 16-byte aligned is copied into padded
    rows."""
    ld = _blas_layout(x)
    if (
        align
        and x.size >= _ALIGN_COPY_MIN
        and min(x.shape) > 1
        and (ld is None or (ld * x.itemsize) % 16 or x.data.ptr % 16)
    ):
        return _aligned_copy(x)
    if ld is None:
        x = cupy.ascontiguousarray(x)
        ld = max(1, x.shape[1])
    return x, ld


class _Output:
    """An output matrix as cuBLAS sees it; copies back into a non-BLAS view on ``done()``."""

    def __init__(self, c: cupy.ndarray) -> None:
        self.view = c
        ld = _blas_layout(c)
        if ld is None:
            self.work = cupy.ascontiguousarray(c)  # keeps the values that must survive
            self.ld = max(1, c.shape[1])
        else:
            self.work = c
            self.ld = ld

    def done(self) -> None:
        if self.work is not self.view:
            self.view[...] = self.work


class CublasKernels:
    """cuBLAS handles (one per CUDA stream) and the five BLAS3 kernels on C-ordered views.

    Every method must be called with ``stream`` as CuPy's current stream (temporaries are then
    allocated and copied in stream order).
    """

    #: bytes of the workspace given to each handle (NVIDIA's recommendation for Hopper)
    WORKSPACE = 32 << 20

    def __init__(self) -> None:
        self._handles: dict[int, int] = {}
        self._workspaces: list[cupy.ndarray] = []
        self._solver_handles: dict[int, int] = {}  # cuSOLVER dense handle per stream
        self._solver_ws: dict[int, cupy.ndarray] = {}  # potrf workspace per stream
        self._solver_params: int | None = None  # cuSOLVER's 64-bit API parameters (stedc)
        self._has_stedc: bool | None = None

    def handle(self, stream: cupy.cuda.Stream) -> int:
        """The handle bound to ``stream`` (created on first use, with its own workspace, so that
        cuBLAS never allocates device memory behind a stream blocked on a signal)."""
        h = self._handles.get(stream.ptr)
        if h is None:
            h = int(cublas.create())
            cublas.set_stream(h, stream.ptr)  # (resets the workspace: set it afterwards)
            with stream:
                ws = cupy.empty(self.WORKSPACE, dtype=np.uint8)
            cublas.set_workspace(h, ws.data.ptr, ws.nbytes)
            self._workspaces.append(ws)
            self._handles[stream.ptr] = h
        return h

    def destroy(self) -> None:
        for h in self._handles.values():
            cublas.destroy(h)
        self._handles.clear()
        self._workspaces.clear()
        for h in self._solver_handles.values():
            _cusolver().destroy(h)
        self._solver_handles.clear()
        self._solver_ws.clear()
        if self._solver_params is not None:
            _cusolver().destroy_params(self._solver_params)
            self._solver_params = None

    @staticmethod
    def _fn(dtype: np.dtype, name: str) -> Any:
        prefix = _PREFIX.get(np.dtype(dtype))
        if prefix is None:
            raise TypeError(
                f"dtype {dtype} is not supported; use float32, float64, complex64 or complex128"
            )
        return getattr(cublas, prefix + name)

    @staticmethod
    def _ptr(value: Any, dtype: np.dtype) -> tuple[np.ndarray, int]:
        # cuBLAS reads host-pointer-mode scalars before the call returns
        arr = np.array(value, dtype=dtype)
        return arr, arr.ctypes.data

    # -- transposing copy ----------------------------------------------------------------
    def transpose(self, stream, out, src) -> bool:  # type: ignore[no-untyped-def]
        """``out[...] = src`` where the copy transposes and cuBLAS can make it: real matrices
        of one dtype, one of them C-ordered and the other the transpose of a C-ordered one
        (row strides of at least their widths, no overlap); returns False, copying nothing,
        otherwise. cuBLAS's ``geam`` with ``alpha = 1, beta = 0`` (the transposition its
        documentation names) in its in-place form (``B = C``, which ``beta = 0`` does not
        read). With ``out`` and ``src.T`` C-ordered (else ``out.T`` and ``src``), read
        column-major, ``src.T`` is ``S`` and ``out`` is ``O = S^T``."""
        dt = np.dtype(out.dtype)
        if (
            dt not in _GEAM
            or src.dtype != dt
            or out.ndim != 2
            or out.shape != src.shape
            or min(out.shape) < 2
        ):
            return False
        ld_o, ld_s = _blas_layout(out), _blas_layout(src.T)
        if ld_o is None or ld_s is None:
            out, src = out.T, src.T
            ld_o, ld_s = _blas_layout(out), _blas_layout(src.T)
            if ld_o is None or ld_s is None:
                return False
        o, a = out.data.ptr, src.data.ptr
        if o < a + _span(src.T, ld_s) and a < o + _span(out, ld_o):
            return False  # the memory spans overlap (a bound, as cupy.may_share_memory's)
        m, n = out.shape  # S = src.T is m x n row-major: n x m column-major; O is m x n
        one, zero = _UNITS[dt]
        self._fn(dt, "geam")(
            self.handle(stream),
            _OP["T"],
            _OP["N"],
            n,
            m,
            one.ctypes.data,
            a,
            ld_s,
            zero.ctypes.data,
            o,
            ld_o,
            o,
            ld_o,
        )
        return True

    # -- GEMM ----------------------------------------------------------------------------
    def gemm(self, stream, alpha, a, b, beta, c, trans_a, trans_b) -> None:  # type: ignore[no-untyped-def]
        """``c := alpha op(a) op(b) + beta c``."""
        ta = _check("trans_a", trans_a, "NTC")
        tb = _check("trans_b", trans_b, "NTC")
        am, ak = a.shape if ta == "N" else a.shape[::-1]
        bk, bn = b.shape if tb == "N" else b.shape[::-1]
        if (
            c.ndim != 2
            or a.ndim != 2
            or b.ndim != 2
            or am != c.shape[0]
            or bn != c.shape[1]
            or ak != bk
        ):
            raise ValueError(
                f"gemm shapes: op(a) {(am, ak)} @ op(b) {(bk, bn)} does not fit c {tuple(c.shape)}"
            )
        dt = np.dtype(c.dtype)
        if a.dtype != dt or b.dtype != dt:
            raise TypeError(f"gemm dtypes differ: a {a.dtype}, b {b.dtype}, c {dt}")
        m, n, k = c.shape[0], c.shape[1], ak
        if m == 0 or n == 0:
            return
        alpha, beta = _scalar(alpha, dt), _scalar(beta, dt)
        if alpha == 0 or k == 0:
            _scale(c, beta)
            return
        if dt.kind != "c":
            ta, tb = ta.replace("C", "T"), tb.replace("C", "T")
        a, lda = _operand(a, align=True)
        b, ldb = _operand(b, align=True)
        out = _Output(c)
        _al, pal = self._ptr(alpha, dt)
        _be, pbe = self._ptr(beta, dt)
        self._fn(dt, "gemm")(
            self.handle(stream),
            _OP[tb],
            _OP[ta],
            n,
            m,
            k,
            pal,
            b.data.ptr,
            ldb,
            a.data.ptr,
            lda,
            pbe,
            out.work.data.ptr,
            out.ld,
        )
        out.done()

    # -- SYRK / HERK ---------------------------------------------------------------------
    def syrk(self, stream, alpha, a, beta, c, uplo, trans) -> None:  # type: ignore[no-untyped-def]
        """``c := alpha op(a) op(a)^T + beta c`` on the ``uplo`` triangle ('C': HERK)."""
        uplo = _check("uplo", uplo, "LU")
        trans = _check("trans", trans, "NTC")
        dt = np.dtype(c.dtype)
        herm = trans == "C" and dt.kind == "c"
        n = c.shape[0] if c.ndim == 2 else -1
        on, k = a.shape if trans == "N" else a.shape[::-1]
        if c.ndim != 2 or a.ndim != 2 or c.shape[1] != n or on != n:
            raise ValueError(f"syrk shapes: op(a) {(on, k)} does not fit square c {tuple(c.shape)}")
        if a.dtype != dt:
            raise TypeError(f"syrk dtypes differ: a {a.dtype}, c {dt}")
        if n == 0:
            return
        alpha = _scalar(alpha, dt, real=herm, what="HERK (trans='C')")
        beta = _scalar(beta, dt, real=herm, what="HERK (trans='C')")
        if alpha == 0 or k == 0:
            _scale_triangle(c, beta, uplo, herm)
            return
        ftrans = ("N" if trans == "C" else "C") if herm else ("N" if trans != "N" else "T")
        a, lda = _operand(a)
        out = _Output(c)
        sdt = _real_dtype(dt) if herm else dt
        _al, pal = self._ptr(alpha.real if herm else alpha, sdt)
        _be, pbe = self._ptr(beta.real if herm else beta, sdt)
        self._fn(dt, "herk" if herm else "syrk")(
            self.handle(stream),
            _FILL[_OTHER[uplo]],
            _OP[ftrans],
            n,
            k,
            pal,
            a.data.ptr,
            lda,
            pbe,
            out.work.data.ptr,
            out.ld,
        )
        out.done()

    # -- SYR2K / HER2K -------------------------------------------------------------------
    def syr2k(self, stream, alpha, a, b, beta, c, uplo, trans) -> None:  # type: ignore[no-untyped-def]
        """``c := alpha op(a) op(b)^T + alpha op(b) op(a)^T + beta c`` on ``uplo`` ('C': HER2K)."""
        uplo = _check("uplo", uplo, "LU")
        trans = _check("trans", trans, "NTC")
        dt = np.dtype(c.dtype)
        herm = trans == "C" and dt.kind == "c"
        n = c.shape[0] if c.ndim == 2 else -1
        on, k = a.shape if trans == "N" else a.shape[::-1]
        if (
            c.ndim != 2
            or a.ndim != 2
            or b.ndim != 2
            or c.shape[1] != n
            or on != n
            or b.shape != a.shape
        ):
            raise ValueError(
                f"syr2k shapes: a {tuple(a.shape)}, b {tuple(b.shape)} (trans {trans!r}) do not "
                f"fit square c {tuple(c.shape)}"
            )
        if a.dtype != dt or b.dtype != dt:
            raise TypeError(f"syr2k dtypes differ: a {a.dtype}, b {b.dtype}, c {dt}")
        if n == 0:
            return
        alpha = _scalar(alpha, dt)
        beta = _scalar(beta, dt, real=herm, what="HER2K (trans='C')")
        if alpha == 0 or k == 0:
            _scale_triangle(c, beta, uplo, herm)
            return
        ftrans = ("N" if trans == "C" else "C") if herm else ("N" if trans != "N" else "T")
        a, lda = _operand(a)
        b, ldb = _operand(b)
        out = _Output(c)
        _al, pal = self._ptr(alpha, dt)
        _be, pbe = self._ptr(beta.real if herm else beta, _real_dtype(dt) if herm else dt)
        # C^T = alpha B^T conj(A) + conj(alpha) A^T conj(B): HER2K 'N' with the operands swapped
        self._fn(dt, "her2k" if herm else "syr2k")(
            self.handle(stream),
            _FILL[_OTHER[uplo]],
            _OP[ftrans],
            n,
            k,
            pal,
            b.data.ptr,
            ldb,
            a.data.ptr,
            lda,
            pbe,
            out.work.data.ptr,
            out.ld,
        )
        out.done()

    # -- TRMM / TRSM ---------------------------------------------------------------------
    def _tri_args(self, name, a, b, side, uplo, trans, diag):  # type: ignore[no-untyped-def]
        side = _check("side", side, "LR")
        uplo = _check("uplo", uplo, "LU")
        trans = _check("trans", trans, "NTC")
        diag = _check("diag", diag, "NU")
        if a.ndim != 2 or b.ndim != 2:
            raise ValueError(f"{name}: a and b must be 2-D")
        n = b.shape[0] if side == "L" else b.shape[1]
        if tuple(a.shape) != (n, n):
            raise ValueError(
                f"{name} shapes: a {tuple(a.shape)} must be {n}x{n} for b {tuple(b.shape)}, "
                f"side {side}"
            )
        if a.dtype != b.dtype:
            raise TypeError(f"{name} dtypes differ: a {a.dtype}, b {b.dtype}")
        if np.dtype(b.dtype).kind != "c":
            trans = trans.replace("C", "T")
        return side, uplo, trans, diag

    def trmm(self, stream, alpha, a, b, side, uplo, trans, diag, out=None) -> None:  # type: ignore[no-untyped-def]
        """``b := alpha op(a) b`` (side 'L') or ``b := alpha b op(a)`` (side 'R'); with ``out``
        the product goes to ``out`` and ``b`` is only read (cuBLAS's TRMM is out of place; in
        place, C = B, is slower at small n: see ``Backend.trmm``)."""
        self._triangular("trmm", stream, alpha, a, b, side, uplo, trans, diag, out)

    def trsm(self, stream, alpha, a, b, side, uplo, trans, diag) -> None:  # type: ignore[no-untyped-def]
        """Solve ``op(a) x = alpha b`` (side 'L') or ``x op(a) = alpha b`` (side 'R'); x -> b."""
        self._triangular("trsm", stream, alpha, a, b, side, uplo, trans, diag)

    def _triangular(self, name, stream, alpha, a, b, side, uplo, trans, diag, dest=None) -> None:  # type: ignore[no-untyped-def]
        side, uplo, trans, diag = self._tri_args(name, a, b, side, uplo, trans, diag)
        if dest is not None and tuple(dest.shape) != tuple(b.shape):
            raise ValueError(f"{name}: out {tuple(dest.shape)} must have b's shape {b.shape}")
        if b.size == 0:
            return
        dt = np.dtype(b.dtype)
        alpha = _scalar(alpha, dt)
        if alpha == 0:
            (b if dest is None else dest).fill(0)
            return
        a, lda = _operand(a)
        out = _Output(b if dest is None else dest)
        _al, pal = self._ptr(alpha, dt)
        if name != "trmm":
            bc: tuple[int, ...] = (out.work.data.ptr, out.ld)
        elif dest is None:  # cuBLAS's trmm is out of place (B in, C out): here C is B itself
            bc = (out.work.data.ptr, out.ld) * 2
        else:
            src, ldb = _operand(b)
            bc = (src.data.ptr, ldb, out.work.data.ptr, out.ld)
        self._fn(dt, name)(
            self.handle(stream),
            _SIDE[_OTHER_SIDE[side]],
            _FILL[_OTHER[uplo]],
            _OP[trans],
            _DIAG[diag],
            b.shape[1],
            b.shape[0],
            pal,
            a.data.ptr,
            lda,
            *bc,
        )
        out.done()

    # -- POTRF (cuSOLVER) -------------------------------------------------------------
    def potrf(self, stream, a, uplo, info) -> None:  # type: ignore[no-untyped-def]
        """Cholesky of ``a`` in place (cuSOLVER ``xpotrf`` on ``stream``); INFO -> ``info[0]``.

        cuSOLVER factors the lower triangle of a column-major matrix at about twice the rate
        of the upper one (one H200: n = 4096 2.6 against 5.6 ms; n = 16384 44.2 against
        59.5 ms, where the factor runs recursively on 4096-leaves). ``a`` C-ordered is the
        column-major ``a^T = conj(a)``, so ``uplo`` 'U' is factored in place as the lower
        factor of ``a^T``. ``uplo`` 'L' is factored in a column-major copy of ``a`` (the same
        matrix, its lower triangle read by cuSOLVER's fast triangle) copied back, which also
        rewrites ``a``'s other triangle with its own values. ``info`` is an int32 device array.
        """
        uplo = _check("uplo", uplo, "LU")
        n = a.shape[0]
        if a.ndim != 2 or a.shape != (n, n):
            raise ValueError(f"potrf needs a square matrix, got shape {tuple(a.shape)}")
        if n == 0:
            info[...] = 0
            return
        h = self.solver_handle(stream)
        if uplo == "L":
            work = cupy.asfortranarray(a)  # a transposing copy on the current (our) stream
            self._potrf_lower(h, stream, work, n, info)
            a[...] = work
            return
        out = _Output(a)
        self._potrf_lower(h, stream, out.work, out.ld, info)
        out.done()

    def _potrf_lower(self, h, stream, work, ld, info) -> None:  # type: ignore[no-untyped-def]
        """cuSOLVER's ``xpotrf`` of the lower triangle of the column-major ``n x n`` matrix at
        ``work`` (leading dimension ``ld``)."""
        n = work.shape[0]
        dt = np.dtype(work.dtype)
        fill = _FILL["L"]
        prefix = _PREFIX[dt]
        lwork = int(
            getattr(_cusolver(), prefix + "potrf_buffer_size")(h, fill, n, work.data.ptr, ld)
        )
        ws = self._solver_ws.get(stream.ptr)
        if ws is None or ws.nbytes < max(lwork, 1) * dt.itemsize:
            # grown outside pipelines: operators call potrf once on a full tile first
            ws = self._solver_ws[stream.ptr] = cupy.empty(max(lwork, 1) * dt.itemsize, np.uint8)
        getattr(_cusolver(), prefix + "potrf")(
            h, fill, n, work.data.ptr, ld, ws.data.ptr, lwork, info.data.ptr
        )

    # -- GETRF (cuSOLVER) -------------------------------------------------------------
    def getrf(self, stream, a, ipiv, info) -> None:  # type: ignore[no-untyped-def]
        """LU with partial pivoting of the ``m x k`` ``a`` in place (cuSOLVER ``xgetrf`` on
        ``stream``; a row-major ``a`` is factored in a column-major copy); 0-based pivots ->
        ``ipiv``, INFO -> ``info[0]``. Everything stays on the device (no host synchronisation)."""
        if a.ndim != 2:
            raise ValueError(f"getrf needs a matrix, got shape {tuple(a.shape)}")
        m, k = a.shape
        if min(m, k) == 0:
            info[...] = 0
            return
        dt = np.dtype(a.dtype)
        h = self.solver_handle(stream)
        work = cupy.asfortranarray(a)
        prefix = _PREFIX[dt]
        lwork = int(getattr(_cusolver(), prefix + "getrf_buffer_size")(h, m, k, work.data.ptr, m))
        ws = self._solver_ws.get(stream.ptr)
        if ws is None or ws.nbytes < max(lwork, 1) * dt.itemsize:
            # grown outside pipelines: operators call getrf once on a full panel first
            ws = self._solver_ws[stream.ptr] = cupy.empty(max(lwork, 1) * dt.itemsize, np.uint8)
        piv = cupy.empty(min(m, k), dtype=np.int32)
        getattr(_cusolver(), prefix + "getrf")(
            h, m, k, work.data.ptr, m, ws.data.ptr, piv.data.ptr, info.data.ptr
        )
        if work is not a:  # a column-major ``a`` was factored in place
            a[...] = work
        ipiv[: piv.shape[0]] = piv - 1

    # -- GEQRF / ORGQR / ORMQR (cuSOLVER) -------------------------------------------------
    def _solver_workspace(self, stream: cupy.cuda.Stream, lwork: int, dt: np.dtype) -> Any:
        """The stream's cuSOLVER workspace, grown to ``lwork`` elements of ``dt`` (grown
        outside pipelines: the QR operators call each kernel once on a full panel first)."""
        ws = self._solver_ws.get(stream.ptr)
        if ws is None or ws.nbytes < max(lwork, 1) * dt.itemsize:
            ws = self._solver_ws[stream.ptr] = cupy.empty(max(lwork, 1) * dt.itemsize, np.uint8)
        return ws

    def geqrf(self, stream, a, tau, info) -> None:  # type: ignore[no-untyped-def]
        """QR of the ``m x k`` ``a`` in place (cuSOLVER ``xgeqrf`` on ``stream``; a row-major
        ``a`` is factored in a column-major copy); scalars -> ``tau``, INFO -> ``info[0]``."""
        if a.ndim != 2:
            raise ValueError(f"geqrf needs a matrix, got shape {tuple(a.shape)}")
        m, k = a.shape
        if min(m, k) == 0:
            info[...] = 0
            return
        dt = np.dtype(a.dtype)
        h, sol, prefix = self.solver_handle(stream), _cusolver(), _PREFIX[dt]
        work = cupy.asfortranarray(a)
        t = tau if tau.flags.c_contiguous else cupy.empty(min(m, k), dt)
        lwork = int(getattr(sol, prefix + "geqrf_buffer_size")(h, m, k, work.data.ptr, m))
        ws = self._solver_workspace(stream, lwork, dt)
        getattr(sol, prefix + "geqrf")(
            h, m, k, work.data.ptr, m, t.data.ptr, ws.data.ptr, lwork, info.data.ptr
        )
        if work is not a:
            a[...] = work
        if t is not tau:
            tau[...] = t

    def orgqr(self, stream, a, tau, info) -> None:  # type: ignore[no-untyped-def]
        """The ``m x n`` ``Q`` of the reflectors in the first ``tau.size`` columns of ``a``, in
        place (cuSOLVER ``xorgqr``/``xungqr`` on ``stream``)."""
        m, n = a.shape
        k = int(tau.size)
        if not k <= n <= m:
            raise ValueError(f"orgqr needs tau.size <= n <= m, got a {a.shape} and {k} taus")
        if n == 0:
            info[...] = 0
            return
        dt = np.dtype(a.dtype)
        h, sol = self.solver_handle(stream), _cusolver()
        name = _PREFIX[dt] + ("ungqr" if dt.kind == "c" else "orgqr")
        work = cupy.asfortranarray(a)
        t = cupy.ascontiguousarray(tau)
        lwork = int(getattr(sol, name + "_buffer_size")(h, m, n, k, work.data.ptr, m, t.data.ptr))
        ws = self._solver_workspace(stream, lwork, dt)
        getattr(sol, name)(
            h, m, n, k, work.data.ptr, m, t.data.ptr, ws.data.ptr, lwork, info.data.ptr
        )
        if work is not a:
            a[...] = work

    def ormqr(self, stream, side, trans, a, tau, c, info) -> None:  # type: ignore[no-untyped-def]
        """``c := op(Q) c`` (side 'L') or ``c op(Q)`` ('R') in place, ``Q`` of the reflectors in
        the first ``tau.size`` columns of ``a`` (cuSOLVER ``xormqr``/``xunmqr`` on ``stream``,
        on column-major copies where needed)."""
        side = _check("side", side, "LR")
        trans = _check("trans", trans, "NTC")
        m, n = c.shape
        k = int(tau.size)
        if c.size == 0 or k == 0:
            info[...] = 0
            return
        dt = np.dtype(c.dtype)
        op = "N" if trans == "N" else ("C" if dt.kind == "c" else "T")
        h, sol = self.solver_handle(stream), _cusolver()
        name = _PREFIX[dt] + ("unmqr" if dt.kind == "c" else "ormqr")
        v = cupy.asfortranarray(a[:, :k])
        lda = v.shape[0]
        t = cupy.ascontiguousarray(tau)
        work = cupy.asfortranarray(c)
        args = (h, _SIDE[side], _OP[op], m, n, k, v.data.ptr, lda, t.data.ptr)
        lwork = int(getattr(sol, name + "_buffer_size")(*args, work.data.ptr, m))
        ws = self._solver_workspace(stream, lwork, dt)
        getattr(sol, name)(*args, work.data.ptr, m, ws.data.ptr, lwork, info.data.ptr)
        if work is not c:
            c[...] = work

    def _stedc_query(self, stream, d, e, z) -> tuple[tuple[Any, ...], int, int]:  # type: ignore[no-untyped-def]
        """The arguments common to ``cusolverDnXstedc`` and its workspace query (``COMPZ =
        'I'``, leading dimension ``z.shape[1]``) and the query's device and host bytes."""
        from nvmath.bindings import cusolver  # (the enums common to cuSOLVER's APIs)

        sol = _cusolver()
        if self._solver_params is None:
            self._solver_params = int(sol.create_params())
        typ = _CUDA_REAL[np.dtype(d.dtype)]
        args = (
            self.solver_handle(stream), self._solver_params, int(cusolver.EigComp.I),
            int(d.size), typ, d.data.ptr, e.data.ptr, typ, z.data.ptr, int(z.shape[1]), typ,
        )  # fmt: skip
        dev_bytes, host_bytes = sol.xstedc_buffer_size(*args)
        return args, int(dev_bytes), int(host_bytes)

    def has_stedc(self, stream: cupy.cuda.Stream) -> bool:
        """Whether the loaded cuSOLVER has ``cusolverDnXstedc`` (cuSOLVER 12.4 has it, 12.0
        and 12.1 do not): its workspace query on a 2 x 2 problem, once per process."""
        if self._has_stedc is None:
            try:
                self._stedc_query(stream, cupy.zeros(2), cupy.zeros(1), cupy.zeros((2, 2)))
                self._has_stedc = True
            except Exception:  # noqa: BLE001 - nvmath's FunctionNotFoundError: an older library
                self._has_stedc = False
        return self._has_stedc

    def stedc(self, stream, d, e, z, info) -> np.ndarray:  # type: ignore[no-untyped-def]
        """Eigenvalues (into ``d``, ascending) and eigenvectors of the real symmetric
        tridiagonal matrix ``(d, e)`` (``e`` of ``n - 1`` entries; overwritten): cuSOLVER's
        divide and conquer ``cusolverDnXstedc`` (LAPACK ``xstedc``, ``COMPZ = 'I'``) on
        ``stream``. ``z`` is a C-ordered ``(n, ldz)`` array, ``ldz >= n``: the column-major
        ``n x n`` eigenvector matrix with leading dimension ``ldz`` (row ``j`` of ``z`` holds
        eigenvector ``j``). INFO -> ``info[0]``. Returns the host workspace, to be kept until
        the stream has finished."""
        args, dev_bytes, host_bytes = self._stedc_query(stream, d, e, z)
        ws = self._solver_workspace(stream, dev_bytes, np.dtype(np.uint8))
        host = np.empty(max(host_bytes, 1), np.uint8)
        _cusolver().xstedc(
            *args, ws.data.ptr, dev_bytes, host.ctypes.data, host_bytes, info.data.ptr
        )
        return host

    def solver_handle(self, stream: cupy.cuda.Stream) -> int:
        """The cuSOLVER dense handle bound to ``stream`` (created on first use)."""
        h = self._solver_handles.get(stream.ptr)
        if h is None:
            h = int(_cusolver().create())
            _cusolver().set_stream(h, stream.ptr)
            self._solver_handles[stream.ptr] = h
        return h


def _cusolver() -> Any:
    from nvmath.bindings import cusolverDn

    return cusolverDn


# -- element-wise helpers (CuPy kernels on the current stream) ------------------------------


def _scale(c: cupy.ndarray, beta: Any) -> None:
    """``c := beta c`` without reading ``c`` when ``beta == 0`` (reference BLAS)."""
    if beta == 0:
        c.fill(0)
    elif beta != 1:
        c *= beta


def _tri_mask(n: int, uplo: str) -> cupy.ndarray:
    i = cupy.arange(n)
    return (i[:, None] >= i[None, :]) if uplo == "L" else (i[:, None] <= i[None, :])


def _write_triangle(c: cupy.ndarray, new: cupy.ndarray, uplo: str, hermitian: bool) -> None:
    if hermitian:
        d = cupy.arange(c.shape[0])
        new[d, d] = new[d, d].real
    cupy.copyto(c, new, where=_tri_mask(c.shape[0], uplo))


def _scale_triangle(c: cupy.ndarray, beta: Any, uplo: str, hermitian: bool) -> None:
    new = cupy.zeros(c.shape, c.dtype) if beta == 0 else beta * c
    _write_triangle(c, new, uplo, hermitian)
