"""The SVD through the polar decomposition (QDWH), on one process's local matrix.

``A = U_p H`` (``U_p`` with orthonormal columns, ``H`` Hermitian positive semidefinite) by the
QR-based dynamically weighted Halley iteration (QDWH; Nakatsukasa, Bai and Gygi, SIAM J.
Matrix Anal. Appl. 31, 2010; Nakatsukasa and Higham, SIAM J. Sci. Comput. 35, 2013), then the
Hermitian eigendecomposition ``H = V diag(w) V^H``: ``A = (U_p V) diag(w) V^H`` is the SVD.

Why: cuSOLVER has no divide-and-conquer SVD, and its ``gesvd`` (what ``cupy.linalg.svd``
calls) runs its bidiagonal reduction in BLAS2. QDWH is GEMM, QR and Cholesky, which run at the
GPU's BLAS3 rate, plus one ``syevd``: the route of JAX's SVD on accelerators and of SLATE's
and ELPA's polar-based solvers.

The iteration (``X_0 = A / alpha``, ``alpha = sqrt(||A||_1 ||A||_inf) >= ||A||_2``, ``l_0 =
eps`` a lower bound of ``X_0``'s smallest singular value, valid down to rank deficiency), with
weights ``a, b, c`` from ``l_k`` (the optimal rational approximation of the sign function on
``[l_k, 1]``):

* ``c > 100`` (the first one or two steps): ``[sqrt(c) X; I] = [Q_1; Q_2] R`` (one QR),
  ``X := (b / c) X + (a - b / c) / sqrt(c) Q_1 Q_2^H``;
* else: ``Z = I + c X^H X = W^H W`` (Cholesky; ``kappa(Z) <= 101``, so stable),
  ``X := (b / c) X + (a - b / c) X W^{-1} W^{-H}`` (two triangular solves);
* ``l := l (a + b l^2) / (1 + c l^2)``; done when ``1 - l <= 5 eps`` and the step moved ``X``
  by less than ``eps^(1/3)`` (cubic convergence: the next step is at rounding level), or two
  steps after ``l`` arrived (the singular values under ``l_0`` of a rank-deficient ``A``, its
  rounding noise, move on towards 1 but weigh nothing in ``H``). Six steps in double precision
  from ``l_0 = eps``.

Backward stable (Nakatsukasa and Higham 2013, with the QR-based first steps). The singular
directions of a rank-deficient ``A`` are not orthonormal in ``U_p V`` (``U_p`` is a partial
isometry there); when the smallest singular value is below ``min(m, n) eps`` times the largest,
the columns of ``U_p V`` are made orthonormal by one QR, which keeps those of the larger
singular values (they come first) and completes the rest.

Everything runs on the backend's local array: array-module operations on the current stream
(NumPy on the CPU, CuPy on the GPU), the Cholesky and triangular solves through the backend's
LAPACK/BLAS on its compute stream (synchronised before the array module reads their result).
Nothing is communicated: a one-process route (``svd(..., method='polar')``), and the local
solve of the gathered route.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...backends.base import Backend

__all__ = ["polar", "svd_polar", "MAX_STEPS", "QR_WEIGHT"]

#: the QR-based step is taken while ``c`` exceeds this (above it the Cholesky of ``Z`` would
#: lose accuracy: ``kappa(Z) <= 1 + c``)
QR_WEIGHT = 100.0
#: a safety bound; six steps reach rounding level from ``l_0 = eps`` in double precision
MAX_STEPS = 12
#: steps allowed after ``l_k`` reached 1 for the iterate to stop moving (see :func:`polar`)
EXTRA_STEPS = 2


def _weights(low: float) -> tuple[float, float, float]:
    """The dynamical weights ``(a, b, c)`` of a step from the lower bound ``low`` (``l_k``;
    Nakatsukasa, Bai and Gygi 2010, eq. (3.13)-(3.14))."""
    l2 = low * low
    dd = (4.0 * (1.0 - l2) / (l2 * l2)) ** (1.0 / 3.0)
    sqd = np.sqrt(1.0 + dd)
    a = sqd + 0.5 * np.sqrt(8.0 - 4.0 * dd + 8.0 * (2.0 - l2) / (l2 * sqd))
    b = (a - 1.0) ** 2 / 4.0
    return float(a), float(b), float(a + b - 1.0)


def polar(be: Backend, a: Any) -> tuple[Any, int]:
    """``U_p`` of the polar decomposition of the local ``m x n`` matrix ``a`` (``m >= n``; not
    written) and the number of steps taken. Runs at once (the caller synchronised)."""
    xp = be.xp
    m, n = a.shape
    dt = np.dtype(a.dtype)
    eps = float(np.finfo(dt).eps)
    norm1 = float(xp.abs(a).sum(axis=0).max())
    norminf = float(xp.abs(a).sum(axis=1).max())
    alpha = np.sqrt(norm1 * norminf)
    if alpha == 0.0:  # the zero matrix: any isometry; the identity's first columns
        return xp.eye(m, n, dtype=dt), 0
    x = a / dt.type(alpha)
    eye = xp.eye(n, dtype=dt)
    low = eps  # l_k
    tol_step = eps ** (1.0 / 3.0)
    info = xp.zeros(1, np.int32)
    after = 0  # steps taken since l_k arrived
    for step in range(1, MAX_STEPS + 1):
        wa, wb, wc = _weights(low)
        if wc > QR_WEIGHT:
            q, _ = xp.linalg.qr(xp.concatenate([dt.type(np.sqrt(wc)) * x, eye]), mode="reduced")
            new = dt.type(wb / wc) * x
            new += dt.type((wa - wb / wc) / np.sqrt(wc)) * (q[:m] @ q[m:].conj().T)
        else:
            z = x.conj().T @ x
            z *= dt.type(wc)
            z += eye
            y = xp.array(x, order="C", copy=True)
            be.potrf(z, "U", info, be.compute)  # Z = W^H W
            be.trsm(1, z, y, "R", "U", "N", "N", be.compute)  # y := x W^{-1}
            be.trsm(1, z, y, "R", "U", "C", "N", be.compute)  # y := x W^{-1} W^{-H}
            be.synchronize()
            if int(be.asnumpy(info)[0]) != 0:  # kappa(Z) <= 101: only NaN or inf gets here
                raise np.linalg.LinAlgError("svd (polar): the QDWH iteration broke down")
            new = dt.type(wb / wc) * x
            new += dt.type(wa - wb / wc) * y
        moved = float(xp.linalg.norm(new - x))
        x = new
        low = min(1.0, low * (wa + wb * low * low) / (1.0 + wc * low * low))
        if 1.0 - low <= 5 * eps:
            # singular values below l_0 (a rank-deficient A's rounding noise) still travel
            # towards 1 after l_k has arrived; they carry no weight in H = U_p^H A, and
            # svd_polar restores the orthogonality of their columns: a few more steps at most
            if moved <= tol_step or after >= EXTRA_STEPS:
                return x, step
            after += 1
    if not bool(xp.isfinite(x).all()):
        raise np.linalg.LinAlgError("svd (polar): the QDWH iteration broke down")
    return x, MAX_STEPS


def svd_polar(be: Backend, a: Any, uv: bool) -> Any:
    """The thin SVD ``(U, s, Vh)`` (``s`` descending, real) of the local ``m x n`` matrix ``a``
    (not written) through :func:`polar` and the backend's Hermitian eigensolver, or ``s``
    alone; backend arrays. Runs at once (the caller synchronised)."""
    xp = be.xp
    m, n = a.shape
    if m < n:  # A^H = U' S V'^H: U = V', Vh = U'^H
        out = svd_polar(be, a.conj().T, uv)
        if not uv:
            return out
        u, s, vh = out
        return vh.conj().T, s, u.conj().T
    up, _ = polar(be, a)
    h = up.conj().T @ a
    h = (h + h.conj().T) / 2
    w, v = be.eigh_local(xp.ascontiguousarray(h), True, uv)
    aw = xp.abs(w)
    order = xp.argsort(-aw)
    s = aw[order]
    if not uv:
        return s
    v = v[:, order]
    # a tiny negative eigenvalue of H (rounding, near rank deficiency): A v = -|w| U_p v
    u = (up @ v) * xp.where(w[order] < 0, -1, 1).astype(v.dtype)[None, :]
    k = min(m, n)
    smax = float(s[0]) if k else 0.0
    if k and float(s[-1]) <= k * float(np.finfo(s.dtype).eps) * smax:
        q, r = xp.linalg.qr(u, mode="reduced")
        d = xp.diagonal(r)
        u = q * xp.where(d == 0, 1, d / xp.abs(xp.where(d == 0, 1, d)))[None, :]
    return u, s, v.conj().T
