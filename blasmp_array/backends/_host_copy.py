"""Transposing (and conjugating) copies of host matrices through the BLAS's ``?omatcopy``.

``out[...] = a.T`` in NumPy walks one of the two arrays across its rows, element by element: on
the 2-core CI machine it moves a 3 MB float64 panel at about 2.7 GB/s (1.25 ms), where
OpenBLAS's ``domatcopy``, which transposes cache-sized tiles, takes 0.49 ms. The panel packs of
the SUMMA pipeline (``A.T`` as a row panel) and the distributed transpose make such copies on
the communication stream, which shares the cores with the compute stream's GEMMs.

``?omatcopy`` is an extension of OpenBLAS (MKL has it too), not CBLAS: it is looked up in the
library that :mod:`._cblas` loaded for the GEMMs (the OpenBLAS bundled with NumPy), and
:func:`assign` falls back to NumPy where that library lacks it, where
``$BLASMP_CPU_BLAS=numpy`` asks for NumPy, or where the copy does not transpose (a plain or
conjugating copy in the same orientation runs at NumPy's memory speed already). Like the other
CBLAS calls, ``ctypes`` releases the GIL for the copy.

Only real dtypes take it. ``?omatcopy`` computes ``alpha * a`` with ``alpha = 1``: exact for
every real value but a signaling NaN (which comes out quiet, as from any arithmetic), but for a
complex one it is a complex product, ``(x + iy)(1 + 0i)``, in which a NaN or an infinity of one
part turns the other part into NaN and ``-0.0`` can lose its sign: not a copy. Complex matrices
are copied by NumPy.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from . import _cblas
from ._cpu_kernels import _row_major

__all__ = ["assign", "put_rows", "take_rows", "omatcopy_available"]

_TRANS = 112  # CblasTrans
#: the dtypes ``?omatcopy`` copies exactly (see the module docstring)
_REAL = frozenset(np.dtype(t) for t in (np.float32, np.float64))
#: elements from which ``?omatcopy`` copies (below, its ctypes call costs more than NumPy's
#: copy): float64 square transposes, one thread, best of 5 x 2000 calls on the 2-core machine,
#: ``?omatcopy`` against NumPy: n = 64 8.4 / 1.8 us, 128 16.4 / 14.8 us, 192 31.0 / 31.6 us,
#: 256 67 / 140 us
_MIN_SIZE = 1 << 15

_routines: list[Any] = []


def _library() -> _cblas.CBlas | None:
    """The loaded CBLAS when it exports ``?omatcopy`` for every dtype, else None. Cached."""
    if not _routines:
        lib = _cblas.load()
        try:
            for p in "sd" if lib is not None else "":
                lib.fn(p + "omatcopy")  # type: ignore[union-attr]
        except AttributeError:
            lib = None
        _routines.append(lib)
    return _routines[0]


def omatcopy_available() -> bool:
    """Whether :func:`assign` transposes through the BLAS (else through NumPy)."""
    return _library() is not None


def _transposed_pair(out: np.ndarray, src: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(b, a)`` with ``b`` row-major and ``a.T`` row-major such that ``b[...] = a`` is
    ``out[...] = src`` (the pair itself or both transposed), or None when the copy does not
    transpose (or a stride is not one a BLAS takes)."""
    if min(out.shape) < 2:  # a row or a column: no transposition to speak of
        return None
    for b, a in ((out, src), (out.T, src.T)):
        if _row_major(b) is not None and _row_major(a.T) is not None:
            return b, a
    return None


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` share an element: exact, so that two blocks of one matrix (the
    mirrored blocks of ``ops/engine/mirror.py``), whose bounds overlap, are told apart (for
    2-D views NumPy's exact test is a few bounded integer variables: about 0.4 us)."""
    return bool(np.shares_memory(a, b))


def _fits(lib: _cblas.CBlas, *dims: int) -> bool:
    return lib.int is ctypes.c_int64 or max(dims) < 2**31


def assign(out: Any, src: Any, conjugate: bool = False) -> None:
    """``out[...] = src`` (``conj(src)`` when ``conjugate``), both 2-D of the same shape.

    Host arrays of one real floating dtype whose orientations differ (``src`` is column-major
    where ``out`` is row-major, e.g. ``src = x.T`` of a C-ordered ``x``) are copied by
    ``?omatcopy``; anything else (complex dtypes and device arrays included) by the array
    library.
    """
    if conjugate and not np.iscomplexobj(src):
        conjugate = False
    lib = _library() if isinstance(out, np.ndarray) and isinstance(src, np.ndarray) else None
    pair = None
    if lib is not None and out.dtype == src.dtype and out.dtype in _REAL and out.size >= _MIN_SIZE:
        if not _overlap(out, src):
            pair = _transposed_pair(out, src)
    if pair is None or lib is None:
        _assign_generic(out, src, conjugate)
        return
    b, a = pair
    b_ld, a_ld = _row_major(b)[1], _row_major(a.T)[1]  # type: ignore[index]
    rows, cols = a.shape[1], a.shape[0]  # of a.T, the row-major source
    if not _fits(lib, rows, cols, a_ld, b_ld):
        _assign_generic(out, src, conjugate)
        return
    n = lib.int
    lib.routine(out.dtype, "omatcopy")(
        _cblas.ROW_MAJOR,
        _TRANS,
        n(rows),
        n(cols),
        lib.scalar(1, out.dtype),
        lib.ptr(a),
        n(a_ld),
        lib.ptr(b),
        n(b_ld),
    )


def put_rows(dst: Any, idx: Any, rows: Any) -> None:
    """``dst[idx] = rows``; a run of rows of a matrix (``idx`` a slice) by :func:`assign`, so
    that rows moving between a row-major matrix and a column-major panel are transposed by
    the BLAS; an index array (or a stack of matrices) by the array library."""
    if isinstance(idx, slice) and dst.ndim == 2:
        assign(dst[idx], rows)
    else:
        dst[idx] = rows


def take_rows(out: Any, src: Any, idx: Any) -> None:
    """``out[...] = src[idx]``, a run of rows as :func:`put_rows`."""
    if isinstance(idx, slice) and src.ndim == 2:
        assign(out, src[idx])
    else:
        out[...] = src[idx]


def _assign_generic(out: Any, src: Any, conjugate: bool) -> None:
    if not conjugate:
        out[...] = src
    elif isinstance(out, np.ndarray):
        np.conjugate(src, out=out)
    else:
        out[...] = src.conj()
