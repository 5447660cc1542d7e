"""The bench command under ``mpiexec -n 2`` with tiny sizes: its check passes and its JSON has
the documented fields. Not a timed test: nothing here asserts a speed."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from blasmp_array.bench.cli import build_parser
from blasmp_array.bench.operators import (
    DATA_OPERATORS,
    OPERATORS,
    REDUCTION_OPERATORS,
    Case,
    flop_count,
)

ROOT = Path(__file__).resolve().parent.parent

RESULT_FIELDS = {
    "op",
    "dtype",
    "m",
    "n",
    "k",
    "block",
    "grid",
    "num_stages",
    "ranks",
    "backend",
    "flops",
    "bytes",
    "check",
    "profile",
    "compare",
}
PROFILE_FIELDS = {"warmup", "repeat", "times_s", "median_s", "min_s", "max_s", "rank_median_s"}
ENV_FIELDS = {
    "command",
    "ranks",
    "hosts",
    "backend",
    "blas",
    "blas_summary",
    "gpu",
    "python",
    "numpy",
    "mpi_library",
}


def run_bench(
    args: list[str], nprocs: int = 2, timeout: float = 300
) -> subprocess.CompletedProcess:
    from test_mpi import mpiexec

    env = dict(
        os.environ,
        OMP_NUM_THREADS="1",
        OPENBLAS_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        BLASMP_BACKEND="cpu",
        PYTHONUNBUFFERED="1",
    )
    env.pop("BLASMP_UNDER_MPIEXEC", None)
    env.pop("BLASMP_TRACE", None)
    cmd = [mpiexec(), "-n", str(nprocs), sys.executable, "-m", "blasmp_array.bench", *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_flop_counts() -> None:
    assert flop_count(Case("gemm", 3, 4, 5)) == 2 * 3 * 4 * 5
    assert flop_count(Case("gemm", 3, 4, 5, dtype="complex128")) == 4 * 2 * 3 * 4 * 5
    assert flop_count(Case("syrk", 0, 6, 7)) == 6 * 7 * 7
    assert flop_count(Case("trsm", 5, 3, 0)) == 5 * 5 * 3
    assert flop_count(Case("trsm", 5, 3, 0, side="right")) == 5 * 3 * 3
    assert flop_count(Case("redistribute", 5, 3, 0)) == 0


def test_parser_rejects_bad_grid() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["gemm", "--grid", "4"])
    args = build_parser().parse_args(["gemm", "--grid", "2x3", "--block", "16x8"])
    assert args.grid == (2, 3) and args.block == (16, 8)


@pytest.mark.mpi
@pytest.mark.parametrize("op", OPERATORS)
def test_bench_check_and_profile_json(op: str, tmp_path: Path) -> None:
    out = tmp_path / f"{op}.json"
    csv = tmp_path / f"{op}.csv"
    proc = run_bench(
        [
            op,
            "--m",
            "37",
            "--n",
            "29",
            "--k",
            "23",
            "--block",
            "8x5",
            "--check",
            "--profile",
            "--repeat",
            "2",
            "--warmup",
            "1",
            "--json",
            str(out),
            "--csv",
            str(csv),
        ]
    )
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    data = json.loads(out.read_text())
    assert data["schema"] == 1
    assert ENV_FIELDS <= set(data["environment"])
    assert data["environment"]["ranks"] == 2
    assert data["environment"]["backend"] == "cpu"
    (result,) = data["results"]
    assert RESULT_FIELDS <= set(result)
    assert result["op"] == op and result["ranks"] == 2
    assert result["grid"][0] * result["grid"][1] == 2
    assert result["block"] == [8, 5]
    check = result["check"]
    assert check["passed"] is True, check
    assert check["error_eps"] <= check["bound_eps"]
    prof = result["profile"]
    assert PROFILE_FIELDS <= set(prof)
    assert len(prof["times_s"]) == 2 and len(prof["rank_median_s"]) == 2
    assert prof["min_s"] <= prof["median_s"] <= prof["max_s"]
    if op in DATA_OPERATORS + REDUCTION_OPERATORS:
        assert prof["gbytes_per_s"] > 0
    else:
        assert result["flops"] > 0
        assert prof["gflops_total"] > 0
        assert prof["gflops_per_rank"] == pytest.approx(prof["gflops_total"] / 2)
    rows = csv.read_text().splitlines()
    assert rows[0].startswith("op,dtype,m,n,k") and len(rows) == 2


@pytest.mark.mpi
def test_bench_compare_sweep_plot_trace(tmp_path: Path) -> None:
    out, png, trace = tmp_path / "s.json", tmp_path / "s.png", tmp_path / "t.json"
    proc = run_bench(
        [
            "gemm",
            "--sweep",
            "--sizes",
            "16,24",
            "--grids",
            "1x2,2x1",
            "--blocks",
            "8",
            "--profile",
            "--compare",
            "--repeat",
            "1",
            "--warmup",
            "0",
            "--json",
            str(out),
            "--plot",
            str(png),
            "--trace",
            str(trace),
            "--quiet",
        ]
    )
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    data = json.loads(out.read_text())
    results = data["results"]
    assert [(r["m"], tuple(r["grid"])) for r in results] == [
        (16, (1, 2)),
        (16, (2, 1)),
        (24, (1, 2)),
        (24, (2, 1)),
    ]
    for r in results:
        libs = {b["library"]: b for b in r["compare"]}
        assert "numpy/scipy" in libs
        ref = libs["numpy/scipy"]
        assert ref["median_s"] > 0 and ref["gflops"] > 0
        for b in libs.values():  # measured, or skipped with a reason: never a made-up number
            assert (b["median_s"] is not None) or b["note"]
    if importlib.util.find_spec("matplotlib") is not None:
        assert png.exists() and png.stat().st_size > 0
    else:  # said so, and nothing drawn
        assert not png.exists()
        assert "matplotlib is not installed" in proc.stdout
    # one trace per configuration of the sweep
    for i in range(4):
        t = json.loads((tmp_path / f"t.{i}.json").read_text())
        assert any(e.get("ph") == "X" for e in t["traceEvents"])


@pytest.mark.mpi
def test_bench_reports_check_failure_exit_code(tmp_path: Path) -> None:
    # a grid that does not fit the job is refused on every rank with a clear message
    proc = run_bench(["gemm", "--n", "8", "--grid", "2x2", "--check"])
    assert proc.returncode != 0
    assert "needs 4 ranks" in proc.stdout + proc.stderr
