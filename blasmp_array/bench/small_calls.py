"""The everyday small calls of the NumPy face, as one table shared by ``tools/bench_vectors.py``
and the asv suite: each call is ``f(A, x, xp)``, run with our arrays and ``xp = numpy`` (NumPy's
functions dispatch to ours) or with the one-process library's arrays and module (NumPy's or
CuPy's), so both sides make the same call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["CALLS"]

CALLS: dict[str, Callable[[Any, Any, Any], Any]] = {
    "A @ A": lambda A, x, xp: A @ A,
    "A @ x": lambda A, x, xp: A @ x,
    "x @ A": lambda A, x, xp: x @ A,
    "x @ y": lambda A, x, xp: x @ x,
    "solve(A, b)": lambda A, x, xp: xp.linalg.solve(A, x),
    "x + y": lambda A, x, xp: x + x,
    "A + B": lambda A, x, xp: A + A,
    "A * 2": lambda A, x, xp: A * 2.0,
    "A > 0": lambda A, x, xp: A > 0,
    "np.sum(A)": lambda A, x, xp: xp.sum(A),
    "A.sum(0)": lambda A, x, xp: A.sum(axis=0),
    "norm(x)": lambda A, x, xp: xp.linalg.norm(x),
    "norm(A)": lambda A, x, xp: xp.linalg.norm(A),
}
