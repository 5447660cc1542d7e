"""Write the tables of docs/performance.md from the bench JSON records named in a manifest.

Usage::

    python tools/perf_tables.py                # rewrite the tables in docs/performance.md
    python tools/perf_tables.py --check        # exit 1 if the page differs from its data
    python tools/perf_tables.py --plots        # also redraw the figures (needs matplotlib)

The manifest (``docs/_measurements/manifest.toml``) names the records that feed the page: one
``[[record]]`` entry per JSON file written by ``python -m blasmp_array.bench ... --json FILE``
(or a list of files: repeated runs of one command, reported as the median of the runs), with
the table it belongs to and, where the record does not carry them, the commit and the date of
the measurement. Every measured configuration of a record becomes a row, one per comparison
library measured in the same run; a configuration measured again in a later record (same
operation, dtype, shape, ranks, grid and block) replaces the earlier row, so adding a newer
measurement is one manifest entry.

Each table of the page sits between ``<!-- perf-table:ID -->`` and ``<!-- /perf-table -->``;
the text around the markers is left alone. ``tests/test_perf_tables.py`` checks that
regenerating the page gives the committed file, so the page cannot drift from its data.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import statistics
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "performance.md"
MEASUREMENTS = ROOT / "docs" / "_measurements"
MANIFEST = MEASUREMENTS / "manifest.toml"
STATIC = ROOT / "docs" / "_static"

#: the public call each bench operation measures, in the order rows are listed
CALLS: dict[str, str] = {
    # BLAS3 through the NumPy face, then the PBLAS-style calls
    "matmul": "`A @ B`",
    "matmul_ata": "`A.T @ A`",
    "solve_triangular": "`solve_triangular(T, B, lower=True)`",
    "gemm": "`bm.linalg.gemm(A, B)`",
    "symm": "`bm.linalg.symm(S, B)`",
    "syrk": "`bm.linalg.syrk(A)`",
    "syr2k": "`bm.linalg.syr2k(A, B)`",
    "trmm": "`bm.linalg.trmm(T, B)`",
    "trsm": "`bm.linalg.trsm(T, B)`",
    # factorizations and solves
    "cholesky": "`bm.linalg.cholesky(A, lower=True)`",
    "lu": "`bm.linalg.lu_factor(A)`",
    "solve": "`np.linalg.solve(A, B)`",
    "inv": "`np.linalg.inv(A)`",
    "qr": "`np.linalg.qr(A)`",
    "qr_tall": "`np.linalg.qr(A)` (tall-skinny)",
    "lstsq": "`bm.linalg.lstsq(A, b)`",
    "eigh": "`np.linalg.eigh(A)`",
    "eigvalsh": "`np.linalg.eigvalsh(A)`",
    "svd": "`np.linalg.svd(A)`",
    "svd_polar": "`bm.linalg.svd(A, method='polar')`",
    # windows and reductions
    "matmul_view": "`A[1:, 1:] @ B[1:, 1:]`",
    "matmul_view_copy": "`A[1:, 1:].copy() @ B[1:, 1:].copy()`",
    "sum_axis0": "`np.sum(A, axis=0)`",
    # the door: construction, NumPy, zarr and Dask in and out
    "random": "`bm.random.standard_normal(...)`",
    "random_uniform": "`bm.random.uniform(...)`",
    "random_random": "`bm.random.random(...)`",
    "from_numpy": "`bm.from_numpy(a)`",
    "to_numpy": "`A.to_numpy()`",
    "to_numpy_root": "`A.to_numpy(root=0)`",
    "to_zarr": "`A.to_zarr(path)`",
    "from_zarr": "`bm.from_zarr(path)`",
    "to_dask": "`A.to_dask().compute()`",
    # layouts
    "transpose": "`A.T.resolve()`",
    "redistribute": "`A.redistribute(block=...)`",
}

#: what each comparison library ran for an operation (the bench's ``--compare``)
PEER_CALLS: dict[tuple[str, str], str] = {
    ("cupy", "matmul"): "CuPy `a @ b`",
    ("cupy", "gemm"): "CuPy `a @ b`",
    ("cupy", "matmul_ata"): "CuPy `a.T @ a`",
    ("cupy", "solve_triangular"): "cupyx `solve_triangular`",
    ("cupy", "trsm"): "cupyx `solve_triangular`",
    ("cupy", "trmm"): "CuPy `tril(t) @ b`",
    ("cupy", "syr2k"): "CuPy `a @ b.T + b @ a.T`",
    ("cupy", "symm"): "CuPy `s @ b`",
    ("cupy", "cholesky"): "`cupy.linalg.cholesky`",
    ("cupy", "lu"): "cupyx `lu_factor`",
    ("cupy", "matmul_view"): "CuPy `a[1:, 1:] @ b[1:, 1:]`",
    ("cupy", "sum_axis0"): "CuPy `a.sum(axis=0)`",
    ("cupy", "transpose"): "CuPy `ascontiguousarray(a.T)`",
    ("numpy/scipy", "transpose"): "NumPy `ascontiguousarray(a.T)`",
    ("numpy/scipy", "matmul"): "NumPy `a @ b`",
    ("numpy/scipy", "gemm"): "NumPy `a @ b`",
    ("numpy/scipy", "matmul_ata"): "NumPy `a.T @ a`",
    ("numpy/scipy", "solve_triangular"): "SciPy `solve_triangular`",
    ("numpy/scipy", "syrk"): "SciPy `dsyrk`",
    ("numpy/scipy", "trsm"): "SciPy `dtrsm`",
    ("numpy/scipy", "cholesky"): "SciPy `cholesky`",
    ("numpy/scipy", "lu"): "SciPy `lu_factor`",
    ("numpy/scipy", "matmul_view"): "NumPy `a[1:, 1:] @ b[1:, 1:]`",
    ("numpy/scipy", "sum_axis0"): "NumPy `a.sum(axis=0)`",
    ("scalapack (PBLAS)", "gemm"): "ScaLAPACK `pdgemm`",
    ("scalapack (PBLAS)", "trsm"): "ScaLAPACK `pdtrsm`",
    ("scalapack (PBLAS)", "cholesky"): "ScaLAPACK `pdpotrf`",
    ("scalapack (PBLAS)", "lu"): "ScaLAPACK `pdgetrf`",
    ("scalapack (PBLAS)", "eigh"): "ScaLAPACK `pdsyevd`",
    ("scalapack (PBLAS)", "eigvalsh"): "ScaLAPACK `pdsyev` (values only)",
    ("scalapack (PBLAS)", "svd"): "ScaLAPACK `pdgesvd`",
    ("scalapack (PBLAS)", "qr"): "ScaLAPACK `pdgeqrf` + `pdorgqr`",
    ("scalapack (PBLAS)", "qr_tall"): "ScaLAPACK `pdgeqrf` + `pdorgqr`",
    ("scalapack (PBLAS)", "lstsq"): "ScaLAPACK `pdgels`",
    ("cublasmp", "gemm"): "cuBLASMp `cublasMpGemm`",
    ("cublasmp", "trsm"): "cuBLASMp `cublasMpTrsm`",
    ("cusolvermp", "cholesky"): "cuSOLVERMp `cusolverMpPotrf`",
    ("cusolvermp", "lu"): "cuSOLVERMp `cusolverMpGetrf`",
    ("heat", "gemm"): "Heat `matmul`",
    ("heat", "trsm"): "Heat `solve_triangular`",
    ("dask.array", "gemm"): "Dask `a @ b`",
    ("dask.array", "matmul"): "Dask `a @ b`",
    ("dask.array", "trsm"): "Dask `solve_triangular`",
}

#: bench flags that name output files: left out of the command shown on the page
OUTPUT_FLAGS = ("--json", "--csv", "--plot", "--trace")
#: bench flags without a value that do not change what is measured
QUIET_FLAGS = ("--quiet",)

HEADER = (
    "| call | n | ranks (grid) | block | ours: s | peer (same run) | peer: s | speed | "
    "command | commit, date |"
)
RULE = "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"


class ManifestError(ValueError):
    """The manifest or a record it names is incomplete; the message says what to add."""


@dataclass
class Timing:
    """A median time over one or several runs (the median of the runs' medians)."""

    median: float
    low: float  # one run: the fastest call; several runs: the smallest run median
    high: float
    runs: int
    calls: int | None = None  # timed calls per run


@dataclass
class Peer:
    label: str
    library: str
    timing: Timing
    speed: float  # peer time / our time, the median over the runs of each run's ratio
    speed_range: tuple[float, float]
    other_run: str | None = None  # where the peer was measured, when not in the same run


@dataclass
class Row:
    table: str
    op: str
    key: tuple[Any, ...]
    date: str
    order: int  # manifest position (later entries win on equal dates)
    call: str
    size: str
    ranks: str
    block: str
    ours: Timing
    gbytes_per_s: float | None
    peer: Peer | None
    command: str = ""
    commit: str = ""
    note: str = ""


def load_manifest(path: Path = MANIFEST) -> dict[str, Any]:
    with open(path, "rb") as f:
        manifest = tomllib.load(f)
    if "table" not in manifest or "record" not in manifest:
        raise ManifestError(f"{path}: needs [table.ID] sections and [[record]] entries")
    return manifest


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ManifestError(f"record {path} does not exist") from None
    if not isinstance(data, dict) or "results" not in data:
        raise ManifestError(f"{path} is not a bench JSON record (no 'results')")
    return data


def _config_key(result: dict[str, Any]) -> tuple[Any, ...]:
    return (
        result["op"],
        result["dtype"],
        result["m"],
        result["n"],
        result["k"],
        result.get("ranks"),
        tuple(result["grid"]),
        tuple(result["block"]),
        result.get("side"),
        result.get("lower"),
        result.get("trans"),
    )


def _timing(profiles: list[dict[str, Any]]) -> Timing:
    medians = [p["median_s"] for p in profiles]
    if len(profiles) == 1:
        p = profiles[0]
        calls = p.get("repeat") or len(p.get("times_s") or []) or None
        return Timing(p["median_s"], p["min_s"], p["max_s"], 1, calls)
    return Timing(statistics.median(medians), min(medians), max(medians), len(profiles))


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _peer_label(library: str, op: str, entry: dict[str, Any]) -> str:
    label = PEER_CALLS.get((library, op), library)
    ranks, threads = entry.get("ranks"), entry.get("threads")
    if ranks and threads:
        label += f" ({ranks} ranks x {_plural(threads, 'thread')})"
    elif ranks and ranks > 1:
        label += f" ({ranks} ranks)"
    elif threads:
        label += f" ({_plural(threads, 'thread')})"
    return label


#: the order of a row's peers: the single-process library a user would call first
PEER_ORDER = (
    "numpy/scipy",
    "cupy",
    "dask.array",
    "scalapack (PBLAS)",
    "heat",
    "cublasmp",
    "cusolvermp",
)


def _command(record: dict[str, Any], entry: dict[str, Any], table: dict[str, Any]) -> str:
    """The command of a record: the manifest's ``command``, else the bench command recorded in
    the JSON (without its output files) behind the table's launcher."""
    if entry.get("command"):
        return str(entry["command"])
    env = record.get("environment") or {}
    recorded = env.get("command")
    if not recorded:
        raise ManifestError(
            f"record {entry['path']} carries no command: give `command = ...` in the manifest"
        )
    words = shlex.split(recorded)
    kept: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word in OUTPUT_FLAGS:
            skip = True
            continue
        if word.split("=", 1)[0] in OUTPUT_FLAGS or word in QUIET_FLAGS:
            continue
        kept.append(word)
    if kept[:2] != ["python", "-m"]:
        return shlex.join(kept)
    ranks = env.get("ranks", 1)
    launcher = entry.get("launcher") or table.get("launcher", {}).get(
        "many" if ranks > 1 else "one", "python"
    )
    variables = " ".join(f"{k}={v}" for k, v in sorted((env.get("env") or {}).items()))
    prefix = launcher.format(ranks=ranks, env=variables).strip()
    return " ".join([prefix, *(shlex.quote(w) for w in kept[1:])])


def _provenance(record: dict[str, Any], entry: dict[str, Any], name: str) -> str:
    """The record's own commit or date where it carries one, else the manifest's."""
    env = record.get("environment") or {}
    for source in (env, record):
        value = source.get(name)
        if value:
            return str(value)[:10] if name == "date" else str(value)
    if entry.get(name):
        return str(entry[name])
    raise ManifestError(
        f"record {entry['path']} has no {name}: give `{name} = ...` in the manifest"
    )


def _size(r: dict[str, Any]) -> str:
    if r["m"] == r["n"] == r["k"]:
        return str(r["n"])
    return f"{r['m']} x {r['n']} x {r['k']}"


def _ranks(r: dict[str, Any]) -> str:
    return f"{r.get('ranks', r['grid'][0] * r['grid'][1])} ({r['grid'][0]}x{r['grid'][1]})"


def rows_of(entry: dict[str, Any], order: int, tables: dict[str, Any]) -> list[Row]:
    """The rows one manifest entry contributes: per selected configuration of its record, one
    row per comparison library measured in the same run (one row without a peer if none)."""
    table_id = entry.get("table")
    if table_id not in tables:
        raise ManifestError(f"record {entry.get('path')}: unknown table {table_id!r}")
    paths = entry["path"] if isinstance(entry["path"], list) else [entry["path"]]
    records = [_read(MEASUREMENTS / p) for p in paths]
    entry = {**entry, "path": paths[0]}
    ops = entry.get("ops")
    wanted_peers = entry.get("peers")
    commit = _provenance(records[0], entry, "commit")
    date = _provenance(records[0], entry, "date")
    command = _command(records[0], entry, tables[table_id])
    other = _read(MEASUREMENTS / entry["peer_from"]) if entry.get("peer_from") else None
    rows = []
    for index, first in enumerate(records[0]["results"]):
        if ops is not None and first["op"] not in ops:
            continue
        results = [rec["results"][index] for rec in records]
        if any(_config_key(r) != _config_key(first) for r in results):
            raise ManifestError(f"the runs of {paths} do not measure the same configurations")
        profiles = [r.get("profile") or {} for r in results]
        if not all(p.get("median_s") for p in profiles):
            continue  # a record without timings (a --check run) gives no row
        ours = _timing(profiles)
        peers: list[Peer] = []
        for lib in [c["library"] for c in first.get("compare") or [] if c.get("median_s")]:
            if wanted_peers is not None and lib not in wanted_peers:
                continue
            entries = [
                next(c for c in r.get("compare") or [] if c["library"] == lib) for r in results
            ]
            if not all(c.get("median_s") for c in entries):
                continue
            speeds = [c["median_s"] / p["median_s"] for c, p in zip(entries, profiles, strict=True)]
            peers.append(
                Peer(
                    label=_peer_label(lib, first["op"], entries[0]),
                    library=lib,
                    timing=_timing(entries),
                    speed=statistics.median(speeds),
                    speed_range=(min(speeds), max(speeds)),
                )
            )
        if not peers and other is not None:
            peers = _peers_from(other, first, ours, entry)
        gbytes = (first.get("profile") or {}).get("gbytes_per_s") if len(records) == 1 else None
        for peer in peers or [None]:
            rows.append(
                Row(
                    table=table_id,
                    op=first["op"],
                    key=_config_key(first),
                    date=date,
                    order=order,
                    call=CALLS.get(first["op"], f"`{first['op']}`")
                    + ("" if first["dtype"] == "float64" else f", {first['dtype']}"),
                    size=_size(first),
                    ranks=_ranks(first),
                    block=_block(first),
                    ours=ours,
                    gbytes_per_s=gbytes if first.get("data_op") else None,
                    peer=peer,
                    command=command,
                    commit=commit,
                    note=entry.get("note", ""),
                )
            )
    if not rows:
        raise ManifestError(f"record {paths} gave no timed rows (check `ops`)")
    return rows


def _block(r: dict[str, Any]) -> str:
    mb, nb = r["block"]
    return str(mb) if mb == nb else f"{mb}x{nb}"


def _peers_from(
    other: dict[str, Any], result: dict[str, Any], ours: Timing, entry: dict[str, Any]
) -> list[Peer]:
    """Peers of the same operation and size measured in another run (e.g. CuPy on one rank
    beside a 4-rank row), marked as such."""
    peers = []
    for r in other["results"]:
        if (r["op"], r["dtype"], r["m"], r["n"], r["k"]) != (
            result["op"],
            result["dtype"],
            result["m"],
            result["n"],
            result["k"],
        ):
            continue
        for c in r.get("compare") or []:
            if not c.get("median_s"):
                continue
            speed = c["median_s"] / ours.median
            peers.append(
                Peer(
                    label=_peer_label(c["library"], r["op"], c),
                    library=c["library"],
                    timing=_timing([c]),
                    speed=speed,
                    speed_range=(speed, speed),
                    other_run=f"{_plural(r.get('ranks', 1), 'rank')}, `{entry['peer_from']}`",
                )
            )
    return peers


def current_rows(manifest: dict[str, Any]) -> dict[str, list[Row]]:
    """Per table, the current rows in the order of ``CALLS``.

    A row is one configuration (operation, dtype, shape, ranks, grid, block) against one peer;
    of the rows with the same configuration and peer, the newest record's wins (by date, then
    by manifest order). A row without a peer is kept only where its configuration has no row
    with one.
    """
    newest: dict[tuple[str, tuple[Any, ...], str | None], Row] = {}
    for order, entry in enumerate(manifest["record"]):
        for row in rows_of(entry, order, manifest["table"]):
            key = (row.table, row.key, row.peer.library if row.peer else None)
            if key not in newest or (row.date, row.order) >= (newest[key].date, newest[key].order):
                newest[key] = row
    with_peer = {(t, k) for (t, k, lib) in newest if lib is not None}
    ops = list(CALLS)
    by_table: dict[str, list[Row]] = {t: [] for t in manifest["table"]}
    for (table, key, lib), row in newest.items():
        if lib is None and (table, key) in with_peer:
            continue
        by_table[table].append(row)
    for rows in by_table.values():
        rows.sort(
            key=lambda r: (
                ops.index(r.op) if r.op in ops else len(ops),
                r.op,
                r.key[3],  # n
                r.key[5] or 0,  # ranks
                r.key[6],  # grid
                r.key[7],  # block
                r.peer is not None and r.peer.other_run is not None,
                _peer_rank(r.peer),
            )
        )
    return by_table


def _peer_rank(peer: Peer | None) -> tuple[int, str]:
    if peer is None:
        return (len(PEER_ORDER) + 1, "")
    lib = peer.library
    return (PEER_ORDER.index(lib) if lib in PEER_ORDER else len(PEER_ORDER), lib)


def _seconds(x: float) -> str:
    return f"{x:.3g}"


def _fmt_timing(t: Timing) -> str:
    if t.runs == 1:
        return f"{_seconds(t.median)} [{_seconds(t.low)}, {_seconds(t.high)}]"
    return f"{_seconds(t.median)} ({t.runs} runs: {_seconds(t.low)}-{_seconds(t.high)})"


def _fmt_speed(p: Peer) -> str:
    text = f"**{p.speed:.2f}x**"
    lo, hi = p.speed_range
    if hi - lo >= 0.005:
        text += f" ({lo:.2f}-{hi:.2f})"
    return text


def render_table(rows: list[Row]) -> str:
    lines = [HEADER, RULE]
    for row in rows:
        ours = _fmt_timing(row.ours)
        if row.gbytes_per_s:
            ours += f", {row.gbytes_per_s:.0f} GB/s"
        call = row.call + (f" ({row.note})" if row.note else "")
        if row.peer is None:
            peer_cells = ["none measured", "", ""]
        else:
            label = row.peer.label
            if row.peer.other_run:
                label += f"; not the same run: {row.peer.other_run}"
            peer_cells = [label, _fmt_timing(row.peer.timing), _fmt_speed(row.peer)]
        cells = [
            call,
            row.size,
            row.ranks,
            row.block,
            ours,
            *peer_cells,
            f"`{row.command}`",
            f"`{row.commit}`, {row.date}",
        ]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


MARKER = re.compile(
    r"(<!-- perf-table:(?P<id>[A-Za-z0-9_-]+) -->\n)(?P<body>.*?)(<!-- /perf-table -->)",
    re.DOTALL,
)


def render_page(text: str, by_table: dict[str, list[Row]]) -> str:
    """The page with every marked table replaced; unknown or missing markers are errors."""
    found = set()

    def replace(match: re.Match[str]) -> str:
        table_id = match.group("id")
        if table_id not in by_table:
            raise ManifestError(f"performance.md has a marker for unknown table {table_id!r}")
        found.add(table_id)
        return f"{match.group(1)}{render_table(by_table[table_id])}\n{match.group(4)}"

    page = MARKER.sub(replace, text)
    missing = set(by_table) - found
    if missing:
        raise ManifestError(f"performance.md has no marker for table(s) {sorted(missing)}")
    return page


def _short(op: str) -> str:
    """``cholesky`` for ``bm.linalg.cholesky(A, lower=True)``: a figure's label."""
    return re.sub(r"\(.*\)$", "", CALLS.get(op, op).strip("`")).replace("bm.linalg.", "")


def plot(
    by_table: dict[str, list[Row]], manifest: dict[str, Any], out: Path = STATIC
) -> list[Path]:
    """Per table, where the rows allow it: the speed against each peer over n on one process,
    and the time of a call on 1 and on 4 ranks beside its 1-rank peer."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    order = list(CALLS)
    written = []
    for table_id, rows in by_table.items():
        title = manifest["table"][table_id]["title"]
        series: dict[tuple[int, str, str], list[tuple[int, float]]] = {}
        for r in rows:
            if r.key[5] == 1 and r.peer is not None and r.peer.other_run is None:
                rank = order.index(r.op) if r.op in order else len(order)
                label = f"{_short(r.op)} vs {r.peer.label}"
                series.setdefault((rank, r.op, label), []).append((r.key[3], r.peer.speed))
        series = {k: sorted(v) for k, v in series.items() if len({n for n, _ in v}) > 1}
        if series:
            fig, ax = plt.subplots(figsize=(10, 4.8))
            colors = plt.get_cmap("tab20").colors
            markers = "osD^vP*Xhp<>"
            for i, ((_, _, label), points) in enumerate(sorted(series.items())):
                ax.plot(
                    [n for n, _ in points],
                    [s for _, s in points],
                    marker=markers[i % len(markers)],
                    color=colors[i % len(colors)],
                    label=label,
                )
            ax.axhline(1.0, color="grey", lw=0.8, ls="--")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("n (square float64 matrices)")
            ax.set_ylabel("speed: peer's time / our time")
            ax.set_title(f"{title}: one process against its peer, same run")
            ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
            fig.tight_layout()
            path = out / f"perf_{table_id}_speed_vs_n.png"
            fig.savefig(path, dpi=110)
            plt.close(fig)
            written.append(path)
        newest: dict[tuple[str, int, int], Row] = {}
        for r in rows:
            key = (r.op, r.key[3], r.key[5])
            if key not in newest or (r.date, r.order) > (newest[key].date, newest[key].order):
                newest[key] = r
        pairs = sorted(
            {(op, n) for (op, n, ranks) in newest if ranks == 4 and (op, n, 1) in newest},
            key=lambda k: (order.index(k[0]) if k[0] in order else len(order), k),
        )
        if pairs:
            one = [newest[(op, n, 1)] for op, n in pairs]
            four = [newest[(op, n, 4)] for op, n in pairs]
            peer = [
                r.peer.timing.median if r.peer and r.peer.other_run is None else 0.0 for r in one
            ]
            xs = list(range(len(pairs)))
            width = 0.27
            fig, ax = plt.subplots(figsize=(9, 4.5))
            ax.bar(
                [x - width for x in xs], [r.ours.median for r in one], width, label="ours, 1 rank"
            )
            ax.bar(xs, [r.ours.median for r in four], width, label="ours, 4 ranks on one GPU")
            ax.bar([x + width for x in xs], peer, width, label="peer, 1 rank (the 1-rank run)")
            ax.set_xticks(xs)
            ax.set_xticklabels([f"{_short(op)}\nn = {n}" for op, n in pairs], fontsize=8)
            ax.set_ylabel("seconds (median)")
            ax.set_title(f"{title}: 1 and 4 ranks")
            ax.legend(fontsize=8)
            fig.tight_layout()
            path = out / f"perf_{table_id}_ranks.png"
            fig.savefig(path, dpi=110)
            plt.close(fig)
            written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is stale")
    parser.add_argument("--plots", action="store_true", help="redraw docs/_static/perf_*.png")
    parser.add_argument("--manifest", type=Path, default=MANIFEST)
    parser.add_argument("--page", type=Path, default=PAGE)
    args = parser.parse_args(argv)
    manifest = load_manifest(args.manifest)
    by_table = current_rows(manifest)
    text = args.page.read_text()
    page = render_page(text, by_table)
    if args.check:
        if page != text:
            print(f"{args.page} is stale: run python tools/perf_tables.py", file=sys.stderr)
            return 1
        return 0
    if page != text:
        args.page.write_text(page)
        print(f"wrote {args.page}")
    if args.plots:
        for path in plot(by_table, manifest):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
