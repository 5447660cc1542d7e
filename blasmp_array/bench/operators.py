"""What the bench command runs: for each operator, how to build its inputs, call it, count its
flops (or bytes) and check its result against NumPy/SciPy.

Every case uses grid-independent random inputs (``bm.random.standard_normal`` with fixed seeds),
so the same command gives the same matrices on any grid. Checks gather the operands and the
result on rank 0 only and report the error in units of machine epsilon against a bound derived
from the standard rounding-error analysis (Higham, *Accuracy and Stability of Numerical
Algorithms*, ch. 3 and 8):

* products (GEMM, SYMM, SYRK, SYR2K, TRMM): ``max_ij |C - C_ref|_ij / (eps (|A| |B|)_ij)``
  against ``c (k + 2)`` where ``k`` is the inner dimension (``c = 1`` real, ``2`` complex; both
  the tested and the reference product may be off by ``gamma_k |A||B|``);
* TRSM: the normwise backward error ``||op(A) X - alpha B|| / ((||A|| ||X|| + ||alpha B||) eps)``
  (infinity norms) against ``c (m + 2)``;
* Cholesky: the backward error ``||A - L L^H|| / (||A|| n eps)`` (Frobenius norms) against
  ``2 c (n + 2) / n * || |L| |L^H| || / ||A||`` (Higham, Theorem 10.3: ``|A - L L^H| <=
  gamma_{n+1} |L| |L^H|``, once for the factor and once for the reference product);
* redistribution and transpose move data only: the result must equal the input exactly;
* the data door (construction, NumPy in and out, zarr, Dask): :mod:`.door`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import blasmp_array as bm

from .door import DOOR_OPERATORS, DoorRow, check_row, prepare_row

__all__ = ["OPERATORS", "Case", "Prepared", "prepare", "check_result", "flop_count"]

OPERATORS = (
    "gemm",
    "symm",
    "syrk",
    "syr2k",
    "trmm",
    "trsm",
    "matmul",
    "matmul_ata",
    "solve_triangular",
    "matmul_view",
    "matmul_view_copy",
    "sum_axis0",
    "cholesky",
    "lu",
    "qr",
    "qr_tall",
    "lstsq",
    "eigh",
    "eigvalsh",
    "svd",
    "svd_polar",
    "redistribute",
    "transpose",
    *DOOR_OPERATORS,
)
#: what a NumPy user writes, with default arguments: ``A @ B``, ``A.T @ A`` (``A.H @ A`` for
#: complex dtypes, a full Hermitian result), ``solve_triangular(T, B, lower=...)``
NUMPY_FACE = ("matmul", "matmul_ata", "solve_triangular")
#: operators that only move or make data: measured in GB/s of the matrix, checked for exact
#: equality (the random rows: see :mod:`.door`)
DATA_OPERATORS = ("redistribute", "transpose", *DOOR_OPERATORS)
#: operators measured in GB/s of the matrix read (reductions), checked against a rounding bound
REDUCTION_OPERATORS = ("sum_axis0",)
#: the offset of ``matmul_view``'s windows: one row and one column, inside the first block
VIEW_OFFSET = 1
#: the window products: ``A[1:, 1:] @ B[1:, 1:]`` as written (``matmul_view``) and on explicit
#: copies of the windows (``matmul_view_copy``, what the view must not be slower than)
VIEW_PRODUCTS = ("matmul_view", "matmul_view_copy")


@dataclass(frozen=True)
class Case:
    """One benchmark configuration."""

    op: str
    m: int
    n: int
    k: int
    dtype: str = "float64"
    block: tuple[int, int] = (256, 256)
    grid: tuple[int, int] | None = None  # None: the most square grid of the ranks
    num_stages: int | None = None  # None: the operator's default
    backend: str | None = None
    side: str = "left"
    lower: bool = True
    trans: str = "N"
    to_grid: tuple[int, int] | None = None  # redistribute: target grid (default: transposed)
    to_block: tuple[int, int] | None = None  # redistribute: target block (default: halved)
    root: int | None = None  # from_numpy: rank holding the matrix (None: every rank);
    # to_numpy_root: the rank gathering it (None: 0)

    @property
    def is_complex(self) -> bool:
        return np.dtype(self.dtype).kind == "c"

    def label(self) -> str:
        return f"{self.op} {self.m}x{self.n}x{self.k} {self.dtype} block {self.block}"


def flop_count(case: Case) -> float:
    """Floating-point operations of one call (LAPACK working note 41 counts; complex x4)."""
    m, n, k = case.m, case.n, case.k
    left = case.side == "left"
    counts = {
        "gemm": 2.0 * m * n * k,
        "symm": 2.0 * (m * m * n if left else m * n * n),
        "syrk": 1.0 * n * (n + 1) * k,
        "syr2k": 2.0 * n * (n + 1) * k,
        "trmm": 1.0 * (m * m * n if left else m * n * n),
        "trsm": 1.0 * (m * m * n if left else m * n * n),
        "matmul": 2.0 * m * n * k,
        "matmul_view": 2.0 * m * n * k,
        "matmul_view_copy": 2.0 * m * n * k,
        "matmul_ata": 1.0 * n * (n + 1) * k,  # SYRK's count: the useful flops of A^T A
        "solve_triangular": 1.0 * m * m * n,
        "cholesky": n**3 / 3.0,
        "lu": 2.0 * n**3 / 3.0,
        # geqrf + orgqr (m >= n); lstsq: geqrf + ormqr on k columns + trsm (LAWN 41)
        "qr": 4.0 * m * n * n - 4.0 * n**3 / 3.0,
        "qr_tall": 4.0 * m * n * n - 4.0 * n**3 / 3.0,
        "lstsq": 2.0 * m * n * n - 2.0 * n**3 / 3.0 + 4.0 * m * n * k - n * n * k,
        # the reduction to tridiagonal form and, for eigh, the back-transform (LAWN 41)
        "eigh": 4.0 * n**3 / 3.0 + 2.0 * n**3,
        "eigvalsh": 4.0 * n**3 / 3.0,
        # U, S and V^H (m >= n): the QR, the bidiagonal reduction and the back-transforms
        "svd": 4.0 * max(m, n) * min(m, n) ** 2 + 8.0 * min(m, n) ** 3,
    }
    counts["svd_polar"] = counts["svd"]  # the same decomposition: rates comparable
    flops = counts.get(case.op, 0.0)
    return flops * (4.0 if case.is_complex else 1.0)


def byte_count(case: Case) -> float:
    """Bytes of the matrix a data-movement operator moves."""
    return float(case.m * case.n * np.dtype(case.dtype).itemsize)


@dataclass
class Prepared:
    """A case made concrete on a grid: inputs, and the call to time."""

    case: Case
    grid: Any
    inputs: dict[str, Any]
    call: Callable[[], Any]
    #: inputs the call overwrites, restored from a copy before each timed call
    in_place: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)
    result: Any = None
    #: after every call, outside the timed region (collective; e.g. remove a written store)
    cleanup: Callable[[], None] | None = None
    #: once, when the case is done (collective)
    close: Callable[[], None] | None = None
    #: a data-door row's parts (:mod:`.door`)
    door: DoorRow | None = None

    def run(self) -> Any:
        self.result = self.call()
        return self.result


def _grid(shape: tuple[int, int] | None, backend: str | None) -> Any:
    if shape is None:
        return bm.ProcessGrid(backend=backend)
    return bm.ProcessGrid(*shape, backend=backend)


def _op_kwargs(fn: Callable[..., Any], case: Case, **kwargs: Any) -> dict[str, Any]:
    """``kwargs`` plus ``num_stages`` when the operator accepts it."""
    if case.num_stages is not None:
        params = inspect.signature(fn).parameters
        if "num_stages" not in params:
            raise ValueError(f"{case.op} does not take num_stages; leave --num-stages out")
        kwargs["num_stages"] = case.num_stages
    return kwargs


def _linalg(name: str) -> Callable[..., Any]:
    fn = getattr(bm.linalg, name, None)
    if fn is None:
        raise RuntimeError(f"blasmp_array.linalg.{name} is not available in this version")
    return fn


def prepare(case: Case, directory: Path | None = None) -> Prepared:
    """Build the inputs of ``case`` (collective) and the call to time; ``directory`` (seen by
    every rank) holds the zarr stores of the data-door rows."""
    if case.op not in OPERATORS:
        raise ValueError(f"unknown operator {case.op!r}; choose one of {', '.join(OPERATORS)}")
    grid = _grid(case.grid, case.backend)
    if case.op in DOOR_OPERATORS:
        row = prepare_row(case, grid, directory)
        return Prepared(
            case,
            grid,
            row.inputs,
            row.call,
            notes=row.notes,
            cleanup=row.cleanup,
            close=row.close,
            door=row,
        )
    dt, blk = np.dtype(case.dtype), case.block
    m, n, k = case.m, case.n, case.k
    left = case.side == "left"

    def normal(shape: tuple[int, int], seed: int) -> Any:
        return bm.random.standard_normal(shape, seed=seed, block=blk, grid=grid, dtype=dt)

    op = case.op
    inputs: dict[str, Any] = {}
    if op == "gemm":
        fn = _linalg("gemm")
        a_shape = (m, k) if case.trans == "N" else (k, m)
        inputs = {"A": normal(a_shape, 0), "B": normal((k, n), 1)}
        kw = _op_kwargs(fn, case, trans_a=case.trans)
        return Prepared(case, grid, inputs, lambda: fn(inputs["A"], inputs["B"], **kw))
    if op == "symm":
        fn = _linalg("symm")
        na = m if left else n
        inputs = {"A": normal((na, na), 0), "B": normal((m, n), 1)}
        kw = _op_kwargs(fn, case, side=case.side, lower=case.lower)
        return Prepared(case, grid, inputs, lambda: fn(inputs["A"], inputs["B"], **kw))
    if op in ("syrk", "syr2k"):
        fn = _linalg(op)
        a_shape = (n, k) if case.trans == "N" else (k, n)
        inputs = {"A": normal(a_shape, 0)}
        if op == "syr2k":
            inputs["B"] = normal(a_shape, 1)
        kw = _op_kwargs(fn, case, trans=case.trans, lower=case.lower)
        if op == "syrk":
            return Prepared(case, grid, inputs, lambda: fn(inputs["A"], **kw))
        return Prepared(case, grid, inputs, lambda: fn(inputs["A"], inputs["B"], **kw))
    if op in ("trmm", "trsm"):
        fn = _linalg(op)
        na = m if left else n
        a = normal((na, na), 0)
        if op == "trsm":
            # diagonally dominant triangle: a well-conditioned solve
            a = a + na * bm.eye(na, dtype=dt, block=blk, grid=grid)
        inputs = {"A": a, "B": normal((m, n), 1)}
        kw = _op_kwargs(fn, case, side=case.side, lower=case.lower, trans=case.trans)
        prepared = Prepared(case, grid, inputs, lambda: fn(inputs["A"], inputs["B"], **kw))
        return prepared
    if op == "matmul":
        inputs = {"A": normal((m, k), 0), "B": normal((k, n), 1)}
        return Prepared(case, grid, inputs, lambda: inputs["A"] @ inputs["B"])
    if op == "matmul_ata":
        inputs = {"A": normal((k, n), 0)}
        if case.is_complex:
            return Prepared(case, grid, inputs, lambda: inputs["A"].H @ inputs["A"])
        return Prepared(case, grid, inputs, lambda: inputs["A"].T @ inputs["A"])
    if op in VIEW_PRODUCTS:
        # A[1:, 1:] @ B[1:, 1:]: windows at an offset inside a block (PBLAS IA = JA = 2)
        o = VIEW_OFFSET
        inputs = {"A": normal((m + o, k + o), 0), "B": normal((k + o, n + o), 1)}
        if op == "matmul_view_copy":
            fn = lambda: inputs["A"][o:, o:].copy() @ inputs["B"][o:, o:].copy()  # noqa: E731
        else:
            fn = lambda: inputs["A"][o:, o:] @ inputs["B"][o:, o:]  # noqa: E731
        copies = " (copied first)" if op == "matmul_view_copy" else ""
        return Prepared(case, grid, inputs, fn, notes=[f"views at offset ({o}, {o}){copies}"])
    if op == "sum_axis0":
        inputs = {"A": normal((m, n), 0)}
        return Prepared(case, grid, inputs, lambda: np.sum(inputs["A"], axis=0))
    if op == "solve_triangular":
        a = normal((m, m), 0) + m * bm.eye(m, dtype=dt, block=blk, grid=grid)
        inputs = {"A": a, "B": normal((m, n), 1)}
        low = case.lower
        return Prepared(
            case, grid, inputs, lambda: bm.linalg.solve_triangular(a, inputs["B"], lower=low)
        )
    if op == "cholesky":
        fn = _linalg("cholesky")
        g = normal((n, n), 0)
        # G^H G / n + I: Hermitian positive definite and well conditioned (a HERK/SYRK)
        a = (g.H @ g) * (1.0 / n) + bm.eye(n, dtype=dt, block=blk, grid=grid)
        inputs = {"A": a}
        kw = _op_kwargs(fn, case, lower=case.lower)
        return Prepared(case, grid, inputs, lambda: fn(inputs["A"], **kw))
    if op == "lu":
        fn = _linalg("lu_factor")
        inputs = {"A": normal((n, n), 0)}
        return Prepared(case, grid, inputs, lambda: fn(inputs["A"]))
    if op in ("qr", "qr_tall"):  # np.linalg.qr(A): the reduced Q and R
        inputs = {"A": normal((m, n), 0)}
        return Prepared(case, grid, inputs, lambda: np.linalg.qr(inputs["A"]))
    if op in ("eigh", "eigvalsh"):  # np.linalg.eigh(A) / eigvalsh(A) of the Hermitian A + A^H
        g = normal((n, n), 0)
        inputs = {"A": g + g.H}
        fn = np.linalg.eigh if op == "eigh" else np.linalg.eigvalsh
        return Prepared(case, grid, inputs, lambda: fn(inputs["A"]))
    if op == "svd":  # np.linalg.svd(A): U (full), S and Vh
        inputs = {"A": normal((m, n), 0)}
        return Prepared(case, grid, inputs, lambda: tuple(np.linalg.svd(inputs["A"])))
    if op == "svd_polar":  # the thin SVD through the polar decomposition (QDWH)
        inputs = {"A": normal((m, n), 0)}
        polar = functools.partial(_linalg("svd"), full_matrices=False, method="polar")
        return Prepared(case, grid, inputs, lambda: tuple(polar(inputs["A"])))
    if op == "lstsq":  # k right-hand sides
        inputs = {"A": normal((m, n), 0), "B": normal((m, k), 1)}
        return Prepared(case, grid, inputs, lambda: _linalg("lstsq")(inputs["A"], inputs["B"]))
    if op == "redistribute":
        inputs = {"A": normal((m, n), 0)}
        to_grid = _grid(case.to_grid or (grid.npcol, grid.nprow), case.backend)
        to_block = case.to_block or (max(1, blk[0] // 2), max(1, blk[1] // 2))
        return Prepared(
            case,
            grid,
            inputs,
            lambda: inputs["A"].redistribute(grid=to_grid, block=to_block),
            notes=[f"to grid {to_grid.nprow}x{to_grid.npcol}, block {to_block}"],
        )
    if op == "transpose":
        # A.T.resolve(): the distributed transpose on the same grid (bytes of the matrix / time)
        inputs = {"A": normal((m, n), 0)}
        return Prepared(case, grid, inputs, lambda: inputs["A"].T.resolve(), notes=["A.T"])
    raise AssertionError(f"prepare: {op} has no branch")  # pragma: no cover


def snapshot_in_place(p: Prepared) -> Callable[[], None]:
    """Detect whether the call overwrote an input; return a function restoring the inputs.

    TRMM and TRSM may work in place on ``B`` (PBLAS semantics); timed repeats must start from
    the same data.
    """
    saved = {name: x.copy() for name, x in p.inputs.items() if isinstance(x, bm.BlockCyclicArray)}

    def restore() -> None:
        for name, x in saved.items():
            p.inputs[name] = x.copy()

    return restore


# -- checks --------------------------------------------------------------------------------
def _eps(dtype: Any) -> float:
    return float(np.finfo(np.dtype(dtype)).eps)


def _ref_dtype(dtype: Any) -> np.dtype:
    """Reference precision: float32/complex64 are checked against float64/complex128."""
    dt = np.dtype(dtype)
    return np.dtype(np.complex128) if dt.kind == "c" else np.dtype(np.float64)


def _op(x: np.ndarray, trans: str) -> np.ndarray:
    if trans == "N":
        return x
    return x.T if trans == "T" else x.conj().T


def _product_error(c: np.ndarray, ref: np.ndarray, absprod: np.ndarray, mask: Any = None) -> float:
    diff = np.abs(c.astype(ref.dtype) - ref)
    scale = absprod * _eps(c.dtype)
    if mask is not None:
        diff, scale = diff[mask], scale[mask]
    tiny = np.finfo(np.float64).tiny
    ratio = diff / np.maximum(scale, tiny)
    return float(ratio.max()) if ratio.size else 0.0


def check_result(p: Prepared) -> dict[str, Any]:
    """Compare ``p.result`` with NumPy/SciPy on rank 0 (collective: gathers to rank 0).

    Returns the same dictionary on every rank: ``error_eps``, ``bound_eps``, ``passed``,
    ``measure``.
    """
    case, grid = p.case, p.grid
    if p.door is not None:
        return check_row(case, grid, p.door, p.result)
    gathered = {name: _gather(x) for name, x in p.inputs.items() if name != "host"}
    result = _gather(p.result)
    verdict: dict[str, Any] | None = None
    if grid.rank == 0:
        try:
            verdict = _verdict(case, gathered, result)
        except Exception as exc:  # noqa: BLE001 - reported as a failed check on every rank
            verdict = failed_check(exc)
    return grid.backend.bcast(verdict, root=0)


def _gather(x: Any) -> Any:
    if isinstance(x, np.ndarray):  # a reduction's vector, the same on every rank
        return x
    if isinstance(x, bm.BlockCyclicArray):
        return x.to_numpy(root=0)
    if isinstance(x, tuple) and x and isinstance(x[0], bm.BlockCyclicArray):  # (lu, piv), (q, r)
        parts = [y.to_numpy(root=0) if isinstance(y, bm.BlockCyclicArray) else y for y in x]
        return None if parts[0] is None else tuple(parts)
    return None


def _verdict(case: Case, g: dict[str, Any], result: Any) -> dict[str, Any]:
    op = case.op
    c = 2.0 if case.is_complex else 1.0
    if op in DATA_OPERATORS:
        expected = g["A"].T if op == "transpose" else g["A"]
        same = result.shape == expected.shape and bool(np.array_equal(result, expected))
        return {
            "measure": "exact equality",
            "error_eps": 0.0 if same else float("inf"),
            "bound_eps": 0.0,
            "passed": same,
        }
    rd = _ref_dtype(case.dtype)
    a = g["A"].astype(rd)
    left = case.side == "left" or op == "solve_triangular"
    if op == "sum_axis0":
        # a sum of m terms in any order: |s - s_ref| <= gamma_{m-1} sum |a| (Higham 4.2)
        res = np.asarray(result).reshape(-1)
        err = _product_error(res, a.sum(axis=0), np.abs(a).sum(axis=0))
        bound = c * (a.shape[0] + 1)
        return {
            "measure": "max error / (eps sum|a|) per column",
            "error_eps": err,
            "bound_eps": bound,
            "passed": bool(err <= bound),
        }
    if op in ("matmul", *VIEW_PRODUCTS):
        b = g["B"].astype(rd)
        if op in VIEW_PRODUCTS:
            a, b = a[VIEW_OFFSET:, VIEW_OFFSET:], b[VIEW_OFFSET:, VIEW_OFFSET:]
        err = _product_error(result, a @ b, np.abs(a) @ np.abs(b))
        bound = c * (case.k + 2)
    elif op == "matmul_ata":
        ah = a.conj().T
        err = _product_error(result, ah @ a, np.abs(ah) @ np.abs(a))
        bound = c * (case.k + 2)
    elif op == "gemm":
        b = g["B"].astype(rd)
        opa = _op(a, case.trans)
        ref, absprod = opa @ b, np.abs(opa) @ np.abs(b)
        err = _product_error(result, ref, absprod)
        bound = c * (case.k + 2)
    elif op == "symm":
        b = g["B"].astype(rd)
        tri = np.tril(a) if case.lower else np.triu(a)
        sym = tri + (np.tril(a, -1) if case.lower else np.triu(a, 1)).T
        if left:
            ref, absprod = sym @ b, np.abs(sym) @ np.abs(b)
        else:
            ref, absprod = b @ sym, np.abs(b) @ np.abs(sym)
        err = _product_error(result, ref, absprod)
        bound = c * (sym.shape[0] + 2)
    elif op in ("syrk", "syr2k"):
        opa = _op(a, case.trans)
        if case.trans == "C":  # HERK / HER2K
            if op == "syrk":
                ref, absprod = opa @ opa.conj().T, np.abs(opa) @ np.abs(opa).T
            else:
                opb = _op(g["B"].astype(rd), case.trans)
                ref = opa @ opb.conj().T + opb @ opa.conj().T
                absprod = np.abs(opa) @ np.abs(opb).T + np.abs(opb) @ np.abs(opa).T
        elif op == "syrk":
            ref, absprod = opa @ opa.T, np.abs(opa) @ np.abs(opa).T
        else:
            opb = _op(g["B"].astype(rd), case.trans)
            ref = opa @ opb.T + opb @ opa.T
            absprod = np.abs(opa) @ np.abs(opb).T + np.abs(opb) @ np.abs(opa).T
        n = ref.shape[0]
        mask = np.tril(np.ones((n, n), bool)) if case.lower else np.triu(np.ones((n, n), bool))
        err = _product_error(result, ref, absprod, mask)
        bound = c * (case.k + 2) * (2 if op == "syr2k" else 1)
    elif op == "trmm":
        b = g["B"].astype(rd)
        t = _op(np.tril(a) if case.lower else np.triu(a), case.trans)
        if left:
            ref, absprod = t @ b, np.abs(t) @ np.abs(b)
        else:
            ref, absprod = b @ t, np.abs(b) @ np.abs(t)
        err = _product_error(result, ref, absprod)
        bound = c * (t.shape[0] + 2)
    elif op in ("trsm", "solve_triangular"):
        b = g["B"].astype(rd)
        trans = case.trans if op == "trsm" else "N"
        t = _op(np.tril(a) if case.lower else np.triu(a), trans)
        x = result.astype(rd)
        residual = t @ x - b if left else x @ t - b
        norm = lambda z: float(np.linalg.norm(z, np.inf))  # noqa: E731
        denom = (norm(t) * norm(x) + norm(b)) * _eps(case.dtype)
        err = norm(residual) / max(denom, np.finfo(np.float64).tiny)
        bound = c * (t.shape[0] + 2)
        return {
            "measure": "normwise backward error",
            "error_eps": err,
            "bound_eps": bound,
            "passed": bool(err <= bound),
        }
    elif op == "cholesky":
        n = a.shape[0]
        r = result.astype(rd)
        low = np.tril(r) if case.lower else np.triu(r).conj().T
        herm = (
            np.tril(a) + np.tril(a, -1).conj().T
            if case.lower
            else np.triu(a) + np.triu(a, 1).conj().T
        )
        fro = lambda z: float(np.linalg.norm(z, "fro"))  # noqa: E731
        norm_a = max(fro(herm), np.finfo(np.float64).tiny)
        err = fro(herm - low @ low.conj().T) / (norm_a * n * _eps(case.dtype))
        bound = 2 * c * (n + 2) / n * fro(np.abs(low) @ np.abs(low).T) / norm_a
        return {
            "measure": "||A - L L^H|| / (||A|| n eps)",
            "error_eps": err,
            "bound_eps": bound,
            "passed": bool(err <= bound),
        }
    elif op == "lu":
        n = a.shape[0]
        lu, piv = result
        lu = lu.astype(rd)
        low = np.tril(lu, -1) + np.eye(n, dtype=rd)
        up = np.triu(lu)
        perm = np.arange(n)
        for i, p in enumerate(piv):
            perm[i], perm[p] = perm[p], perm[i]
        fro = lambda z: float(np.linalg.norm(z, "fro"))  # noqa: E731
        norm_a = max(fro(a), np.finfo(np.float64).tiny)
        err = fro(a[perm] - low @ up) / (norm_a * n * _eps(case.dtype))
        # Higham Thm. 9.3: |P A - L U| <= gamma_n |L| |U| (elementwise)
        bound = 2 * c * (n + 2) / n * fro(np.abs(low) @ np.abs(up)) / norm_a
        return {
            "measure": "||P A - L U|| / (||A|| n eps)",
            "error_eps": err,
            "bound_eps": bound,
            "passed": bool(err <= bound),
        }
    elif op in ("qr", "qr_tall", "lstsq"):
        return _qr_verdict(case, a, g, result)
    elif op in ("eigh", "eigvalsh"):
        return _eigh_verdict(case, a, result)
    elif op in ("svd", "svd_polar"):
        return _svd_verdict(case, a, result)
    else:  # pragma: no cover - guarded by prepare()
        raise ValueError(op)
    return {
        "measure": "max componentwise error / (eps |A||B|)",
        "error_eps": err,
        "bound_eps": bound,
        "passed": bool(err <= bound),
    }


def _qr_verdict(case: Case, a: np.ndarray, g: dict[str, Any], result: Any) -> dict[str, Any]:
    """LAPACK's testers' ratios in eps, against their threshold 30: QR, the larger of
    ``||A - Q R||_1 / (||A||_1 max(m, n) eps)`` and ``||I - Q^H Q||_1 / (m eps)`` (xQRT01);
    least squares, ``||b - A x||_1 / (max(m, n) ||A||_1 ||x||_1 eps)`` for ``m <= n``
    (xQRT16) or ``||r^H A||_1 / (max(m, n, k) ||A||_1 ||b||_1 eps)`` for ``m > n`` (xQRT17)."""
    m, n = a.shape
    e = _eps(case.dtype)
    one = lambda z: float(np.abs(z).sum(axis=0).max()) if z.size else 0.0  # noqa: E731
    norm_a = max(one(a), np.finfo(np.float64).tiny)
    if case.op == "lstsq":
        b = g["B"].astype(a.dtype)
        x = result[0].astype(a.dtype)
        r = b - a @ x
        if m <= n:
            err = one(r) / (max(m, n) * norm_a * max(one(x), np.finfo(np.float64).tiny) * e)
            measure = "||b - A x|| / (max(m,n) ||A|| ||x|| eps)"
        else:
            err = one(r.conj().T @ a) / (max(m, n, case.k) * norm_a * max(one(b), 1e-300) * e)
            measure = "||r^H A|| / (max(m,n,k) ||A|| ||b|| eps)"
    else:
        q, r = (z.astype(a.dtype) for z in result)
        resid = one(a - q @ r) / (norm_a * max(m, n) * e)
        orth = one(np.eye(q.shape[1]) - q.conj().T @ q) / (m * e)
        err = max(resid, orth)
        measure = "max(||A - QR|| / (||A|| max(m,n) eps), ||I - Q^H Q|| / (m eps))"
    return {"measure": measure, "error_eps": err, "bound_eps": 30.0, "passed": bool(err < 30)}


def _eigh_verdict(case: Case, a: np.ndarray, result: Any) -> dict[str, Any]:
    """LAPACK's eigensolver tester's ratios in eps, against its threshold 60 (xDRVST): the
    larger of ``||A V - V diag(w)||_1 / (||A||_1 n eps)`` and ``||I - V^H V||_1 / (n eps)``
    (eigh), and ``max |w - w_lapack| / (n eps ||A||_1)`` (both)."""
    n = a.shape[0]
    e = _eps(case.dtype)
    one = lambda z: float(np.abs(z).sum(axis=0).max()) if z.size else 0.0  # noqa: E731
    norm_a = max(one(a), np.finfo(np.float64).tiny)
    w, v = result if case.op == "eigh" else (result, None)
    w = np.asarray(w).astype(np.float64)
    err = float(np.abs(w - np.linalg.eigvalsh(a)).max()) / (n * e * norm_a) if n else 0.0
    measure = "|w - w_lapack| / (n eps ||A||)"
    if v is not None:
        v = v.astype(a.dtype)
        resid = one(a @ v - v * w) / (norm_a * n * e)
        orth = one(np.eye(n) - v.conj().T @ v) / (n * e)
        err = max(err, resid, orth)
        measure = "max(||AV - VW|| / (||A|| n eps), ||I - V^H V|| / (n eps), eigenvalues)"
    return {"measure": measure, "error_eps": err, "bound_eps": 60.0, "passed": bool(err < 60)}


def _svd_verdict(case: Case, a: np.ndarray, result: Any) -> dict[str, Any]:
    """LAPACK's SVD tester's ratios in eps (xDRVBD), against its threshold 60: the largest of
    ``||A - U S V^H||_1 / (||A||_1 max(m, n) eps)``, ``||I - U^H U||_1 / (m eps)`` and
    ``||I - V V^H||_1 / (n eps)``."""
    m, n = a.shape
    k = min(m, n)
    e = _eps(case.dtype)
    one = lambda z: float(np.abs(z).sum(axis=0).max()) if z.size else 0.0  # noqa: E731
    u, s, vh = (z.astype(a.dtype) for z in result)
    norm_a = max(one(a), np.finfo(np.float64).tiny)
    resid = one(a - (u[:, :k] * s.real) @ vh[:k]) / (norm_a * max(m, n) * e)
    orth_u = one(np.eye(u.shape[1]) - u.conj().T @ u) / (m * e)
    orth_v = one(np.eye(vh.shape[0]) - vh @ vh.conj().T) / (n * e)
    return {
        "measure": "max(||A - U S V^H|| / (||A|| max(m,n) eps), ||I - U^H U||, ||I - V^H V||)",
        "error_eps": max(resid, orth_u, orth_v),
        "bound_eps": 60.0,
        "passed": bool(max(resid, orth_u, orth_v) < 60),
    }


def failed_check(exc: BaseException) -> dict[str, Any]:
    """The verdict of a check that raised (reported as failed, identically on every rank)."""
    return {
        "measure": "error",
        "error_eps": float("nan"),
        "bound_eps": 0.0,
        "passed": False,
        "note": f"check raised {type(exc).__name__}: {exc}",
    }
