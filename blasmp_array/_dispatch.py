"""Strict registries of what a BlockCyclicArray delegates to the layers above it.

The array (:mod:`blasmp_array.array`) sits below the operators, the construction functions and
the I/O package, so it never imports them, not even lazily inside a method (the import-layer
check of ``.ci/run`` enforces this; see ``CONTRIBUTING.md``). Instead it looks its
implementations up here, and the higher layers fill these tables when they are imported --
``import blasmp_array`` imports them all, so the tables are full before any user code runs. The
pattern is Dask's and CuPy's ``__array_function__`` registries.

Three tables:

* **NumPy functions** (``__array_function__``), filled with :func:`implements`.
* **ufuncs** (``__array_ufunc__``, ``np.matmul`` and so ``@`` included), filled with
  :func:`implements_ufunc`.
* **array methods** that need an operator (``A.redistribute``, ``A[i0:i1, j0:j1]``,
  ``A.T.resolve()``, ``A.to_numpy``, ``A.to_zarr``, ...), filled with
  :func:`implements_method` and looked up with :func:`method`.

A NumPy function or ufunc runs distributed only if an implementation was registered; anything
else returns ``NotImplemented``, so NumPy raises a ``TypeError`` naming the function (never a
silent gather-and-compute fallback). To run an unsupported NumPy function, gather explicitly with
``A.to_numpy()``. A method with no registered implementation raises a ``RuntimeError`` naming it.

Who fills what: :mod:`blasmp_array.ops.engine.elementwise` (ufuncs),
:mod:`blasmp_array.ops.face.reductions`,
:mod:`blasmp_array.ops.face.functions`, :mod:`blasmp_array.ops.face.products`,
:mod:`blasmp_array.ops.engine.selection` and :mod:`blasmp_array.ops.face.scans` (NumPy functions)
register themselves, and :mod:`blasmp_array.ops.lapack.solves` wraps the ``np.linalg`` solvers that
:mod:`blasmp_array.ops.lapack.lu` and :mod:`blasmp_array.ops.lapack.cholesky` registered
(:func:`wrap_implementation`); :mod:`blasmp_array.ops.face._methods` registers ``np.matmul`` and the
operator-backed methods and imports the modules above; :mod:`blasmp_array.creation` registers
``gather``; :mod:`blasmp_array.io` registers ``to_dask``, ``to_zarr`` and ``to_npy``. This module
imports nothing of the package.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = [
    "implements",
    "wrap_implementation",
    "implements_ufunc",
    "implements_method",
    "method",
    "array_function",
    "array_ufunc",
    "registered_functions",
    "registered_ufuncs",
    "registered_methods",
]

_FUNCTIONS: dict[Any, Callable[..., Any]] = {}
_UFUNCS: dict[np.ufunc, Callable[..., Any]] = {}
_METHODS: dict[str, Callable[..., Any]] = {}


def implements(*numpy_functions: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated function as the implementation of ``numpy_functions``.

    The implementation is called with the arguments exactly as the user passed them to the
    NumPy function, so its signature should mirror NumPy's (keywords included). A NumPy
    function registered twice raises ``ValueError`` (NumPy's aliases are one object:
    ``np.permute_dims is np.transpose``, so registering an alias would replace the original).
    """

    def decorator(impl: Callable[..., Any]) -> Callable[..., Any]:
        for f in numpy_functions:
            known = _FUNCTIONS.get(f)
            if known is not None and _qualified(known) != _qualified(impl):
                raise ValueError(
                    f"{getattr(f, '__name__', f)!r} is already implemented by "
                    f"{_qualified(known)}; {_qualified(impl)} cannot register it too"
                )
            _FUNCTIONS[f] = impl
        return impl

    return decorator


def wrap_implementation(
    numpy_function: Any, wrapper: Callable[[Callable[..., Any]], Callable[..., Any]]
) -> Callable[..., Any]:
    """Replace the registered implementation ``impl`` of ``numpy_function`` by
    ``wrapper(impl)`` and return the new one: a higher layer adapts what a lower one registered
    (e.g. vector right-hand sides around the solves) without the two agreeing on an import
    order. ``RuntimeError`` if nothing is registered yet (import the implementing module
    first)."""
    impl = _FUNCTIONS.get(numpy_function)
    if impl is None:
        raise RuntimeError(
            f"wrap_implementation: no implementation of {numpy_function!r} is registered yet; "
            "import the module that registers it first"
        )
    _FUNCTIONS[numpy_function] = wrapped = wrapper(impl)
    return wrapped


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


def implements_method(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated function as the implementation ``name`` of an array method.

    ``name`` is the name of the public function that implements it (``"redistribute"``,
    ``"transpose"``, ``"getitem"``, ...); the array calls it with the array as the first
    argument. A second, different implementation of the same name is an error (two modules
    claiming one method would make the result depend on the import order).
    """

    def decorator(impl: Callable[..., Any]) -> Callable[..., Any]:
        known = _METHODS.get(name)
        if known is not None and _qualified(known) != _qualified(impl):
            raise ValueError(
                f"array method {name!r} is already implemented by {_qualified(known)}; "
                f"{_qualified(impl)} cannot register it too"
            )
        _METHODS[name] = impl
        return impl

    return decorator


def _qualified(f: Callable[..., Any]) -> str:
    return f"{getattr(f, '__module__', '?')}.{getattr(f, '__qualname__', repr(f))}"


def method(name: str) -> Callable[..., Any]:
    """The registered implementation ``name`` of an array method (see :func:`implements_method`).

    Raises
    ------
    RuntimeError
        If no module registered ``name``: the module that implements it was not imported (a
        method called while ``blasmp_array`` is still being imported) or forgot to register it.
    """
    impl = _METHODS.get(name)
    if impl is None:
        raise RuntimeError(
            f"no implementation of the array method {name!r} is registered: the module that "
            f"implements it registers it with `@_dispatch.implements_method({name!r})` when it "
            "is imported, and `import blasmp_array` imports all of them (was it called while "
            f"blasmp_array was still being imported?); registered: {sorted(_METHODS)}"
        )
    return impl


def registered_functions() -> frozenset[Any]:
    """The NumPy functions with a distributed implementation."""
    return frozenset(_FUNCTIONS)


def registered_ufuncs() -> frozenset[np.ufunc]:
    """The ufuncs with a distributed implementation (``np.matmul`` included)."""
    return frozenset(_UFUNCS)


def registered_methods() -> frozenset[str]:
    """The names of the array methods with a registered implementation."""
    return frozenset(_METHODS)


def array_function(func: Any, types: Any, args: Any, kwargs: Any) -> Any:
    """``__array_function__``: the registered implementation, or ``NotImplemented``."""
    impl = _FUNCTIONS.get(func)
    if impl is None:
        return NotImplemented
    return impl(*args, **kwargs)


def array_ufunc(ufunc: np.ufunc, ufunc_method: str, inputs: Any, kwargs: dict[str, Any]) -> Any:
    """``__array_ufunc__``: only plain calls (``method == '__call__'``) of registered ufuncs."""
    if ufunc_method != "__call__":
        return NotImplemented
    impl = _UFUNCS.get(ufunc)
    if impl is None:
        return NotImplemented
    return impl(ufunc, *inputs, **kwargs)
