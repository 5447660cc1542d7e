"""Local kernels of a block of Householder reflectors in compact WY form (LAPACK ``xlarft``):
``H_0 H_1 ... H_{r-1} = I - V T V^H``, ``V`` unit lower trapezoidal, ``T`` upper triangular.
Shared by the distributed Householder QR (:mod:`ops.lapack._householder`) and the one-process
QR with look-ahead (:mod:`ops.lapack._qr_local`); they enqueue work on the compute stream only.
"""

from __future__ import annotations

from typing import Any

from ...backends.base import Backend

__all__ = ["unit_lower", "t_matrix", "t_factor", "build_t", "apply_block"]


def unit_lower(xp: Any, v: Any, rows: int, cols: int) -> None:
    """``v[:rows, :cols]`` := its strict lower triangle plus the unit diagonal (the explicit
    ``V`` of the reflectors stored below ``R``)."""
    block = v[:rows, :cols]
    block[...] = xp.tril(block, -1) + xp.eye(rows, cols, dtype=v.dtype)


def t_matrix(xp: Any, g: Any, tau: Any) -> Any:
    """``M = I + D triu(G, 1)``, ``T = D`` (the right-hand side): ``T := M^{-1} T`` follows."""
    m = xp.triu(g, 1) * tau[:, None]
    m += xp.eye(g.shape[0], dtype=g.dtype)
    return m


def t_factor(be: Backend, v: Any, tau: Any, keep: list[Any] | None = None) -> Any:
    """``T`` of the reflectors ``v`` (explicit, ``rows x r``) and ``tau``, on the compute
    stream: ``G = V^H V`` (HERK, upper), ``M = I + D triu(G, 1)``, ``T = M^{-1} D``: it gives
    ``H_0 ... H_{r-1} = I - V T V^H`` exactly as LAPACK's column recurrence does, ``tau_i = 0``
    included. ``keep`` receives the temporaries, for a caller whose host runs ahead of the
    stream (they must outlive the kernels that read them)."""
    xp, comp = be.xp, be.compute
    r = v.shape[1]
    g = xp.zeros((r, r), v.dtype)
    m = xp.empty((r, r), v.dtype)
    t = xp.empty((r, r), v.dtype)
    be.syrk(1, v, 0, g, "U", "C", comp)
    be.launch(comp, build_t, xp, g, tau, m, t)
    be.trsm(1, m, t, "L", "U", "N", "U", comp)
    if keep is not None:
        keep += [g, m]
    return t


def build_t(xp: Any, g: Any, tau: Any, m: Any, t: Any) -> None:
    """``m`` := :func:`t_matrix` of ``g`` and ``tau``; ``t`` := ``diag(tau)``."""
    m[...] = t_matrix(xp, g, tau)
    t[...] = xp.diag(tau)


def apply_block(be: Backend, v: Any, t: Any, c: Any, trans: str) -> Any:
    """``c := (I - V op(T) V^H) c`` in place on the compute stream (``op`` the conjugate
    transpose for ``trans`` 'C': ``Q^H c``; 'N': ``Q c``): ``W = V^H C``, ``W := op(T) W``,
    ``C -= V W``, two GEMMs and a TRMM. Returns ``W``, which must outlive the kernels (None
    when ``c`` has no columns)."""
    if c.shape[1] == 0:
        return None
    w = be.xp.empty((v.shape[1], c.shape[1]), c.dtype)
    be.gemm(1, v, c, 0, w, "C", "N", be.compute)
    be.trmm(1, t, w, "L", "U", trans, "N", be.compute)
    be.gemm(-1, v, w, 1, c, "N", "N", be.compute)
    return w
