"""Reference results and error bounds for the BLAS3 tests (shared by test_blas3 and test_trsm).

References are computed in higher precision (complex128 / float64 for single precision inputs,
``np.longdouble`` products for double precision when affordable) from gathered NumPy matrices.
Accuracy is judged with the componentwise bound of a dot-product-based algorithm:

    |C - C_ref| <= c * k * eps * (|alpha| |op(A)| |op(B)| + |beta| |C0|)

elementwise, with ``eps`` the unit roundoff of the result dtype and ``c`` a small constant.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "DTYPES",
    "eps",
    "high",
    "op",
    "random_matrix",
    "poison",
    "check_bound",
    "assert_within_bound",
    "sym_from",
    "herm_from",
    "tri_from",
]

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]

#: the constant ``c`` of the bound (a little slack for blocked summation orders)
BOUND_C = 4.0


def eps(dtype: Any) -> float:
    """Unit roundoff of ``dtype`` (``finfo.eps`` of its real type)."""
    return float(np.finfo(np.dtype(dtype)).eps)


def high(x: np.ndarray) -> np.ndarray:
    """``x`` in the higher precision the references use (complex256/longdouble where NumPy
    has them, else complex128/float64)."""
    x = np.asarray(x)
    if x.dtype.kind == "c":
        return x.astype(np.clongdouble)
    return x.astype(np.longdouble)


def op(x: np.ndarray, trans: str) -> np.ndarray:
    """``op(x)`` for trans in 'N', 'T', 'C' (case-insensitive)."""
    t = trans.upper()
    if t == "N":
        return x
    if t == "T":
        return x.T
    return x.conj().T


def random_matrix(rng: np.random.Generator, shape: tuple[int, int], dtype: Any) -> np.ndarray:
    """Standard normal entries (real and imaginary parts for complex dtypes)."""
    dt = np.dtype(dtype)
    x = rng.standard_normal(shape)
    if dt.kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dt)


def poison(x: np.ndarray, where: str, value: float = np.nan) -> np.ndarray:
    """A copy of square ``x`` with ``value`` in the part that must not be read:
    'upper'/'lower' (strict triangles), 'diag', 'all'."""
    y = np.array(x, copy=True)
    n = min(y.shape)
    i, j = np.indices(y.shape)
    if where == "upper":
        y[i < j] = value
    elif where == "lower":
        y[i > j] = value
    elif where == "diag":
        d = np.arange(n)
        y[d, d] = value
    elif where == "all":
        y[...] = value
    else:
        raise ValueError(where)
    return y


def sym_from(x: np.ndarray, lower: bool) -> np.ndarray:
    """The symmetric matrix held in the ``lower`` (or upper) triangle of ``x``."""
    t = np.tril(x) if lower else np.triu(x)
    return t + (np.tril(x, -1) if lower else np.triu(x, 1)).T


def herm_from(x: np.ndarray, lower: bool) -> np.ndarray:
    """The Hermitian matrix held in the ``lower`` (or upper) triangle of ``x``."""
    t = np.tril(x) if lower else np.triu(x)
    return t + (np.tril(x, -1) if lower else np.triu(x, 1)).conj().T


def tri_from(x: np.ndarray, lower: bool, unit: bool) -> np.ndarray:
    """The triangular matrix of ``x`` (the diagonal replaced by ones when ``unit``)."""
    t = np.tril(np.nan_to_num(x, nan=0.0), -1 if unit else 0)
    t = t if lower else np.triu(np.nan_to_num(x, nan=0.0), 1 if unit else 0)
    if unit:
        t = t + np.eye(x.shape[0], dtype=x.dtype)
    return t


def check_bound(
    got: np.ndarray,
    ref: np.ndarray,
    scale: np.ndarray,
    k: int,
    dtype: Any,
    c: float = BOUND_C,
) -> tuple[bool, float]:
    """``(ok, worst ratio)`` of ``|got - ref| <= c * max(k, 1) * eps * scale`` elementwise.

    ``scale`` is ``|alpha| |op(A)| |op(B)| + |beta| |C0|`` (computed by the caller in
    float64). NaN anywhere in ``got`` fails. The worst ratio is ``max |got - ref| / bound``
    (over elements with a nonzero bound; ``inf`` for errors where the bound is zero).
    """
    got = np.asarray(got)
    if got.shape != ref.shape:
        return False, float("inf")
    if not np.all(np.isfinite(got)):
        return False, float("inf")
    err = np.abs(got.astype(np.clongdouble) - ref.astype(np.clongdouble)).astype(np.float64)
    # a small absolute floor: results of exactly cancelling sums are rounded to ~eps * scale
    bound = c * max(k, 1) * eps(dtype) * np.asarray(scale, dtype=np.float64)
    bad = err > bound
    if not bad.any():
        nz = bound > 0
        worst = float((err[nz] / bound[nz]).max()) if nz.any() else 0.0
        return True, worst
    nz = bound > 0
    worst = float((err[nz] / bound[nz]).max()) if nz.any() else 0.0
    if (bad & ~nz).any():
        worst = float("inf")
    return False, worst


def assert_within_bound(
    got: np.ndarray, ref: np.ndarray, scale: np.ndarray, k: int, dtype: Any, what: str = ""
) -> None:
    ok, worst = check_bound(got, ref, scale, k, dtype)
    if not ok:
        err = np.abs(np.asarray(got, dtype=np.complex128) - np.asarray(ref, np.complex128))
        where = np.unravel_index(np.nanargmax(np.where(np.isnan(err), np.inf, err)), err.shape)
        raise AssertionError(
            f"{what}: error exceeds {BOUND_C} * k * eps * scale (worst ratio {worst:.3g}; "
            f"k={k}, dtype={np.dtype(dtype)}; worst element {where}: got {got[where]!r}, "
            f"ref {ref[where]!r})"
        )
