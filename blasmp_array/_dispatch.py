"""Strict registry of the NumPy functions and ufuncs a BlockCyclicArray implements.

``BlockCyclicArray.__array_function__`` and ``__array_ufunc__`` land here. A NumPy function or
ufunc runs distributed only if an implementation was registered with :func:`implements` or
:func:`implements_ufunc`; anything else returns ``NotImplemented``, so NumPy raises a
``TypeError`` naming the function (never a silent gather-and-compute fallback). To run an
unsupported NumPy function, gather explicitly with ``A.to_numpy()``.

Implementations live in :mod:`blasmp_array.ops.elementwise` (ufuncs),
:mod:`blasmp_array.ops.reductions` (reductions, triangles, ``*_like``, ...) and
:mod:`blasmp_array.ops.functions` (diagonals, stacking, products, einsum, ...); they are imported on
the first dispatch so that ``import blasmp_array`` stays cheap and free of import cycles.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = [
    "implements",
    "implements_ufunc",
    "array_function",
    "array_ufunc",
    "registered_functions",
    "registered_ufuncs",
]

_FUNCTIONS: dict[Any, Callable[..., Any]] = {}
_UFUNCS: dict[np.ufunc, Callable[..., Any]] = {}
_loaded = False


def implements(*numpy_functions: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated function as the implementation of ``numpy_functions``.

    The implementation is called with the arguments exactly as the user passed them to the
    NumPy function, so its signature should mirror NumPy's (keywords included).
    """

    def decorator(impl: Callable[..., Any]) -> Callable[..., Any]:
        for f in numpy_functions:
            _FUNCTIONS[f] = impl
        return impl

    return decorator


def implements_ufunc(*ufuncs: np.ufunc) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated function for ``ufunc(...)`` calls (method ``'__call__'``).

    The implementation is called as ``impl(ufunc, *inputs, out=out, **kwargs)`` where ``out`` is
    ``None`` or the tuple of output arrays NumPy normalised.
    """

    def decorator(impl: Callable[..., Any]) -> Callable[..., Any]:
        for u in ufuncs:
            _UFUNCS[u] = impl
        return impl

    return decorator


def _load() -> None:
    global _loaded
    if not _loaded:
        from .ops import (  # noqa: F401  (they register themselves)
            cholesky,
            elementwise,
            functions,
            lu,
            reductions,
        )

        _loaded = True


def registered_functions() -> frozenset[Any]:
    """The NumPy functions with a distributed implementation."""
    _load()
    return frozenset(_FUNCTIONS)


def registered_ufuncs() -> frozenset[np.ufunc]:
    """The ufuncs with a distributed implementation (``np.matmul`` included)."""
    _load()
    return frozenset(_UFUNCS) | {np.matmul}


def array_function(func: Any, types: Any, args: Any, kwargs: Any) -> Any:
    """``__array_function__``: the registered implementation, or ``NotImplemented``."""
    _load()
    impl = _FUNCTIONS.get(func)
    if impl is None:
        return NotImplemented
    return impl(*args, **kwargs)


def array_ufunc(ufunc: np.ufunc, method: str, inputs: Any, kwargs: dict[str, Any]) -> Any:
    """``__array_ufunc__``: only plain calls (``method == '__call__'``) of registered ufuncs."""
    if method != "__call__":
        return NotImplemented
    if ufunc is np.matmul:
        return _matmul(inputs, kwargs)
    _load()
    impl = _UFUNCS.get(ufunc)
    if impl is None:
        return NotImplemented
    return impl(ufunc, *inputs, **kwargs)


def _matmul(inputs: Any, kwargs: dict[str, Any]) -> Any:
    from .array import BlockCyclicArray

    out = kwargs.pop("out", None)
    if kwargs:
        raise TypeError(
            f"np.matmul on BlockCyclicArrays does not support the keywords {sorted(kwargs)}"
        )
    a, b = inputs
    for x in (a, b):
        if not isinstance(x, BlockCyclicArray):
            raise TypeError(
                f"np.matmul needs two BlockCyclicArrays, got {type(x).__name__}; distribute "
                "NumPy operands with bm.from_numpy(...) (matrix-scalar products use `*`)"
            )
    from .ops.matmul import matmul

    result = matmul(a, b)
    if out is None:
        return result
    from .ops.elementwise import assign

    (target,) = out
    assign(target, result)
    return target
