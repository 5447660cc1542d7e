"""tools/perf_tables.py: the tables of docs/performance.md are what the bench records give."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tool_module import load_tool

perf_tables = load_tool("perf_tables")


def test_committed_page_is_regenerated_from_its_records() -> None:
    """The committed page equals what the manifest and its records give: run
    ``python tools/perf_tables.py`` after changing either."""
    page = perf_tables.PAGE.read_text()
    rows = perf_tables.current_rows(perf_tables.load_manifest())
    assert perf_tables.render_page(page, rows) == page
    assert perf_tables.main(["--check"]) == 0


def test_every_row_has_command_commit_and_date() -> None:
    for rows in perf_tables.current_rows(perf_tables.load_manifest()).values():
        assert rows
        for row in rows:
            assert "blasmp_array.bench" in row.command
            assert len(row.commit) >= 7
            assert len(row.date) == 10


def _result(op: str, median: float, compare: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "op": op,
        "dtype": "float64",
        "m": 512,
        "n": 512,
        "k": 512,
        "block": [64, 64],
        "grid": [2, 2],
        "ranks": 4,
        "side": "left",
        "lower": True,
        "trans": "N",
        "data_op": False,
        "profile": {
            "median_s": median,
            "min_s": median * 0.9,
            "max_s": median * 1.2,
            "repeat": 5,
        },
        "compare": compare or [],
    }


def _record(results: list[dict[str, Any]], ranks: int = 4, **env: Any) -> dict[str, Any]:
    environment = {
        "command": "python -m blasmp_array.bench gemm --n 512 --json /tmp/x.json --quiet",
        "ranks": ranks,
        "env": {"OMP_NUM_THREADS": "1"},
        **env,
    }
    return {"schema": 1, "environment": environment, "results": results}


PAGE = "intro\n<!-- perf-table:t -->\nold\n<!-- /perf-table -->\nafter\n"


def _setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, records: dict[str, Any]) -> None:
    for name, record in records.items():
        (tmp_path / name).write_text(json.dumps(record))
    monkeypatch.setattr(perf_tables, "MEASUREMENTS", tmp_path)


def _manifest(*entries: dict[str, Any]) -> dict[str, Any]:
    launcher = {"one": "{env} python", "many": "{env} mpiexec -n {ranks} python"}
    return {"table": {"t": {"title": "T", "launcher": launcher}}, "record": list(entries)}


def test_record_without_peer_gives_a_row_without_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _setup(tmp_path, monkeypatch, {"a.json": _record([_result("gemm", 0.5)])})
    manifest = _manifest(
        {"table": "t", "path": "a.json", "commit": "abcdef1", "date": "2026-01-02"}
    )
    rows = perf_tables.current_rows(manifest)
    page = perf_tables.render_page(PAGE, rows)
    (line,) = [x for x in page.splitlines() if x.startswith("| `bm.linalg.gemm")]
    assert "none measured" in line
    assert "| 0.5 [0.45, 0.6] |" in line
    # the recorded command, without its output flags, behind the table's launcher
    assert "`OMP_NUM_THREADS=1 mpiexec -n 4 python -m blasmp_array.bench gemm --n 512`" in line
    assert "`abcdef1`, 2026-01-02" in line
    assert page.startswith("intro\n") and page.endswith("<!-- /perf-table -->\nafter\n")
    assert "old" not in page


def test_peer_from_another_run_is_marked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cupy = {"library": "cupy", "median_s": 0.6, "min_s": 0.6, "max_s": 0.7, "note": "one GPU"}
    one = _result("gemm", 0.55, [cupy])
    one["ranks"], one["grid"] = 1, [1, 1]
    _setup(
        tmp_path,
        monkeypatch,
        {"four.json": _record([_result("gemm", 0.5)]), "one.json": _record([one], ranks=1)},
    )
    manifest = _manifest(
        {
            "table": "t",
            "path": "four.json",
            "commit": "abcdef1",
            "date": "2026-01-02",
            "peer_from": "one.json",
        }
    )
    (row,) = perf_tables.current_rows(manifest)["t"]
    assert row.peer is not None and row.peer.other_run is not None
    assert row.peer.speed == pytest.approx(0.6 / 0.5)
    line = perf_tables.render_table([row]).splitlines()[-1]
    assert "not the same run: 1 rank, `one.json`" in line
    assert "**1.20x**" in line


def test_same_run_peers_and_repeated_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def run(ours: float, theirs: float) -> dict[str, Any]:
        numpy = {"library": "numpy/scipy", "median_s": theirs, "min_s": theirs, "max_s": theirs}
        numpy["threads"] = 2
        skipped = {"library": "cupy", "note": "not installed; skipped"}
        return _record([_result("gemm", ours, [numpy, skipped])])

    _setup(
        tmp_path,
        monkeypatch,
        {"r1.json": run(1.0, 2.0), "r2.json": run(1.0, 1.0), "r3.json": run(2.0, 3.0)},
    )
    paths = ["r1.json", "r2.json", "r3.json"]
    manifest = _manifest({"table": "t", "path": paths, "commit": "abcdef1", "date": "2026-01-02"})
    (row,) = perf_tables.current_rows(manifest)["t"]  # the skipped peer gives no row
    assert row.ours.median == 1.0 and row.ours.runs == 3
    assert row.peer.library == "numpy/scipy"
    assert row.peer.speed == pytest.approx(1.5)  # the median of 2.0, 1.0 and 1.5
    assert row.peer.speed_range == (1.0, 2.0)
    line = perf_tables.render_table([row]).splitlines()[-1]
    assert "NumPy `a @ b` (2 threads)" in line
    assert "1 (3 runs: 1-2)" in line
    assert "**1.50x** (1.00-2.00)" in line


def test_newer_record_replaces_the_older_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _setup(
        tmp_path,
        monkeypatch,
        {
            "old.json": _record([_result("gemm", 0.9), _result("lu", 2.0)]),
            "new.json": _record([_result("gemm", 0.4)]),
        },
    )
    manifest = _manifest(
        {"table": "t", "path": "old.json", "commit": "aaaaaaa", "date": "2026-01-01"},
        {"table": "t", "path": "new.json", "commit": "bbbbbbb", "date": "2026-01-03"},
    )
    rows = perf_tables.current_rows(manifest)["t"]
    assert [(r.op, r.commit) for r in rows] == [("gemm", "bbbbbbb"), ("lu", "aaaaaaa")]
    assert rows[0].ours.median == 0.4


def test_record_carries_its_own_commit_and_date(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = _record([_result("gemm", 0.5)], commit="1234567", date="2026-02-03T10:00:00")
    _setup(tmp_path, monkeypatch, {"a.json": record})
    (row,) = perf_tables.current_rows(_manifest({"table": "t", "path": "a.json"}))["t"]
    assert (row.commit, row.date) == ("1234567", "2026-02-03")


def test_missing_provenance_and_markers_are_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _setup(tmp_path, monkeypatch, {"a.json": _record([_result("gemm", 0.5)])})
    with pytest.raises(perf_tables.ManifestError, match="no commit"):
        perf_tables.current_rows(_manifest({"table": "t", "path": "a.json", "date": "2026-01-02"}))
    with pytest.raises(perf_tables.ManifestError, match="unknown table"):
        perf_tables.current_rows(_manifest({"table": "x", "path": "a.json"}))
    with pytest.raises(perf_tables.ManifestError, match="does not exist"):
        perf_tables.current_rows(_manifest({"table": "t", "path": "nothing.json"}))
    manifest = _manifest(
        {"table": "t", "path": "a.json", "commit": "abcdef1", "date": "2026-01-02"}
    )
    rows = perf_tables.current_rows(manifest)
    with pytest.raises(perf_tables.ManifestError, match="no marker"):
        perf_tables.render_page("no markers here\n", rows)
