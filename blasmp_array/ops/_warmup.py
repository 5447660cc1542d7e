"""Load, before a pipeline enqueues its first signal wait, every CuPy kernel its helpers launch.

Why: loading a CUDA module waits for the whole device, including a stream that is blocked in a
stream-ordered signal wait. CuPy compiles its element-wise kernels on first use and loads them
then (``cuModuleLoadData``). If the host thread that enqueues an operator met a first-use kernel
after enqueueing a wait, it would block until a peer's signal released that wait: the rank stops
enqueueing, and a wait whose release depends on this host's later work would never end.
(The GPU backend also asks CUDA to load the libraries' kernels eagerly, ``CUDA_MODULE_LOADING=
EAGER``, for cuBLAS's kernels; see ``backends/_cuda_env.py``.)

:func:`begin_pipeline` replaces ``backend.begin()`` at the start of every operator: on a backend
whose kernels are compiled lazily (``backend.jit_kernels``) it first runs each helper the
operators launch once per dtype, on tiny arrays laid out to produce the same kernel variants as
real panels (contiguous and strided, one and two dimensional, every mask and op), synchronously
and before anything of the operator is enqueued. On the CPU backend it is ``backend.begin()``.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def begin_pipeline(backend: Any, dtype: Any) -> None:
    """Warm the kernels of ``dtype`` (once per backend and dtype), then ``backend.begin()``."""
    if backend.jit_kernels:
        warmed: set[np.dtype] = backend.__dict__.setdefault("_warmed_dtypes", set())
        dt = np.dtype(dtype)
        if dt not in warmed:
            _run_helpers(backend, dt)
            backend.synchronize()
            warmed.add(dt)
    backend.begin()


def _run_helpers(backend: Any, dtype: np.dtype) -> None:
    from . import gemm, panels, syrk, trsm

    xp = backend.xp
    n = 6
    local = xp.asarray(np.arange(n * n, dtype=np.float64).reshape(n, n)).astype(dtype)
    flat = xp.empty(4 * n * n, dtype)
    pieces = []
    for mask in (None, "L", "U", "Lunit", "Uunit", "symL", "symU"):
        for op in ("N", "T", "C", "R"):
            # a strided 4x4 block and full rows (contiguous): both kernel variants
            pieces.append(panels.Piece(0, 1, 1, 4, 4, mask, op, 0, 0, 4, 4, 0))
            rows, cols = (n, 2) if op in ("T", "C") else (2, n)
            pieces.append(panels.Piece(0, 0, 0, 2, n, None, op, 0, 0, rows, cols, 0))
    for p in pieces:
        panels._pack(xp, local, [p], flat, 0)
    # unpack: a slot into a strided panel region, with zero fill of another region
    panel = xp.empty((n, n), dtype)
    seg_pieces = (panels.Piece(0, 0, 0, 4, 4, None, "N", 1, 1, 4, 4, 0),)
    zeros = ((0, 0, 1, n), (1, 0, 4, 1))
    step = panels.GroupStep(0, n, n, ((0, 0, 16, seg_pieces),), zeros, (), False)
    panels._unpack(flat, step, panel)
    # triangles on the device (SYRK's scaled triangle, check_finite, the symmetric fill)
    from . import _triangle, symm, trmm

    rows = xp.asarray(np.arange(n))
    tri = (rows[None, :] - rows[:, None]) <= 0
    for beta in (dtype.type(0), dtype.type(2)):
        _triangle._select_scaled(xp, local.copy(), beta, tri)
    _triangle.any_nonfinite(xp, local, tri)
    xp.stack([tri.any(), tri.any()]).any()
    rows1 = rows + 1
    _ = rows[None, :] <= rows1[:, None], rows[None, :] >= rows1[:, None]
    for uplo in ("L", "U"):
        for conj in (False, True):
            _triangle.mirror_triangle(xp, local.copy(), uplo, conj, panel=4)
        for view in ("N", "T", "C", "R"):
            symm._symmetrised(xp, local, view, uplo, xp.empty((n, n), dtype))
            trmm._copy_op(xp, local, view, xp.empty((n, n), dtype))
    xp.copyto(local.copy(), local, where=~tri)
    # C := beta C, whole and masked (SYRK/HERK's triangle mask)
    mask = xp.asarray(np.tril(np.ones((n, n), dtype=bool)))
    for beta in (dtype.type(0), dtype.type(2)):
        gemm._scale(local.copy(), beta, None)
        gemm._scale(local[1:5, 1:5], beta, None)
        gemm._scale(local.copy(), beta, mask)
    # diagonal-block triangle updates and the Hermitian diagonal
    for uplo in ("L", "U"):
        syrk._diag_add(xp, local[1:5, 1:5], local[:4, :4].copy(), uplo)
        syrk._diag_add(xp, local.copy(), local.copy(), uplo)
    idx = xp.asarray(np.arange(3))
    if dtype.kind == "c":
        syrk._zero_diag_imag(local.copy(), idx, idx)
    # TRSM: alpha X, stacks of rows, packs of (transposed) rectangles
    xp.multiply(local, dtype.type(2), local)
    trsm._unpack(flat[: n * n].reshape(n, n), panel, [(0, 1, 2)])
    for blk in (local[1:3, 2:5], local[1:3, 2:5].T, local[:2]):
        flat[: blk.size].reshape(blk.shape)[...] = blk
    # the backend's own kernels on strided operands and outputs (copied to and from contiguous
    # work arrays), with zero and non-zero scalars (alpha == 0 only scales a triangle)
    st, one, zero = backend.compute, dtype.type(1), dtype.type(0)
    sq, out = local[:3, :3], local[2:5, 2:5]
    ops = ("N", "C") if dtype.kind == "c" else ("N", "T")
    for uplo in ("L", "U"):
        for op in ops:
            for alpha, beta in ((one, zero), (zero, one), (one, one)):
                backend.gemm(alpha, sq, sq, beta, out, op, "N", st)
                backend.syrk(alpha, sq, beta, out, uplo, op, st)
                backend.syr2k(alpha, sq, sq, beta, out, uplo, op, st)
            for side in ("L", "R"):
                backend.trmm(one, sq, out, side, uplo, op, "N", st)
                backend.trsm(one, sq, out, side, uplo, op, "U", st)
