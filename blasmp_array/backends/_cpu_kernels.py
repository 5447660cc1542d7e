"""Local BLAS3 kernels of the CPU backend, in place on (possibly strided) 2-D NumPy views.

Semantics follow reference BLAS (``beta == 0`` never reads ``c``; only the ``uplo`` triangle of
``c`` is written by SYRK/SYR2K, and only the ``uplo`` triangle of ``a`` is read by TRMM/TRSM,
without its diagonal when ``diag == 'U'``). ``trans == 'C'`` on a complex SYRK/SYR2K means
HERK/HER2K (``a^H a``, ``alpha a^H b + conj(alpha) b^H a``), with the imaginary part of the
diagonal of ``c`` set to zero.

Each kernel calls CBLAS through ``ctypes`` (see :mod:`._cblas`; the GIL is released, views with
a unit column stride are passed without a copy) and falls back to ``numpy.matmul`` + ufuncs
(which also release the GIL) and ``scipy.linalg.solve_triangular`` where no CBLAS library is
found (or ``$BLASMP_CPU_BLAS=numpy``). See ``cpu.py``'s docstring for the measurements.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _cblas

__all__ = [
    "gemm",
    "syrk",
    "syr2k",
    "trmm",
    "trsm",
    "potrf",
    "getrf",
    "modified_lu",
    "geqrf",
    "geqrt",
    "orgqr",
    "ormqr",
    "lapack",
]


def _check(name: str, value: str, allowed: str) -> str:
    if not isinstance(value, str) or value.upper() not in allowed:
        raise ValueError(f"{name} must be one of {list(allowed)}, got {value!r}")
    return value.upper()


def _op(x: np.ndarray, trans: str) -> np.ndarray:
    if trans == "N":
        return x
    if trans == "T" or x.dtype.kind != "c":
        return x.T
    return x.conj().T


def _scalar(value: Any, dtype: np.dtype, real: bool = False, what: str = "") -> Any:
    if dtype.kind != "c" or real:
        v = complex(value)
        if v.imag != 0:
            need = what if real else f"a {dtype} matrix"
            raise TypeError(f"{need} needs a real scalar, got {value!r}")
        return dtype.type(v.real)
    return dtype.type(value)


def _blas_trans(trans: str, dtype: np.dtype) -> str:
    return "T" if trans == "C" and dtype.kind != "c" else trans


# -- row-major operands for CBLAS ----------------------------------------------------------


def _row_major(x: np.ndarray) -> tuple[np.ndarray, int] | None:
    """``(x, ld)`` when ``x`` can be passed as a row-major matrix without a copy, else None."""
    item = x.itemsize
    rows, cols = x.shape
    s0, s1 = x.strides
    if not x.flags.aligned:
        return None
    if cols > 1 and s1 != item:
        return None
    if rows <= 1:
        return x, max(1, cols)
    if s0 % item or s0 // item < max(1, cols):
        return None
    return x, s0 // item


def _operand(x: np.ndarray) -> tuple[np.ndarray, int]:
    rm = _row_major(x)
    if rm is not None:
        return rm
    y = np.ascontiguousarray(x)
    return y, max(1, y.shape[1])


def _operand_trans(x: np.ndarray, trans: str) -> tuple[np.ndarray, int, str]:
    """Like :func:`_operand`, but a column-major ``x`` (e.g. ``y.T``) is passed as its
    row-major transpose with the trans flag flipped, when the flag allows it."""
    rm = _row_major(x)
    if rm is not None:
        return rm[0], rm[1], trans
    if trans in "NT":
        rt = _row_major(x.T)
        if rt is not None:
            return rt[0], rt[1], "T" if trans == "N" else "N"
    y = np.ascontiguousarray(x)
    return y, max(1, y.shape[1]), trans


class _Output:
    """A row-major target for an in-place result: ``c`` itself, or a contiguous copy written
    back by :meth:`done`."""

    def __init__(self, c: np.ndarray, read: bool = True) -> None:
        self.c = c
        rm = _row_major(c)
        if rm is not None:
            self.array, self.ld = rm
        else:
            self.array = np.ascontiguousarray(c) if read else np.empty(c.shape, c.dtype)
            self.ld = max(1, c.shape[1])

    def done(self) -> None:
        if self.array is not self.c:
            self.c[...] = self.array


# -- reference fallbacks (NumPy) -----------------------------------------------------------


def _axpby(alpha: Any, prod: np.ndarray, beta: Any, c: np.ndarray) -> None:
    """``c := alpha * prod + beta * c`` in place (``prod`` is a scratch array)."""
    if alpha != 1:
        np.multiply(prod, alpha, out=prod)
    if beta == 0:
        np.copyto(c, prod)
        return
    if beta != 1:
        np.multiply(c, beta, out=c)
    np.add(c, prod, out=c)


def _write_triangle(c: np.ndarray, new: np.ndarray, uplo: str, hermitian: bool) -> None:
    i = np.arange(c.shape[0])
    mask = (i[:, None] >= i[None, :]) if uplo == "L" else (i[:, None] <= i[None, :])
    if hermitian:
        new[i, i] = new[i, i].real
    np.copyto(c, new, where=mask)


def _triangle(a: np.ndarray, uplo: str, diag: str) -> np.ndarray:
    t = np.tril(a) if uplo == "L" else np.triu(a)
    if diag == "U":
        np.fill_diagonal(t, 1)
    return t


# -- kernels -------------------------------------------------------------------------------


def gemm(alpha, a, b, beta, c, trans_a, trans_b) -> None:  # type: ignore[no-untyped-def]
    """``c := alpha op(a) op(b) + beta c`` (2mnk flops)."""
    ta = _check("trans_a", trans_a, "NTC")
    tb = _check("trans_b", trans_b, "NTC")
    opa, opb = _op(a, ta), _op(b, tb)
    if (
        c.ndim != 2
        or opa.shape[0] != c.shape[0]
        or opb.shape[1] != c.shape[1]
        or opa.shape[1] != opb.shape[0]
    ):
        raise ValueError(
            f"gemm shapes: op(a) {opa.shape} @ op(b) {opb.shape} does not fit c {c.shape}"
        )
    if c.size == 0:
        return
    dt = c.dtype
    alpha, beta = _scalar(alpha, dt), _scalar(beta, dt)
    k = opa.shape[1]
    lib = _cblas.load()
    if lib is not None and a.dtype == dt and b.dtype == dt:
        a_, lda, ta = _operand_trans(a, _blas_trans(ta, dt))
        b_, ldb, tb = _operand_trans(b, _blas_trans(tb, dt))
        out = _Output(c, read=beta != 0)
        m, n = c.shape
        lib.routine(dt, "gemm")(
            _cblas.ROW_MAJOR,
            _cblas.TRANS[ta],
            _cblas.TRANS[tb],
            lib.int(m),
            lib.int(n),
            lib.int(k),
            lib.scalar(alpha, dt),
            lib.ptr(a_),
            lib.int(lda),
            lib.ptr(b_),
            lib.int(ldb),
            lib.scalar(beta, dt),
            lib.ptr(out.array),
            lib.int(out.ld),
        )
        out.done()
        return
    if alpha == 0 or k == 0:
        _axpby(0, np.zeros(c.shape, dt), beta, c)
        return
    prod = np.matmul(opa, opb).astype(dt, copy=False)
    _axpby(alpha, prod, beta, c)


def syrk(alpha, a, beta, c, uplo, trans) -> None:  # type: ignore[no-untyped-def]
    """``c := alpha op(a) op(a)^T + beta c`` on the ``uplo`` triangle (n(n+1)k flops).

    ``trans='C'`` on complex data is HERK: ``c := alpha a^H a + beta c`` with real scalars.
    """
    uplo = _check("uplo", uplo, "LU")
    trans = _check("trans", trans, "NTC")
    dt = c.dtype
    herm = trans == "C" and dt.kind == "c"
    opa = _op(a, trans)
    n = c.shape[0]
    if c.ndim != 2 or c.shape[1] != n or opa.shape[0] != n:
        raise ValueError(f"syrk shapes: op(a) {opa.shape} does not fit square c {c.shape}")
    if n == 0:
        return
    alpha = _scalar(alpha, dt, real=herm, what="HERK (trans='C')")
    beta = _scalar(beta, dt, real=herm, what="HERK (trans='C')")
    k = opa.shape[1]
    lib = _cblas.load()
    if lib is not None and a.dtype == dt:
        a_, lda = _operand(a)
        out = _Output(c)
        t = _blas_trans(trans, dt)
        if herm:
            fn, al, be = lib.routine(dt, "herk"), lib.real(alpha, dt), lib.real(beta, dt)
        else:
            fn, al, be = lib.routine(dt, "syrk"), lib.scalar(alpha, dt), lib.scalar(beta, dt)
        fn(
            _cblas.ROW_MAJOR,
            _cblas.UPLO[uplo],
            _cblas.TRANS[t],
            lib.int(n),
            lib.int(k),
            al,
            lib.ptr(a_),
            lib.int(lda),
            be,
            lib.ptr(out.array),
            lib.int(out.ld),
        )
        out.done()
        return
    if alpha == 0 or k == 0:
        prod = np.zeros(c.shape, dt)
    else:
        prod = np.matmul(opa, opa.conj().T if herm else opa.T).astype(dt, copy=False)
        prod *= alpha
    if beta != 0:
        prod += beta * c
    _write_triangle(c, prod, uplo, herm)


def syr2k(alpha, a, b, beta, c, uplo, trans) -> None:  # type: ignore[no-untyped-def]
    """``c := alpha op(a) op(b)^T + alpha op(b) op(a)^T + beta c`` on ``uplo`` (2n(n+1)k flops).

    ``trans='C'`` on complex data is HER2K:
    ``c := alpha a^H b + conj(alpha) b^H a + beta c`` with a real ``beta``.
    """
    uplo = _check("uplo", uplo, "LU")
    trans = _check("trans", trans, "NTC")
    dt = c.dtype
    herm = trans == "C" and dt.kind == "c"
    opa, opb = _op(a, trans), _op(b, trans)
    n = c.shape[0]
    if c.ndim != 2 or c.shape[1] != n or opa.shape[0] != n or opb.shape != opa.shape:
        raise ValueError(
            f"syr2k shapes: op(a) {opa.shape}, op(b) {opb.shape} do not fit square c {c.shape}"
        )
    if n == 0:
        return
    alpha = _scalar(alpha, dt)
    beta = _scalar(beta, dt, real=herm, what="HER2K (trans='C')")
    k = opa.shape[1]
    lib = _cblas.load()
    if lib is not None and a.dtype == dt and b.dtype == dt:
        a_, lda = _operand(a)
        b_, ldb = _operand(b)
        out = _Output(c)
        t = _blas_trans(trans, dt)
        if herm:
            fn, be = lib.routine(dt, "her2k"), lib.real(beta, dt)
        else:
            fn, be = lib.routine(dt, "syr2k"), lib.scalar(beta, dt)
        fn(
            _cblas.ROW_MAJOR,
            _cblas.UPLO[uplo],
            _cblas.TRANS[t],
            lib.int(n),
            lib.int(k),
            lib.scalar(alpha, dt),
            lib.ptr(a_),
            lib.int(lda),
            lib.ptr(b_),
            lib.int(ldb),
            be,
            lib.ptr(out.array),
            lib.int(out.ld),
        )
        out.done()
        return
    if alpha == 0 or k == 0:
        prod = np.zeros(c.shape, dt)
    else:
        # op(b) op(a)^T is the (conjugate) transpose of x = op(a) op(b)^T: one product
        x = np.matmul(opa, opb.conj().T if herm else opb.T).astype(dt, copy=False)
        prod = alpha * x
        prod += (np.conj(alpha) * x.conj().T) if herm else (alpha * x.T)
    if beta != 0:
        prod += beta * c
    _write_triangle(c, prod, uplo, herm)


def _check_tri(name: str, a: np.ndarray, b: np.ndarray, side: str) -> None:
    n = b.shape[0] if side == "L" else b.shape[1]
    if a.ndim != 2 or b.ndim != 2 or a.shape != (n, n):
        raise ValueError(f"{name} shapes: a {a.shape} must be {n}x{n} for b {b.shape}, side {side}")


def _blas_tri(name: str, alpha, a, b, side, uplo, trans, diag) -> bool:  # type: ignore[no-untyped-def]
    lib = _cblas.load()
    dt = b.dtype
    if lib is None or a.dtype != dt:
        return False
    a_, lda = _operand(a)
    out = _Output(b)
    m, n = b.shape
    lib.routine(dt, name)(
        _cblas.ROW_MAJOR,
        _cblas.SIDE[side],
        _cblas.UPLO[uplo],
        _cblas.TRANS[_blas_trans(trans, dt)],
        _cblas.DIAG[diag],
        lib.int(m),
        lib.int(n),
        lib.scalar(alpha, dt),
        lib.ptr(a_),
        lib.int(lda),
        lib.ptr(out.array),
        lib.int(out.ld),
    )
    out.done()
    return True


def _tri_args(name, a, b, side, uplo, trans, diag):  # type: ignore[no-untyped-def]
    side = _check("side", side, "LR")
    uplo = _check("uplo", uplo, "LU")
    trans = _check("trans", trans, "NTC")
    diag = _check("diag", diag, "NU")
    _check_tri(name, a, b, side)
    return side, uplo, trans, diag


def trmm(alpha, a, b, side, uplo, trans, diag, out=None) -> None:  # type: ignore[no-untyped-def]
    """``b := alpha op(a) b`` (side 'L', m^2 n flops) or ``alpha b op(a)`` (side 'R', m n^2);
    with ``out`` the product goes there (BLAS's TRMM is in place: ``b`` is copied into it)."""
    if out is not None:
        if out.shape != b.shape:
            raise ValueError(f"trmm: out {out.shape} must have b's shape {b.shape}")
        out[...] = b
        b = out
    side, uplo, trans, diag = _tri_args("trmm", a, b, side, uplo, trans, diag)
    if b.size == 0:
        return
    alpha = _scalar(alpha, b.dtype)
    if _blas_tri("trmm", alpha, a, b, side, uplo, trans, diag):
        return
    t = _op(_triangle(a, uplo, diag), trans)
    prod = np.matmul(t, b) if side == "L" else np.matmul(b, t)
    _axpby(alpha, prod.astype(b.dtype, copy=False), 0, b)


#: triangles larger than this are solved by halves (:func:`_trsm_halves`)
TRSM_LEAF = 64
#: ... when the right-hand side has at least this many columns (side 'L'; rows for 'R'): with
#: fewer, the GEMM between the halves is a matrix-vector product, memory-bound like the TRSM
#: itself, and the halving only adds calls (one vector at n = 256: 7 BLAS calls for 1)
TRSM_HALVES_MIN_RHS = 16


def _trsm_halves(alpha, a, b, side, uplo, trans, diag) -> None:  # type: ignore[no-untyped-def]
    """:func:`trsm` by halving the triangle: two TRSMs of half the order and one GEMM between
    them (the blocked TRSM of reference BLAS, recursively), so that most flops run in GEMM.

    Why: OpenBLAS's single-threaded TRSM runs far below its GEMM on this project's 2-core VM
    (a 3840 x 256 panel against a 256 x 256 triangle: 10-13 GFLOP/s, GEMM of the same operands
    ~50), and smaller triangles are slower still (64: ~5). Measured through the bench
    (``trsm``, n = 4096, 2 ranks, 1x2 grid, block 256, two interleaved runs each): 0.72-0.74 s
    with halving down to 64, 0.80-0.81 s without; ``cholesky`` unchanged (0.44-0.51 s, within
    its spread), its time goes elsewhere (docs/cholesky.md).

    With ``T = op(a)`` split at ``h`` into ``T11, T22`` and the off-diagonal block ``T21``
    (``T`` lower) or ``T12`` (upper): the half whose equations do not involve the other is solved
    first, the other half's right-hand side is updated by one GEMM, then solved. Only ``a``'s
    ``uplo`` triangle is read (the off-diagonal block of ``op(a)`` is in it).
    """
    n = a.shape[0]
    h = n // 2
    halves = (slice(0, h), slice(h, n))
    lower = (uplo == "L") == (trans == "N")  # is op(a) lower triangular?
    i, j = (1, 0) if lower else (0, 1)  # the off-diagonal block T[i, j] of op(a)
    off = a[halves[i], halves[j]] if trans == "N" else a[halves[j], halves[i]]
    first = 0 if (side == "L") == lower else 1  # the half solved first
    second = 1 - first
    part = (lambda k: b[halves[k], :]) if side == "L" else (lambda k: b[:, halves[k]])
    xf, bs = part(first), part(second)
    trsm(alpha, a[halves[first], halves[first]], xf, side, uplo, trans, diag)
    if side == "L":  # b_s := alpha b_s - T[s, f] x_f
        gemm(-1, off, xf, alpha, bs, trans, "N")
    else:  # b_s := alpha b_s - x_f T[f, s]
        gemm(-1, xf, off, alpha, bs, "N", trans)
    trsm(1, a[halves[second], halves[second]], bs, side, uplo, trans, diag)


def trsm(alpha, a, b, side, uplo, trans, diag) -> None:  # type: ignore[no-untyped-def]
    """Solve ``op(a) x = alpha b`` (side 'L', m^2 n flops) or ``x op(a) = alpha b`` (side 'R',
    m n^2 flops) for ``x``, which overwrites ``b``."""
    side, uplo, trans, diag = _tri_args("trsm", a, b, side, uplo, trans, diag)
    if b.size == 0:
        return
    alpha = _scalar(alpha, b.dtype)
    rhs = b.shape[1] if side == "L" else b.shape[0]
    if a.shape[0] > TRSM_LEAF and rhs >= TRSM_HALVES_MIN_RHS and a.dtype == b.dtype:
        _trsm_halves(alpha, a, b, side, uplo, trans, diag)
        return
    if _blas_tri("trsm", alpha, a, b, side, uplo, trans, diag):
        return
    from scipy.linalg import solve_triangular

    kw = dict(lower=uplo == "L", unit_diagonal=diag == "U", check_finite=False)
    if side == "L":
        x = solve_triangular(a, b, trans=trans, **kw)
    elif trans == "N":  # x a = b  <=>  a^T x^T = b^T
        x = solve_triangular(a, b.T, trans="T", **kw).T
    elif trans == "T":  # x a^T = b  <=>  a x^T = b^T
        x = solve_triangular(a, b.T, trans="N", **kw).T
    else:  # x a^H = b  <=>  a x^H = b^H
        x = solve_triangular(a, b.conj().T, trans="N", **kw).conj().T
    _axpby(alpha, np.asarray(x, dtype=b.dtype), 0, b)


def lapack() -> Any:
    """SciPy's LAPACK wrappers (``scipy.linalg.lapack``). The CPU backend imports them when it is
    created, on the host thread (a stream thread importing SciPy while another thread imports
    it too can fail with ``_DeadlockError``), so here this is a lookup."""
    from scipy.linalg import lapack as module

    return module


def potrf(a: np.ndarray, uplo: str, info: np.ndarray) -> None:
    """Cholesky factorisation of ``a`` in place (LAPACK ``xpotrf`` through SciPy, n^3/3 flops):
    only the ``uplo`` triangle is read and written; LAPACK's INFO goes to ``info[0]``."""
    uplo = _check("uplo", uplo, "LU")
    n = a.shape[0]
    if a.ndim != 2 or a.shape != (n, n):
        raise ValueError(f"potrf needs a square matrix, got shape {a.shape}")
    if n == 0:
        info[0] = 0
        return
    fn = lapack().get_lapack_funcs("potrf", dtype=a.dtype)
    # a C-ordered view is a Fortran-ordered a^T = conj(a) with the other triangle: factoring
    # that in place gives the wanted factor in our triangle without a copy (when contiguous)
    low = uplo == "L"
    if a.flags.c_contiguous:
        c, inf = fn(a.T, lower=not low, clean=0, overwrite_a=1)
        if not np.shares_memory(c, a):
            a[...] = c.T
    else:
        c, inf = fn(a, lower=low, clean=0, overwrite_a=0)
        a[...] = c
    info[0] = inf


def modified_lu(a: np.ndarray, d: np.ndarray) -> None:
    """The leaf of Householder reconstruction's LU in place (``Backend.modified_lu``): column
    by column, the sign, the pivot ``u = a_jj - d_j``, the column below divided by it and the
    rank-1 update of the rest (LAPACK ``xLAORHR_COL_GETRFNP2`` unblocked)."""
    h, w = a.shape
    if h < w:
        raise ValueError(f"modified_lu needs an h x w panel with h >= w, got {a.shape}")
    for j in range(w):
        s = -1.0 if a[j, j].real >= 0 else 1.0  # (NaN: +1, as the GPU's comparison)
        u = a[j, j] - s
        a[j, j] = u
        d[j] = s
        a[j + 1 :, j] /= u
        a[j + 1 :, j + 1 : w] -= np.outer(a[j + 1 :, j], a[j, j + 1 : w])


def getrf(a: np.ndarray, ipiv: np.ndarray, info: np.ndarray) -> None:
    """LU factorisation with partial pivoting of the ``m x k`` ``a`` in place (LAPACK ``xgetrf``
    through SciPy, ``m k^2 - k^3 / 3`` flops for ``m >= k``): ``a = P L U``, ``L`` unit lower
    below the diagonal, ``U`` on and above it. The 0-based row interchanges go to ``ipiv``
    (``min(m, k)`` entries: row ``i`` was swapped with row ``ipiv[i]``), LAPACK's INFO (``0``,
    or ``j > 0`` when ``U[j - 1, j - 1]`` is exactly zero) to ``info[0]``."""
    if a.ndim != 2:
        raise ValueError(f"getrf needs a matrix, got shape {a.shape}")
    if min(a.shape) == 0:
        info[0] = 0
        return
    fn = lapack().get_lapack_funcs("getrf", dtype=a.dtype)
    lu, piv, inf = fn(np.asfortranarray(a), overwrite_a=1)  # in place if ``a`` is Fortran
    if not np.may_share_memory(lu, a):
        a[...] = lu
    ipiv[: piv.shape[0]] = piv
    info[0] = inf


def solve_transposed_lu(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray | None, int]:
    """``x = a^{-1} b`` for the row-major ``a`` (``n x n``) and ``b`` (``n x k``), through the LU
    with partial pivoting of ``a^T`` -- which is ``a``'s memory read column-major, so one plain
    copy feeds LAPACK's ``xgetrf`` where the LU of ``a`` needs a transposing one -- and
    ``xgetrs`` with ``trans='T'`` (``a = (a^T)^T = U^T L^T P^T``). Backward stable as GEPP of
    ``a``. Returns ``(x, -1)``, or ``(None, j)`` when ``U[j, j]`` is exactly zero (``a`` is
    singular). ``a`` and ``b`` are not modified."""
    getrf, getrs = lapack().get_lapack_funcs(("getrf", "getrs"), dtype=a.dtype)
    at = np.array(a.T, order="F")  # a's bytes as they are: a memcpy
    lu, piv, info = getrf(at, overwrite_a=1)
    if info > 0:
        return None, int(info) - 1
    x, info = getrs(lu, piv, b, trans=1, overwrite_b=0)
    return np.ascontiguousarray(x), -1


def _lapack(name: str, dtype: np.dtype) -> Any:
    from scipy.linalg import lapack

    return lapack.get_lapack_funcs(name, dtype=dtype)


def _lwork(fn: Any, *args: Any, **kwargs: Any) -> int:
    """LAPACK's optimal workspace for ``fn(*args)`` (a query with ``lwork=-1``): without it
    SciPy's wrappers pass the minimum, and LAPACK then runs its unblocked BLAS2 code."""
    work = fn(*args, lwork=-1, **kwargs)[-2]
    return max(1, int(np.real(work[0])))


def _complex_name(real: str, cplx: str, dtype: np.dtype) -> str:
    return cplx if dtype.kind == "c" else real


def geqrf(a: np.ndarray, tau: np.ndarray, info: np.ndarray) -> None:
    """QR factorisation of the ``m x k`` ``a`` in place (LAPACK ``xgeqrf`` through SciPy,
    ``2 m k^2 - 2 k^3 / 3`` flops for ``m >= k``): ``R`` on and above the diagonal, the
    Householder vectors below it, their scalars in ``tau[:min(m, k)]``, INFO in ``info[0]``.
    A Fortran-ordered ``a`` is factored without a copy."""
    if a.ndim != 2:
        raise ValueError(f"geqrf needs a matrix, got shape {a.shape}")
    if min(a.shape) == 0:
        info[0] = 0
        return
    fn = _lapack("geqrf", a.dtype)
    work = np.asfortranarray(a)
    qr, t, _, inf = fn(work, lwork=_lwork(fn, work), overwrite_a=1)
    if not np.may_share_memory(qr, a):
        a[...] = qr
    tau[: t.shape[0]] = t
    info[0] = inf


def geqrt(a: np.ndarray, tau: np.ndarray, t: np.ndarray, info: np.ndarray) -> None:
    """:func:`geqrf` of ``a`` in place with the ``p x p`` compact-WY factor ``T`` of its
    reflectors into ``t`` (``p = min(m, k)``; LAPACK ``xgeqrt`` with ``nb = p``, which is one
    recursive ``xgeqrt3``: BLAS3 where ``xgeqrf`` runs its inner columns in BLAS2)."""
    if a.ndim != 2:
        raise ValueError(f"geqrt needs a matrix, got shape {a.shape}")
    p = min(a.shape)
    if p == 0:
        info[0] = 0
        return
    work = np.asfortranarray(a)
    qr, tt, inf = _lapack("geqrt", a.dtype)(p, work, overwrite_a=1)
    if not np.may_share_memory(qr, a):
        a[...] = qr
    t[...] = tt
    tau[:p] = np.diagonal(tt)
    info[0] = inf


def orgqr(a: np.ndarray, tau: np.ndarray, info: np.ndarray) -> None:
    """The ``m x n`` ``Q`` of the reflectors in the first ``tau.size`` columns of ``a``, in
    place (LAPACK ``xorgqr``/``xungqr`` through SciPy)."""
    m, n = a.shape
    if not tau.size <= n <= m:
        raise ValueError(f"orgqr needs tau.size <= n <= m, got a {a.shape} and {tau.size} taus")
    if n == 0:
        info[0] = 0
        return
    if tau.size == 0:  # no reflector: Q is the identity's first n columns
        a[...] = np.eye(m, n, dtype=a.dtype)
        info[0] = 0
        return
    fn = _lapack(_complex_name("orgqr", "ungqr", a.dtype), a.dtype)
    work = np.asfortranarray(a)
    t = np.ascontiguousarray(tau, dtype=a.dtype)
    q, _, inf = fn(work, t, lwork=_lwork(fn, work, t), overwrite_a=1)
    if not np.may_share_memory(q, a):
        a[...] = q
    info[0] = inf


def ormqr(
    side: str, trans: str, a: np.ndarray, tau: np.ndarray, c: np.ndarray, info: np.ndarray
) -> None:
    """``c := op(Q) c`` (side 'L') or ``c op(Q)`` (side 'R') in place, ``Q`` the product of the
    reflectors in the first ``tau.size`` columns of ``a`` (LAPACK ``xormqr``/``xunmqr`` through
    SciPy); ``trans`` 'N' or 'C' ('T' for a real dtype is 'C')."""
    side = _check("side", side, "LR")
    trans = _check("trans", trans, "NTC")
    rows = c.shape[0] if side == "L" else c.shape[1]
    if a.ndim != 2 or c.ndim != 2 or a.shape[0] != rows or tau.size > min(a.shape):
        raise ValueError(f"ormqr shapes: a {a.shape}, {tau.size} taus, c {c.shape}, side {side}")
    if c.size == 0 or tau.size == 0:
        info[0] = 0
        return
    dt = c.dtype
    t = "N" if trans == "N" else ("C" if dt.kind == "c" else "T")
    fn = _lapack(_complex_name("ormqr", "unmqr", dt), dt)
    v = np.asfortranarray(a[:, : tau.size])
    tv = np.ascontiguousarray(tau, dtype=dt)
    work = np.asfortranarray(c)
    lwork = max(1, int(np.real(fn(side, t, v, tv, work, -1)[1][0])))
    cq, _, inf = fn(side, t, v, tv, work, lwork, overwrite_c=1)
    if not np.may_share_memory(cq, c):
        c[...] = cq
    info[0] = inf
