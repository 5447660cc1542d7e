"""``np.nansum``, ``np.nanmean``, ``np.nanmax``, ``np.nanmin``, ``np.ptp`` and ``np.average``
on BlockCyclicArrays, composed of the element-wise operators and the reductions.

Each is the NumPy call of the same meaning, made of calls the library already distributes:
``nansum`` is the sum of ``where(isnan(a), 0, a)``, ``nanmax`` the maximum of ``a`` with its
NaNs made ``-inf`` (NaN again where a slice holds only NaNs, as NumPy's, which also warns),
``nanmean`` the ratio of the NaN-free sum and count, ``ptp`` the maximum minus the minimum,
``average`` the mean or the weighted sum over the sum of the weights. Results are NumPy
scalars on every rank, or distributed vectors along an axis.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..._dispatch import implements
from .reductions import _NOVALUE, _no_extras, _require

__all__: list[str] = []


def _has_nan(a: Any) -> bool:
    return bool(np.dtype(a.dtype).kind in "fc")


@implements(np.nansum)
def _nansum(
    a: Any,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    keepdims: bool = False,
    initial: Any = _NOVALUE,
    where: Any = _NOVALUE,
) -> Any:
    """``np.nansum``: the sum with NaNs counted as zero."""
    _no_extras("np.nansum", out, initial=initial, where=where)
    a = _require(a, "np.nansum")
    x = np.where(np.isnan(a), 0, a) if _has_nan(a) else a
    return np.sum(x, axis=axis, dtype=dtype, keepdims=keepdims)


def _count(nan: Any, axis: Any, keepdims: bool) -> Any:
    """The number of non-NaN elements (along ``axis``) of the array whose ``isnan`` is
    ``nan``."""
    return np.sum(~nan, axis=axis, keepdims=keepdims)


@implements(np.nanmean)
def _nanmean(
    a: Any,
    axis: Any = None,
    dtype: Any = None,
    out: Any = None,
    keepdims: bool = False,
    where: Any = _NOVALUE,
) -> Any:
    """``np.nanmean``: the mean of the non-NaN elements (NaN, with NumPy's warning, where there
    are none)."""
    _no_extras("np.nanmean", out, where=where)
    a = _require(a, "np.nanmean")
    if not _has_nan(a):
        return np.mean(a, axis=axis, dtype=dtype, keepdims=keepdims)
    nan = np.isnan(a)  # one pass, for the sum and the count
    total = np.sum(np.where(nan, 0, a), axis=axis, dtype=dtype, keepdims=keepdims)
    count = _count(nan, axis, keepdims)
    if np.ndim(count) == 0 and int(count) == 0:
        warnings.warn("Mean of empty slice", RuntimeWarning, stacklevel=3)
    with np.errstate(invalid="ignore", divide="ignore"):
        return total / count


def _nanextreme(name: str, fold: Any, fill: float) -> Any:
    def impl(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, **kw: Any) -> Any:
        _no_extras(f"np.{name}", out, **kw)
        x = _require(a, f"np.{name}")
        if not _has_nan(x):
            return fold(x, axis=axis, keepdims=keepdims)
        if np.dtype(x.dtype).kind == "c":
            raise TypeError(f"np.{name} of a complex BlockCyclicArray is not supported")
        nan = np.isnan(x)  # one pass, for the fill and the count
        res = fold(np.where(nan, fill, x), axis=axis, keepdims=keepdims)
        empty = _count(nan, axis, keepdims) == 0
        if np.ndim(empty) == 0:
            if bool(empty):
                warnings.warn("All-NaN slice encountered", RuntimeWarning, stacklevel=3)
                return x.dtype.type(np.nan)
            return res
        return np.where(empty, np.nan, res)

    impl.__name__ = impl.__qualname__ = f"_{name}"
    impl.__doc__ = f"``np.{name}``: ignoring NaNs (NaN where a slice holds only NaNs)."
    return impl


implements(np.nanmax)(_nanextreme("nanmax", np.max, -np.inf))
implements(np.nanmin)(_nanextreme("nanmin", np.min, np.inf))


@implements(np.ptp)
def _ptp(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """``np.ptp``: the maximum minus the minimum."""
    _no_extras("np.ptp", out)
    a = _require(a, "np.ptp")
    return np.max(a, axis=axis, keepdims=keepdims) - np.min(a, axis=axis, keepdims=keepdims)


@implements(np.average)
def _average(
    a: Any, axis: Any = None, weights: Any = None, returned: bool = False, *, keepdims: bool = False
) -> Any:
    """``np.average``: the mean, or with ``weights`` (of ``a``'s shape) ``sum(a * w) /
    sum(w)``; ``returned=True`` adds the sum of the weights (the count without them)."""
    a = _require(a, "np.average")
    if weights is None:
        avg = np.mean(a, axis=axis, keepdims=keepdims)
        if not returned:
            return avg
        n = a.size if axis is None else a.shape[axis]
        return avg, (np.full_like(avg, n) if np.ndim(avg) else np.asarray(avg).dtype.type(n))
    w = _require(weights, "np.average")
    if w.shape != a.shape:
        raise TypeError(
            f"np.average: weights of shape {w.shape} differ from a's {a.shape}; weights of "
            "a's shape are supported"
        )
    scl = np.sum(w, axis=axis, keepdims=keepdims)
    if np.ndim(scl) == 0 and scl == 0:
        raise ZeroDivisionError("Weights sum to zero, can't be normalized")
    avg = np.sum(a * w, axis=axis, keepdims=keepdims) / scl
    return (avg, scl) if returned else avg
