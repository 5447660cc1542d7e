"""The MPI baselines of ``--compare`` (Heat, ScaLAPACK PBLAS through scalapack4py, cuBLASMp).

The pure tests (reformulation of TRSM for Heat, the checks, library discovery, skip reasons) run
everywhere. The distributed ones run the bench command under ``mpiexec -n 2`` when the library
is usable here and are skipped with the reason otherwise (CI installs neither Heat nor a
ScaLAPACK library). Tolerances come from the error bounds of ``bench/operators.py``.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import subprocess
import sys
import types
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import scipy.linalg

from blasmp_array.bench import heat_adapter, mpi_baselines, mpi_run, pblas_adapter
from blasmp_array.bench.operators import Case

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = {"heat": "heat", "scalapack4py": "scalapack (PBLAS)"}


# -- Heat's TRSM: every case as an upper left system ---------------------------------------
@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans", ["N", "T", "C"])
def test_upper_left_form_gives_the_solution(dtype: str, side: str, lower: bool, trans: str) -> None:
    rng = np.random.default_rng(7)
    m, n = 11, 6
    na = m if side == "left" else n
    a = rng.standard_normal((na, na)) + na * np.eye(na)
    b = rng.standard_normal((m, n))
    if dtype == "complex128":
        a = a + 1j * rng.standard_normal((na, na))
        b = b + 1j * rng.standard_normal((m, n))
    case = Case("trsm", m, n, 0, dtype=dtype, side=side, lower=lower, trans=trans)
    u, rhs, undo = heat_adapter.upper_left_form(case, a, b)
    assert np.array_equal(u, np.triu(u))  # what Heat is given is upper triangular
    y = scipy.linalg.solve_triangular(u, rhs, lower=False)
    x = undo(y)
    assert x.shape == b.shape
    # the same check as the bench's own: normwise backward error against c (na + 2) eps
    verdict = mpi_baselines.judge(case, {"A": a, "B": b}, x, None)
    assert verdict["passed"], verdict
    assert verdict["error_eps"] <= verdict["bound_eps"]


# -- the check of a baseline's result ------------------------------------------------------
def _gemm_operands(m: int = 9, n: int = 7, k: int = 13) -> tuple[Case, dict[str, np.ndarray]]:
    rng = np.random.default_rng(3)
    g = {"A": rng.standard_normal((m, k)), "B": rng.standard_normal((k, n))}
    return Case("gemm", m, n, k), g


def test_judge_gemm_passes_a_right_product_and_fails_a_wrong_one() -> None:
    case, g = _gemm_operands()
    c = g["A"] @ g["B"]
    good = mpi_baselines.judge(case, g, c, c.copy())
    assert good["passed"] and good["bound_eps"] == case.k + 2
    assert good["vs_blasmp_eps"] == 0.0 and good["vs_blasmp_bound_eps"] == 2 * (case.k + 2)
    # one element off by 10 x the bound (in units of eps (|A||B|)_ij) must fail
    absprod = np.abs(g["A"]) @ np.abs(g["B"])
    bad = c.copy()
    bad[2, 3] += 10 * good["bound_eps"] * np.finfo(np.float64).eps * absprod[2, 3]
    wrong = mpi_baselines.judge(case, g, bad, c)
    assert not wrong["passed"]
    assert wrong["error_eps"] > wrong["bound_eps"]
    assert wrong["vs_blasmp_eps"] > wrong["vs_blasmp_bound_eps"]


def test_judge_flags_a_baseline_that_disagrees_with_blasmp_array() -> None:
    case, g = _gemm_operands()
    c = g["A"] @ g["B"]
    absprod = np.abs(g["A"]) @ np.abs(g["B"])
    eps = np.finfo(np.float64).eps
    # each within its own bound of the exact product, but on opposite sides of it
    bound = case.k + 2
    lib = c + 0.9 * bound * eps * absprod
    ours = c - 0.9 * bound * eps * absprod
    verdict = mpi_baselines.judge(case, g, lib, ours)
    assert verdict["error_eps"] <= verdict["bound_eps"]
    assert verdict["vs_blasmp_eps"] <= verdict["vs_blasmp_bound_eps"]  # 1.8 bound <= 2 bound
    assert verdict["passed"]


@pytest.mark.parametrize("side", ["left", "right"])
def test_judge_trsm_against_blasmp_array(side: str) -> None:
    rng = np.random.default_rng(5)
    m, n = 12, 8
    na = m if side == "left" else n
    a = rng.standard_normal((na, na)) + na * np.eye(na)
    b = rng.standard_normal((m, n))
    case = Case("trsm", m, n, 0, side=side)
    t = np.tril(a)
    x = (
        scipy.linalg.solve_triangular(t, b, lower=True)
        if side == "left"
        else (scipy.linalg.solve_triangular(t.T, b.T, lower=False).T)
    )
    ok = mpi_baselines.judge(case, {"A": a, "B": b}, x, x.copy())
    assert ok["passed"] and ok["vs_blasmp_eps"] == 0.0
    assert ok["vs_blasmp_bound_eps"] == 2 * (na + 2)
    off = x.copy()
    off[0, 0] += 1e-6 * np.abs(x).max()  # some 10^10 eps: far outside any bound
    bad = mpi_baselines.judge(case, {"A": a, "B": b}, off, x)
    assert not bad["passed"] and bad["vs_blasmp_eps"] > bad["vs_blasmp_bound_eps"]


# -- discovery and skip reasons ------------------------------------------------------------
def test_mpi_family() -> None:
    assert pblas_adapter.mpi_family("MPICH Version:      5.0.2\n...") == "mpich"
    assert pblas_adapter.mpi_family("Open MPI v4.1.4, package: Debian") == "openmpi"
    assert pblas_adapter.mpi_family("Intel(R) MPI Library 2021.10") == "mpich"
    assert pblas_adapter.mpi_family("Some other MPI 1.0") is None


def test_library_candidates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("libscalapack-mpich.so.2.2", "libscalapack-mpich.so.2.2.1"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "libscalapack-openmpi.so.2.2").write_bytes(b"")
    monkeypatch.setattr(pblas_adapter, "_LIB_DIRS", (str(tmp_path),))
    found = pblas_adapter.library_candidates("mpich", env={})
    assert found == [
        str(tmp_path / "libscalapack-mpich.so.2.2"),
        str(tmp_path / "libscalapack-mpich.so.2.2.1"),
    ]
    assert pblas_adapter.library_candidates("openmpi", env={}) == [
        str(tmp_path / "libscalapack-openmpi.so.2.2")
    ]
    assert pblas_adapter.library_candidates("mpich", env={"SCALAPACK_LIB_PATH": "/x/lib.so"}) == [
        "/x/lib.so"
    ]


def test_missing_libraries_are_skipped_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    missing = {"heat", "scalapack4py"}
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in missing else real(name, *a)
    )
    case = Case("gemm", 8, 8, 8)
    assert heat_adapter.unusable(case) == "not installed"
    assert "not installed" in (pblas_adapter.unusable(case) or "")


def test_heat_without_triangular_solve_skips_trsm_only(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("heat")
    fake.__spec__ = importlib.machinery.ModuleSpec("heat", None)
    fake.__version__ = "0.0-test"  # type: ignore[attr-defined]
    fake.linalg = types.SimpleNamespace(matmul=None)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "heat", fake)
    assert heat_adapter.unusable(Case("gemm", 8, 8, 8)) is None
    why = heat_adapter.unusable(Case("trsm", 8, 8, 0))
    assert why is not None and "no distributed triangular solve" in why


def test_operators_without_an_adapter_are_reported_not_measured() -> None:
    class _Prepared:
        case = Case("syrk", 8, 8, 8)

    out = mpi_baselines.measure_mpi_baselines(
        _Prepared(), None, None, None, 0, 1, 1.0, ("heat", "scalapack4py", "cublasmp"), False
    )
    assert [e["library"] for e in out] == ["heat", "scalapack (PBLAS)", "cublasmp"]
    for e in out:
        assert e["median_s"] is None and e["gflops"] is None
    heat, pblas, cublasmp = (e["note"] for e in out)
    assert heat == "syrk: the heat adapter covers gemm and trsm only"
    assert cublasmp == "syrk: the cublasmp adapter covers gemm and trsm only"
    covered = "gemm, trsm, cholesky, lu, qr, qr_tall, lstsq, eigh, eigvalsh and svd"
    assert pblas == f"syrk: the scalapack4py adapter covers {covered} only"


@pytest.mark.parametrize("name", ["heat", "cublasmp"])
@pytest.mark.parametrize("op", ["cholesky", "lu"])
def test_factorizations_have_the_scalapack_and_cusolvermp_adapters_only(name: str, op: str) -> None:
    class _Prepared:
        case = Case(op, 8, 8, 8)

    (e,) = mpi_baselines.measure_mpi_baselines(
        _Prepared(), None, None, None, 0, 1, 1.0, (name,), False
    )
    assert e["median_s"] is None and f"{op}: the {name} adapter covers" in e["note"]
    assert op in mpi_baselines.SUPPORTED_OPS["scalapack4py"]
    assert op in mpi_baselines.SUPPORTED_OPS["cusolvermp"]


@pytest.mark.parametrize("op", ["gemm", "trsm", "syrk"])
def test_cusolvermp_covers_the_factorizations_and_eigh_only(op: str) -> None:
    class _Prepared:
        case = Case(op, 8, 8, 8)

    (e,) = mpi_baselines.measure_mpi_baselines(
        _Prepared(), None, None, None, 0, 1, 1.0, ("cusolvermp",), False
    )
    assert e["library"] == "cusolvermp" and e["median_s"] is None
    assert e["note"] == f"{op}: the cusolvermp adapter covers cholesky, lu and eigh only"


def test_a_failed_factorization_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    closed = []

    def call() -> None:
        raise np.linalg.LinAlgError("pdpotrf_ returned INFO = 3")

    run = mpi_run.MpiRun(call=call, gather=lambda r: r, note="pdpotrf_ of libx")
    run.close = lambda: closed.append(True)
    fake = types.SimpleNamespace(unusable=lambda case, comm: None, prepare=lambda p, g, c: run)
    monkeypatch.setattr(mpi_baselines, "_adapter", lambda name: fake)
    comm = types.SimpleNamespace(allgather=lambda x: [x])

    class _Prepared:
        case = Case("cholesky", 8, 8, 8)

    (e,) = mpi_baselines.measure_mpi_baselines(
        _Prepared(), None, None, comm, 1, 3, 1.0, ("scalapack4py",), False
    )
    assert e["median_s"] is None and e["gflops"] is None
    assert e["note"] == "failed: LinAlgError: pdpotrf_ returned INFO = 3; pdpotrf_ of libx"
    assert closed == [True]


def test_judge_factorizations_by_their_backward_error_only() -> None:
    rng = np.random.default_rng(11)
    n = 10
    g = rng.standard_normal((n, n))
    spd = g.T @ g / n + np.eye(n)
    low = np.linalg.cholesky(spd)
    case = Case("cholesky", n, n, n)
    ok = mpi_baselines.judge(case, {"A": spd}, low, low.copy())
    assert ok["passed"] and "vs_blasmp_eps" not in ok  # no forward comparison of factors
    bad = low.copy()
    bad[5, 2] += 1e-6
    assert not mpi_baselines.judge(case, {"A": spd}, bad, low)["passed"]
    lu, piv = scipy.linalg.lu_factor(g)
    case = Case("lu", n, n, n)
    ok = mpi_baselines.judge(case, {"A": g}, (lu, piv), None)
    assert ok["passed"] and ok["measure"] == "||P A - L U|| / (||A|| n eps)"
    wrong = piv.copy()
    wrong[0] = (piv[0] + 1) % n  # another row interchange: P A != L U
    assert not mpi_baselines.judge(case, {"A": g}, (lu, wrong), None)["passed"]


class _PivotComm:
    """A 2x2 grid's communicator for one rank: gather() returns what every rank would send."""

    def __init__(self, parts: list[object], rank: int) -> None:
        self.parts, self.rank = parts, rank

    def gather(self, mine: object, root: int = 0) -> list[object]:
        return self.parts

    def Get_rank(self) -> int:  # noqa: N802 (mpi4py's name)
        return self.rank


def test_pblas_pivots_gathered_from_process_column_0() -> None:
    from blasmp_array.layout import BlockCyclicLayout

    n, mb = 7, 2
    layout = BlockCyclicLayout((n, n), (mb, mb), (2, 2))
    piv = np.array([3, 1, 6, 6, 4, 5, 6])  # 0-based, as SciPy's

    def ipiv_of(prow: int) -> np.ndarray:  # ScaLAPACK's: LOCr + MB, 1-based global rows
        rows = layout.local_rows(prow)
        ipiv = np.zeros(len(rows) + mb, np.int32)
        ipiv[: len(rows)] = piv[rows] + 1
        return ipiv

    # what ranks (0,0), (0,1), (1,0), (1,1) send: process column 0 only
    parts: list[object] = [
        (layout.local_rows(prow), ipiv_of(prow)[: len(layout.local_rows(prow))])
        if pcol == 0
        else None
        for prow in range(2)
        for pcol in range(2)
    ]
    grid = types.SimpleNamespace(myrow=0, mycol=0, rank=0, comm=_PivotComm(parts, 0))
    got = pblas_adapter._gather_pivots(ipiv_of(0), layout, grid)
    assert got is not None and got.dtype == np.int32
    assert np.array_equal(got, piv)
    other = types.SimpleNamespace(myrow=1, mycol=1, rank=3, comm=_PivotComm(parts, 3))
    assert pblas_adapter._gather_pivots(ipiv_of(1), layout, other) is None


def test_cusolvermp_pivots_gathered_from_process_row_0() -> None:
    """cuSOLVERMp's pivots are distributed by columns (like the first row of ``A``)."""
    from blasmp_array.bench import cusolvermp_adapter
    from blasmp_array.layout import BlockCyclicLayout

    n, nb = 7, 2
    layout = BlockCyclicLayout((n, n), (nb, nb), (2, 2))
    piv = np.array([3, 1, 6, 6, 4, 5, 6])

    class _Device:  # a CuPy array's .get()
        def __init__(self, x: np.ndarray) -> None:
            self.x = x

        def get(self) -> np.ndarray:
            return self.x

    def ipiv_of(pcol: int) -> _Device:  # int64, 1-based global rows, one per local column
        return _Device(piv[layout.local_cols(pcol)].astype(np.int64) + 1)

    parts: list[object] = [
        (layout.local_cols(pcol), ipiv_of(pcol).get()) if prow == 0 else None
        for prow in range(2)
        for pcol in range(2)
    ]
    grid = types.SimpleNamespace(myrow=0, mycol=0, rank=0, comm=_PivotComm(parts, 0))
    got = cusolvermp_adapter._gather_pivots(ipiv_of(0), layout, grid)
    assert got is not None and got.dtype == np.int32 and np.array_equal(got, piv)
    short = [parts[0], None, None, None]  # process (0, 1)'s columns missing
    grid = types.SimpleNamespace(myrow=0, mycol=0, rank=0, comm=_PivotComm(short, 0))
    with pytest.raises(RuntimeError, match="cusolverMpGetrf do not cover"):
        cusolvermp_adapter._gather_pivots(ipiv_of(0), layout, grid)


# -- the adapters under mpiexec -------------------------------------------------------------
_PROBE = {
    "heat": "from blasmp_array.bench.heat_adapter import unusable; "
    "from blasmp_array.bench.operators import Case; print(unusable(Case('gemm', 1, 1, 1)) or 'OK')",
    "scalapack4py": "from blasmp_array.bench.pblas_adapter import unusable; "
    "from blasmp_array.bench.operators import Case; print(unusable(Case('gemm', 1, 1, 1)) or 'OK')",
}


@cache
def _why_unusable(name: str) -> str | None:
    """Asked in a separate process (loading Torch or ScaLAPACK into pytest's is not wanted)."""
    if importlib.util.find_spec(name) is None:
        return f"{name} is not installed"
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE[name]], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    last = (proc.stdout.strip().splitlines() or [proc.stderr.strip()[-300:]])[-1]
    return None if proc.returncode == 0 and last == "OK" else f"{name}: {last}"


def _require(name: str) -> None:
    why = _why_unusable(name)
    if why is not None:
        pytest.skip(f"baseline not usable here: {why}")


def _measured(args: list[str], name: str, tmp_path: Path, repeat: int = 3) -> tuple[dict, dict]:
    """Run the bench on 2 ranks with ``--check --profile --compare --baselines name``; return
    the result record and the baseline's entry, after checking the entry was measured the way
    blasmp_array is: ``repeat`` times over 2 ranks, the median of them."""
    from test_bench import run_bench

    out = tmp_path / "r.json"
    proc = run_bench(
        [
            *args,
            "--check",
            "--profile",
            "--compare",
            "--baselines",
            name,
            "--repeat",
            str(repeat),
            "--warmup",
            "1",
            "--json",
            str(out),
            "--quiet",
        ]
    )
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    (result,) = json.loads(out.read_text())["results"]
    assert result["check"]["passed"]
    (entry,) = [b for b in result["compare"] if b["library"] == LIBRARY[name]]
    assert entry["ranks"] == 2
    assert len(entry["times_s"]) == repeat
    assert entry["median_s"] == pytest.approx(float(np.median(entry["times_s"])))
    assert entry["gflops"] == pytest.approx(result["flops"] / entry["median_s"] / 1e9)
    return result, entry


@pytest.mark.mpi
@pytest.mark.parametrize("name", ["heat", "scalapack4py"])
@pytest.mark.parametrize(
    "args",
    [
        ["gemm", "--m", "37", "--n", "29", "--k", "23", "--block", "8x5"],
        ["gemm", "--n", "24", "--trans", "T", "--dtype", "float32", "--grid", "2x1"],
        ["trsm", "--m", "37", "--n", "29", "--block", "8"],
        ["trsm", "--n", "24", "--side", "right", "--uplo", "upper", "--dtype", "complex128"],
    ],
    ids=["gemm", "gemm-T-f32-2x1", "trsm", "trsm-right-upper-z"],
)
def test_baseline_measured_and_checked(name: str, args: list[str], tmp_path: Path) -> None:
    _require(name)
    _, entry = _measured(args, name, tmp_path)
    assert 0 < entry["min_s"] <= entry["median_s"] <= entry["max_s"]
    # and right: within the operator's error bound of NumPy, and of blasmp_array's result
    check = entry["check"]
    assert check["passed"] is True, check
    assert check["error_eps"] <= check["bound_eps"]
    assert check["vs_blasmp_eps"] <= check["vs_blasmp_bound_eps"]
    assert check["vs_blasmp_bound_eps"] == 2 * check["bound_eps"]


@pytest.mark.mpi
@pytest.mark.parametrize(
    "args",
    [
        ["cholesky", "--n", "37", "--block", "8"],
        ["cholesky", "--n", "24", "--uplo", "upper", "--dtype", "complex128", "--grid", "2x1"],
        ["lu", "--n", "37", "--block", "8"],
        ["lu", "--n", "29", "--block", "4", "--dtype", "float32", "--grid", "2x1"],
    ],
    ids=["cholesky", "cholesky-upper-z-2x1", "lu", "lu-f32-2x1"],
)
def test_scalapack_factorizations_measured_and_checked(args: list[str], tmp_path: Path) -> None:
    _require("scalapack4py")
    result, entry = _measured(args, "scalapack4py", tmp_path)
    routine = {"cholesky": "potrf_", "lu": "getrf_"}[args[0]]
    assert routine in entry["note"]
    # every repeat factored the restored A: the last result passes the factorization's check
    check = entry["check"]
    assert check["passed"] is True, check
    assert check["error_eps"] <= check["bound_eps"]
    assert check["measure"] == result["check"]["measure"]


@pytest.mark.mpi
@pytest.mark.parametrize(
    "args",
    [
        ["eigh", "--n", "37", "--block", "8"],
        ["eigh", "--n", "24", "--block", "5", "--dtype", "complex128", "--grid", "2x1"],
        ["eigvalsh", "--n", "37", "--block", "8"],
        ["eigvalsh", "--n", "29", "--block", "4", "--dtype", "complex64", "--grid", "2x1"],
        ["svd", "--n", "37", "--block", "8"],
        ["svd", "--m", "40", "--n", "26", "--block", "6", "--dtype", "float32", "--grid", "2x1"],
        ["svd", "--m", "21", "--n", "34", "--block", "4", "--dtype", "complex128"],
        ["qr", "--m", "45", "--n", "30", "--block", "6"],
        [
            "qr_tall",
            "--m",
            "120",
            "--n",
            "12",
            "--block",
            "4",
            "--dtype",
            "complex128",
            "--grid",
            "2x1",
        ],
        ["lstsq", "--m", "50", "--n", "20", "--k", "3", "--block", "5"],
        ["lstsq", "--m", "18", "--n", "30", "--k", "2", "--block", "4", "--dtype", "float32"],
    ],
    ids=[
        "eigh",
        "eigh-z-2x1",
        "eigvalsh",
        "eigvalsh-c-2x1",
        "svd",
        "svd-tall-f32-2x1",
        "svd-wide-z",
        "qr",
        "qr-tall-z-2x1",
        "lstsq",
        "lstsq-wide-f32",
    ],
)
def test_scalapack_qr_and_spectral_drivers_measured_and_checked(
    args: list[str], tmp_path: Path
) -> None:
    from blasmp_array.bench.pblas_adapter import routine_name

    _require("scalapack4py")
    result, entry = _measured(args, "scalapack4py", tmp_path)
    dtype = args[args.index("--dtype") + 1] if "--dtype" in args else "float64"
    assert routine_name(args[0], dtype) + "_" in entry["note"]
    # every repeat solved the restored A: the last result passes the tester's ratios
    check = entry["check"]
    assert check["passed"] is True, check
    assert check["error_eps"] <= check["bound_eps"]
    assert check["measure"] == result["check"]["measure"]


def test_spectral_routine_names() -> None:
    from blasmp_array.bench.pblas_adapter import routine_name

    assert routine_name("eigh", "float64") == "pdsyevd"
    assert routine_name("eigh", "complex64") == "pcheevd"
    assert routine_name("eigvalsh", "float32") == "pssyev"
    assert routine_name("eigvalsh", "complex128") == "pzheev"
    assert routine_name("svd", "complex128") == "pzgesvd"
    assert routine_name("lu", "complex128") == "pzgetrf"
    assert routine_name("qr_tall", "float64") == "pdgeqrf"
    assert routine_name("lstsq", "complex64") == "pcgels"


@pytest.mark.mpi
def test_pblas_uses_blasmp_array_descriptors_on_every_grid_of_a_sweep(tmp_path: Path) -> None:
    _require("scalapack4py")
    from test_bench import run_bench

    out = tmp_path / "s.json"
    proc = run_bench(
        [
            "gemm",
            "--sweep",
            "--sizes",
            "16,33",
            "--grids",
            "1x2,2x1",
            "--blocks",
            "4,7",
            "--check",
            "--compare",
            "--baselines",
            "scalapack4py",
            "--repeat",
            "1",
            "--warmup",
            "0",
            "--json",
            str(out),
            "--quiet",
        ]
    )
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    results = json.loads(out.read_text())["results"]
    assert len(results) == 8
    for r in results:
        (entry,) = r["compare"]
        assert entry["check"]["passed"], entry
        assert f"block {r['block'][0]}x{r['block'][1]}" in entry["note"]
        assert f"BLACS grid {r['grid'][0]}x{r['grid'][1]}" in entry["note"]
        assert "(mpi4py's)" in entry["note"]


def test_table_prints_notes_with_brackets_verbatim(capsys: pytest.CaptureFixture[str]) -> None:
    from blasmp_array.bench import report

    record = {
        "op": "gemm",
        "dtype": "float64",
        "m": 2,
        "n": 2,
        "k": 2,
        "grid": [1, 2],
        "block": [1, 1],
        "profile": {"median_s": 1.0, "min_s": 1.0, "max_s": 1.0, "gflops_total": 1.0},
        "check": None,
        "compare": [
            {
                "library": "scalapack (PBLAS)",
                "median_s": 1.0,
                "gflops": 2.0,
                "threads": 1,
                "ranks": 2,
                "note": "B [/l/b.so]",
            }
        ],
    }
    env = {"ranks": 2, "hosts": ["h"], "backend": "cpu", "blas_summary": "x [libopenblas.so]"}
    report.print_table([record], env, "t")  # rich (when installed) must not read [...] as markup
    text = "".join(capsys.readouterr().out.split())
    assert "[/l/b.so]" in text and "[libopenblas.so]" in text
    assert report._workers(record["compare"][0]) == " (2 ranks x 1 thr)"
    assert report._workers({"threads": 2}) == " (2 thr)"


# -- cuBLASMp: the parts that need no GPU --------------------------------------------------
def test_nccl_version_text() -> None:
    from blasmp_array.bench.cublasmp_adapter import MIN_NCCL, nccl_version_text

    assert nccl_version_text(22902) == "2.29.2"
    assert nccl_version_text(22809) == "2.28.9"
    assert nccl_version_text(2804) == "2.8.4"  # the code had 1000 per major version before 2.9
    assert nccl_version_text(MIN_NCCL) == "2.29.0"


def test_cublasmp_refuses_ranks_sharing_a_gpu() -> None:
    from blasmp_array.bench.cublasmp_adapter import gpu_sharing

    assert gpu_sharing([("a", 0), ("a", 1), ("b", 0)]) is None
    why = gpu_sharing([("a", 0), ("a", 1), ("a", 0)])
    assert why is not None and "ranks 0 and 2 share GPU 0 of a" in why


def test_cusolvermp_on_the_cpu_backend_is_skipped_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from blasmp_array.bench import cusolvermp_adapter

    monkeypatch.delenv("BLASMP_BACKEND", raising=False)
    why = cusolvermp_adapter.unusable(Case("cholesky", 8, 8, 8, backend="cpu"))
    assert why is not None and "operands on the host" in why and "cuSOLVERMp" in why


def test_cusolvermp_names_the_layouts_it_refuses() -> None:
    from blasmp_array.bench.cusolvermp_adapter import _layout_refusal
    from blasmp_array.layout import BlockCyclicLayout

    assert _layout_refusal(BlockCyclicLayout((8, 8), (2, 2), (1, 2))) is None
    why = _layout_refusal(BlockCyclicLayout((8, 8), (2, 4), (1, 2)))
    assert why is not None and "square blocks" in why and "(2, 4)" in why
    why = _layout_refusal(BlockCyclicLayout((8, 8), (2, 2), (1, 2), src=(0, 1)))
    assert why is not None and "process (0, 0)" in why and "(0, 1)" in why


def test_cublasmp_on_the_cpu_backend_is_skipped_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from blasmp_array.bench import cublasmp_adapter

    monkeypatch.delenv("BLASMP_BACKEND", raising=False)
    why = cublasmp_adapter.unusable(Case("gemm", 8, 8, 8, backend="cpu"))
    assert why is not None and "operands on the host" in why
