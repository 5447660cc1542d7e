"""The bench command under ``mpiexec -n 2`` with tiny sizes: its check passes and its JSON has
the documented fields. Not a timed test: nothing here asserts a speed."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
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
def test_bench_transpose_peer_is_the_contiguous_copy(tmp_path: Path) -> None:
    # A.T.resolve() is compared with NumPy's np.ascontiguousarray(a.T), in GB/s; the
    # redistribution has no one-process peer and says so
    out = tmp_path / "t.json"
    proc = run_bench(
        ["transpose,redistribute", "--n", "48", "--block", "8", "--to-block", "16"]
        + ["--profile", "--compare", "--baselines", "numpy,dask", "--repeat", "2"]
        + ["--warmup", "0", "--json", str(out), "--quiet"]
    )
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    by_op = {r["op"]: r for r in json.loads(out.read_text())["results"]}
    peers = {b["library"]: b for b in by_op["transpose"]["compare"]}
    assert set(peers) == {"numpy/scipy"}
    ref = peers["numpy/scipy"]
    assert ref["median_s"] > 0
    assert ref["gbytes_per_s"] == pytest.approx(48 * 48 * 8 / ref["median_s"] / 1e9)
    (skipped,) = by_op["redistribute"]["compare"]
    assert skipped["median_s"] is None and "no single-process equivalent" in skipped["note"]


@pytest.mark.mpi
def test_bench_reports_check_failure_exit_code(tmp_path: Path) -> None:
    # a grid that does not fit the job is refused on every rank with a clear message
    proc = run_bench(["gemm", "--n", "8", "--grid", "2x2", "--check"])
    assert proc.returncode != 0
    assert "needs 4 ranks" in proc.stdout + proc.stderr


# -- the data door: random construction, NumPy in and out, zarr, Dask ---------------------
def test_every_data_row_is_an_operator_with_peers() -> None:
    from blasmp_array.bench.door import DOOR_OPERATORS
    from blasmp_array.bench.door_peers import PEERS

    assert set(DOOR_OPERATORS) <= set(OPERATORS) and set(DOOR_OPERATORS) <= set(DATA_OPERATORS)
    assert set(PEERS) == set(DOOR_OPERATORS)
    args = build_parser().parse_args(["to_zarr,from_zarr", "--dir", "/x", "--baselines", "zarr"])
    assert args.op == ["to_zarr", "from_zarr"] and args.dir == "/x"


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_sample_statistics_accept_draws_and_reject_wrong_ones(dtype: str) -> None:
    from blasmp_array.bench.door import Z_MAX, sample_statistics

    rng = np.random.default_rng(1)
    shape = (200, 100)
    normal = rng.standard_normal(shape)
    uniform = rng.random(shape)
    if dtype == "complex128":  # a standard complex normal; independent uniform parts
        normal = (normal + 1j * rng.standard_normal(shape)) / np.sqrt(2)
        uniform = uniform + 1j * rng.random(shape)

    def fits(x: np.ndarray, kind: str) -> bool:
        s = sample_statistics(x, kind)
        return s["in_support"] and max(abs(s["mean_z"]), abs(s["moment_z"])) <= Z_MAX

    assert fits(normal, "normal") and fits(uniform, "uniform")
    assert not fits(normal + 0.1, "normal")  # mean off by 0.1: ~14 standard errors
    assert not fits(normal * 1.05, "normal")  # variance off by 10%: ~10 standard errors
    assert not fits(uniform * 0.9, "uniform")
    assert not fits(uniform + 1.0, "uniform")  # outside [0, 1]
    bad = normal.copy()
    bad[3, 4] = np.nan
    assert not fits(bad, "normal")
    with pytest.raises(ValueError, match="'normal' or 'uniform'"):
        sample_statistics(normal, "gamma")


@pytest.mark.parametrize("sharded", [False, True])
def test_store_layout_lets_dask_write_the_same_store(tmp_path: Path, sharded: bool) -> None:
    zarr = pytest.importorskip("zarr")
    da = pytest.importorskip("dask.array")
    from blasmp_array.bench.door import store_layout

    if int(zarr.__version__.split(".")[0]) < 3:
        pytest.skip("the sharded store and explicit codecs are zarr-python 3's")
    h = np.random.default_rng(2).standard_normal((37, 29))
    extra = {"shards": (16, 10)} if sharded else {}
    codec = zarr.codecs.BloscCodec(cname="lz4", clevel=3)
    ours = zarr.create_array(
        store=str(tmp_path / "ours.zarr"),
        shape=h.shape,
        dtype=h.dtype,
        chunks=(8, 5),
        compressors=[codec],
        **extra,
    )
    ours[...] = h
    layout = store_layout(tmp_path / "ours.zarr")
    assert layout["unit"] == ((16, 10) if sharded else (8, 5))
    assert "BloscCodec" in layout["description"] and "lz4" in layout["description"]
    peer = tmp_path / "peer.zarr"
    da.from_array(h, chunks=layout["unit"]).to_zarr(str(peer), **layout["kwargs"])
    assert store_layout(peer)["description"] == layout["description"]
    assert np.array_equal(zarr.open_array(str(peer), mode="r")[...], h)


def test_table_ratio_of_a_data_row_is_our_rate_over_the_peers() -> None:
    from blasmp_array.bench import report

    record = {
        "op": "to_numpy",
        "dtype": "float64",
        "m": 4,
        "n": 4,
        "k": 4,
        "grid": [1, 1],
        "block": [2, 2],
        "data_op": True,
        "profile": {"median_s": 2.0, "min_s": 2.0, "max_s": 2.0, "gbytes_per_s": 3.0},
        "compare": [
            {"library": "cupy", "median_s": 1.0, "gbytes_per_s": 6.0, "gflops": None},
            {"library": "numpy", "median_s": None, "gbytes_per_s": None, "note": "skipped"},
        ],
    }
    header, rows = report.result_rows([record])
    rate, ratio = header.index("GB/s"), header.index("ratio")
    assert [r[rate] for r in rows] == ["3", "6", "-"]
    assert [r[ratio] for r in rows] == ["", "0.50x", ""]


def _door_result(op: str, ours: float | None, peers: dict[str, float | None]) -> dict:
    return {
        "op": op,
        "profile": None if ours is None else {"median_s": ours},
        "compare": [
            {"library": lib, "median_s": t, "note": "" if t else "not installed; skipped"}
            for lib, t in peers.items()
        ],
    }


def test_door_summary_against_the_gpu_targets() -> None:
    from tool_module import load_tool

    ds = load_tool("door_summary")
    one = {
        "results": [
            _door_result("random", 0.02, {"cupy": 0.01}),  # 0.5x cupy's rate: just met
            _door_result("random_uniform", 0.03, {"cupy": 0.01}),  # 0.33x: missed
            _door_result("from_numpy", 1.0, {"cupy": None}),  # no peer: missing, with the reason
            _door_result("to_zarr", 1.0, {"dask.array": 1.2}),
            _door_result("to_dask", 1.6, {"blasmp_array to_numpy()": 1.0}),  # 1.6x: missed
        ]
    }
    four = {"results": [_door_result("to_zarr", 0.4, {}), _door_result("random", 0.03, {})]}
    s = ds.gpu_summary(one, four)
    by = {line["op"]: line for line in s["one_rank"]}
    assert by["random"]["verdict"] == "met" and by["random"]["time_ratio"] == pytest.approx(2)
    assert by["random_uniform"]["verdict"] == "MISSED"
    assert by["from_numpy"]["verdict"] == "missing" and "not installed" in by["from_numpy"]["why"]
    assert by["to_zarr"]["verdict"] == "met"
    assert by["to_dask"]["verdict"] == "MISSED"
    assert by["random_random"]["why"] == "row not run"
    by4 = {line["op"]: line for line in s["four_ranks"]}
    assert by4["to_zarr"]["verdict"] == "met"  # 2.5x the 1-rank rate
    assert by4["random"]["verdict"] == "MISSED"  # slower than 1 rank
    assert by4["from_zarr"]["verdict"] == "missing"


def test_door_summary_cpu_median_of_rounds(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from tool_module import load_tool

    ds = load_tool("door_summary")
    rounds = []
    for k, ours in enumerate((1.0, 1.4, 3.0)):  # time ours / dask 1.0, 1.4, 3.0: median 1.4
        payload = {
            "environment": {"command": f"round {k}"},
            "results": [_door_result("to_zarr", ours, {"dask.array": 1.0})],
        }
        path = tmp_path / f"r{k}.json"
        path.write_text(json.dumps(payload))
        rounds.append(str(path))
    s = ds.cpu_summary({1: [ds.load(p) for p in rounds], 2: [ds.load(rounds[0])]})
    line = next(x for x in s["1_rank"] if x["op"] == "to_zarr" and x["reference"] == "dask.array")
    assert line["rounds"] == [1.0, 1.4, 3.0] and line["time_ratio"] == pytest.approx(1.4)
    assert line["bound"] == 1.0 and line["verdict"] == "MISSED"
    line2 = next(x for x in s["2_ranks"] if x["op"] == "to_zarr" and x["reference"] == "dask.array")
    assert line2["bound"] == 0.8 and line2["verdict"] == "MISSED"  # 1.0 > 0.8
    merged = tmp_path / "m.json"
    assert ds.main(["merge", str(merged), *rounds]) == 0
    assert len(json.loads(merged.read_text())["results"]) == 3
    assert ds.main(["cpu", "--one", *rounds]) == 0
    assert "to_zarr" in capsys.readouterr().out


DOOR_ROWS = (
    "random,random_uniform,random_random,from_numpy,to_numpy,to_numpy_root,"
    "to_zarr,from_zarr,to_dask"
)


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs", [1, 2])
def test_door_rows_check_profile_and_peers(tmp_path: Path, nprocs: int) -> None:
    from blasmp_array.bench.door_peers import PEERS

    out = tmp_path / "door.json"
    stores = tmp_path / "stores"
    stores.mkdir()
    proc = run_bench(
        [
            DOOR_ROWS,
            "--m",
            "37",
            "--n",
            "29",
            "--block",
            "8x5",
            "--check",
            "--profile",
            "--compare",
            "--baselines",
            "numpy,dask,zarr,cupy",
            "--repeat",
            "2",
            "--dir",
            str(stores),
            "--json",
            str(out),
        ],
        nprocs=nprocs,
    )
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-5000:]
    assert "ratio" in proc.stdout and "GB/s" in proc.stdout
    results = json.loads(out.read_text())["results"]
    assert [r["op"] for r in results] == DOOR_ROWS.split(",")
    for r in results:
        assert r["check"]["passed"] is True, r
        assert r["data_op"] and r["bytes"] == 37 * 29 * 8
        prof = r["profile"]
        assert prof["gbytes_per_s"] == pytest.approx(r["bytes"] / prof["median_s"] / 1e9)
        libs = {b["library"]: b for b in r["compare"]}
        expected = {{"dask": "dask.array"}.get(lib, lib) for lib in PEERS[r["op"]]}
        if r["op"] == "to_dask":
            expected.add("blasmp_array to_numpy()")
        assert set(libs) == expected, r["compare"]
        for lib, b in libs.items():
            if lib == "cupy" and b["median_s"] is None:  # no GPU here: skipped, with the reason
                assert "skipped" in b["note"]
                continue
            assert b["median_s"] > 0 and b["gbytes_per_s"] > 0, b
    zarr_rows = {r["op"]: r for r in results if r["op"] in ("to_zarr", "from_zarr")}
    for r in zarr_rows.values():
        assert any("store written by A.to_zarr: zarr format" in n for n in r["notes"]), r
    assert list(stores.iterdir()) == []  # the stores and their directory are gone


@pytest.mark.mpi
def test_door_dir_that_cannot_be_made_is_refused(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    proc = run_bench(["to_zarr", "--n", "8", "--dir", str(not_a_dir)])
    assert proc.returncode != 0
    assert "cannot make the directory of the zarr stores" in proc.stdout + proc.stderr
