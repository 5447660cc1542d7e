"""Local BLAS3 kernels of the CPU backend, in place on (possibly strided) 2-D NumPy views.

Semantics follow reference BLAS (``beta == 0`` never reads ``c``; only the ``uplo`` triangle of
``c`` is written by SYRK/SYR2K, and only the ``uplo`` triangle of ``a`` is read by TRMM/TRSM,
without its diagonal when ``diag == 'U'``). ``trans == 'C'`` on a complex SYRK/SYR2K means
HERK/HER2K (``a^H a``, ``alpha a^H b + conj(alpha) b^H a``), with the imaginary part of the
diagonal of ``c`` set to zero.

These implementations use ``numpy.matmul`` and ufuncs, which release the GIL, so that they
overlap with a communication thread; see ``cpu.py``'s docstring for the measurements.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["gemm", "syrk", "syr2k", "trmm", "trsm"]


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


def _scalar(value: Any, dtype: np.dtype) -> Any:
    if dtype.kind != "c":
        value = complex(value)
        if value.imag != 0:
            raise TypeError(f"a complex scalar {value} cannot scale a {dtype} matrix")
        return dtype.type(value.real)
    return dtype.type(value)


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


def _tri_mask(n: int, uplo: str) -> np.ndarray:
    i = np.arange(n)
    return (i[:, None] >= i[None, :]) if uplo == "L" else (i[:, None] <= i[None, :])


def _write_triangle(c: np.ndarray, new: np.ndarray, uplo: str, hermitian: bool) -> None:
    mask = _tri_mask(c.shape[0], uplo)
    if hermitian:
        d = np.arange(c.shape[0])
        new[d, d] = new[d, d].real
    np.copyto(c, new, where=mask)


def gemm(alpha, a, b, beta, c, trans_a, trans_b) -> None:  # type: ignore[no-untyped-def]
    """``c := alpha op(a) op(b) + beta c``."""
    ta = _check("trans_a", trans_a, "NTC")
    tb = _check("trans_b", trans_b, "NTC")
    opa, opb = _op(a, ta), _op(b, tb)
    if (
        c.ndim != 2
        or opa.shape[0] != c.shape[0]
        or opb.shape[1] != c.shape[1]
        or (opa.shape[1] != opb.shape[0])
    ):
        raise ValueError(
            f"gemm shapes: op(a) {opa.shape} @ op(b) {opb.shape} does not fit c {c.shape}"
        )
    if c.size == 0:
        return
    alpha, beta = _scalar(alpha, c.dtype), _scalar(beta, c.dtype)
    if alpha == 0 or opa.shape[1] == 0:
        _axpby(0, np.zeros(c.shape, c.dtype), beta, c)
        return
    prod = np.matmul(opa, opb).astype(c.dtype, copy=False)
    _axpby(alpha, prod, beta, c)


def syrk(alpha, a, beta, c, uplo, trans) -> None:  # type: ignore[no-untyped-def]
    """``c := alpha op(a) op(a)^T + beta c`` on the ``uplo`` triangle ('C': HERK, a^H a)."""
    uplo = _check("uplo", uplo, "LU")
    trans = _check("trans", trans, "NTC")
    herm = trans == "C" and c.dtype.kind == "c"
    opa = _op(a, trans)
    n = c.shape[0]
    if c.ndim != 2 or c.shape[1] != n or opa.shape[0] != n:
        raise ValueError(f"syrk shapes: op(a) {opa.shape} does not fit square c {c.shape}")
    if n == 0:
        return
    alpha, beta = _scalar(alpha, c.dtype), _scalar(beta, c.dtype)
    if alpha == 0 or opa.shape[1] == 0:
        prod = np.zeros(c.shape, c.dtype)
    else:
        prod = np.matmul(opa, opa.conj().T if herm else opa.T).astype(c.dtype, copy=False)
        prod *= alpha
    if beta != 0:
        prod += beta * c
    _write_triangle(c, prod, uplo, herm)


def syr2k(alpha, a, b, beta, c, uplo, trans) -> None:  # type: ignore[no-untyped-def]
    """``c := alpha op(a) op(b)^T + alpha op(b) op(a)^T + beta c`` on ``uplo`` ('C': HER2K)."""
    uplo = _check("uplo", uplo, "LU")
    trans = _check("trans", trans, "NTC")
    herm = trans == "C" and c.dtype.kind == "c"
    opa, opb = _op(a, trans), _op(b, trans)
    n = c.shape[0]
    if c.ndim != 2 or c.shape[1] != n or opa.shape[0] != n or opb.shape != opa.shape:
        raise ValueError(
            f"syr2k shapes: op(a) {opa.shape}, op(b) {opb.shape} do not fit square c {c.shape}"
        )
    if n == 0:
        return
    alpha, beta = _scalar(alpha, c.dtype), _scalar(beta, c.dtype)
    if alpha == 0 or opa.shape[1] == 0:
        prod = np.zeros(c.shape, c.dtype)
    else:
        # op(b) op(a)^T is the (conjugate) transpose of x = op(a) op(b)^T: one product
        x = np.matmul(opa, opb.conj().T if herm else opb.T).astype(c.dtype, copy=False)
        prod = alpha * x
        prod += (np.conj(alpha) * x.conj().T) if herm else (alpha * x.T)
    if beta != 0:
        prod += beta * c
    _write_triangle(c, prod, uplo, herm)


def _triangle(a: np.ndarray, uplo: str, diag: str) -> np.ndarray:
    t = np.tril(a) if uplo == "L" else np.triu(a)
    if diag == "U":
        np.fill_diagonal(t, 1)
    return t


def _check_tri(name: str, a: np.ndarray, b: np.ndarray, side: str) -> None:
    n = b.shape[0] if side == "L" else b.shape[1]
    if a.ndim != 2 or b.ndim != 2 or a.shape != (n, n):
        raise ValueError(f"{name} shapes: a {a.shape} must be {n}x{n} for b {b.shape}, side {side}")


def trmm(alpha, a, b, side, uplo, trans, diag) -> None:  # type: ignore[no-untyped-def]
    """``b := alpha op(a) b`` (side 'L') or ``b := alpha b op(a)`` (side 'R'), a triangular."""
    side = _check("side", side, "LR")
    uplo = _check("uplo", uplo, "LU")
    trans = _check("trans", trans, "NTC")
    diag = _check("diag", diag, "NU")
    _check_tri("trmm", a, b, side)
    if b.size == 0:
        return
    alpha = _scalar(alpha, b.dtype)
    t = _op(_triangle(a, uplo, diag), trans)
    prod = np.matmul(t, b) if side == "L" else np.matmul(b, t)
    _axpby(alpha, prod.astype(b.dtype, copy=False), 0, b)


def trsm(alpha, a, b, side, uplo, trans, diag) -> None:  # type: ignore[no-untyped-def]
    """Solve ``op(a) x = alpha b`` (side 'L') or ``x op(a) = alpha b`` (side 'R'); x -> b."""
    from scipy.linalg import solve_triangular

    side = _check("side", side, "LR")
    uplo = _check("uplo", uplo, "LU")
    trans = _check("trans", trans, "NTC")
    diag = _check("diag", diag, "NU")
    _check_tri("trsm", a, b, side)
    if b.size == 0:
        return
    alpha = _scalar(alpha, b.dtype)
    lower = uplo == "L"
    unit = diag == "U"
    if side == "L":
        x = solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit, check_finite=False)
    elif trans == "N":  # x a = b  <=>  a^T x^T = b^T
        x = solve_triangular(
            a, b.T, trans="T", lower=lower, unit_diagonal=unit, check_finite=False
        ).T
    elif trans == "T":  # x a^T = b  <=>  a x^T = b^T
        x = solve_triangular(
            a, b.T, trans="N", lower=lower, unit_diagonal=unit, check_finite=False
        ).T
    else:  # x a^H = b  <=>  a x^H = b^H
        x = (
            solve_triangular(
                a, b.conj().T, trans="N", lower=lower, unit_diagonal=unit, check_finite=False
            )
            .conj()
            .T
        )
    _axpby(alpha, np.asarray(x, dtype=b.dtype), 0, b)
