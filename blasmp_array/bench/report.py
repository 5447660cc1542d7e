"""Environment description, tables, and the JSON / CSV / PNG outputs of the bench command."""

from __future__ import annotations

import csv
import io
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["environment", "print_table", "write_json", "write_csv", "plot", "progress"]

#: environment variables that change BLAS behaviour; recorded with every measurement
BLAS_ENV = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "BLASMP_BACKEND",
)


def blas_info() -> list[dict[str, Any]]:
    """The BLAS libraries loaded in this process (threadpoolctl), else NumPy's build config."""
    try:
        from threadpoolctl import threadpool_info

        return [
            {
                k: info.get(k)
                for k in (
                    "user_api",
                    "internal_api",
                    "version",
                    "num_threads",
                    "architecture",
                    "threading_layer",
                    "filepath",
                )
            }
            for info in threadpool_info()
        ]
    except ImportError:
        pass
    try:
        config = np.show_config(mode="dicts")  # type: ignore[func-returns-value]
        deps = (config or {}).get("Build Dependencies", {})
        blas = deps.get("blas", {})
        return [
            {
                "user_api": "blas",
                "internal_api": blas.get("name"),
                "version": blas.get("version"),
                "num_threads": None,
                "note": "from numpy.show_config (threadpoolctl not installed)",
            }
        ]
    except Exception:  # noqa: BLE001 - best effort description
        return [{"note": "BLAS library unknown (no threadpoolctl, numpy.show_config failed)"}]


def blas_summary(info: list[dict[str, Any]]) -> str:
    parts = []
    for i in info:
        if i.get("user_api") not in (None, "blas"):
            continue
        name = i.get("internal_api") or "?"
        ver = i.get("version") or ""
        arch = i.get("architecture")
        threads = i.get("num_threads")
        path = os.path.basename(str(i.get("filepath") or ""))
        text = f"{name} {ver}".strip()
        if arch:
            text += f" ({arch})"
        if threads is not None:
            text += f", {threads} thread(s)"
        if path:
            text += f" [{path}]"
        parts.append(text)
    return "; ".join(parts) or "unknown"


def gpu_name(backend: Any) -> str | None:
    if getattr(backend, "name", "") != "gpu":
        return None
    try:
        import cupy

        dev = cupy.cuda.Device()
        props = cupy.cuda.runtime.getDeviceProperties(dev.id)
        name = props["name"]
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # noqa: BLE001
        return "unknown GPU"


def environment(grid: Any, argv: list[str]) -> dict[str, Any]:
    """What was measured where (rank 0's view, plus the ranks' hosts)."""
    from mpi4py import MPI

    import blasmp_array as bm

    comm = grid.comm
    hosts = comm.allgather(MPI.Get_processor_name())
    info = blas_info()
    chosen = grid.backend.blas_threads  # BLAS threads per rank: backends/_blas_threads.py
    threads = comm.allgather(None if chosen is None else [chosen.threads, chosen.source])
    return {
        "command": "python -m blasmp_array.bench " + " ".join(argv),
        "ranks": grid.size,
        "hosts": sorted(set(hosts)),
        "backend": grid.backend.name,
        "blas": info,
        "blas_summary": blas_summary(info),
        "blas_threads_per_rank": threads,
        "gpu": gpu_name(grid.backend),
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "scipy": _version("scipy"),
        "mpi4py": _version("mpi4py"),
        "mpi_library": MPI.Get_library_version().splitlines()[0].strip(),
        "blasmp_array": bm.__version__,
        "env": {k: os.environ[k] for k in BLAS_ENV if k in os.environ},
    }


def _version(module: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:  # noqa: BLE001
        return None


def _fmt(x: Any, spec: str = ".3g") -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return format(x, spec)
    return str(x)


def _rate_header(results: list[dict[str, Any]]) -> str:
    data = {bool(r.get("data_op")) for r in results}
    if data == {True}:
        return "GB/s"
    return "GFLOP/s | GB/s" if data == {True, False} else "GFLOP/s"


def baseline_rate(r: dict[str, Any], b: dict[str, Any]) -> float | None:
    """A baseline's rate in the unit of its result: GB/s for a data operator, else GFLOP/s."""
    return b.get("gbytes_per_s") if r.get("data_op") else b.get("gflops")


def result_rows(results: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Table header and rows: one row per measured configuration and per baseline. ``ratio``
    is our rate over the baseline's, both of the same run (> 1: we are faster)."""
    header = [
        "op",
        "dtype",
        "m x n x k",
        "grid",
        "block",
        "stages",
        "library",
        "median s",
        "min s",
        "max s",
        _rate_header(results),
        "GFLOP/s/rank",
        "ratio",
        "check / note",
    ]
    rows = []
    for r in results:
        prof = r.get("profile") or {}
        chk = r.get("check")
        check = "-"
        if chk:
            check = (
                f"{'PASS' if chk['passed'] else 'FAIL'} "
                f"{_fmt(chk['error_eps'])} <= {_fmt(chk['bound_eps'])} eps"
            )
        rate = prof.get("gflops_total")
        per_rank = prof.get("gflops_per_rank")
        if r.get("data_op"):
            rate, per_rank = prof.get("gbytes_per_s"), None
        shape = f"{r['m']}x{r['n']}x{r['k']}"
        grid = f"{r['grid'][0]}x{r['grid'][1]}"
        block = f"{r['block'][0]}x{r['block'][1]}"
        rows.append(
            [
                r["op"],
                r["dtype"],
                shape,
                grid,
                block,
                _fmt(r.get("num_stages")),
                "blasmp_array",
                _fmt(prof.get("median_s")),
                _fmt(prof.get("min_s")),
                _fmt(prof.get("max_s")),
                _fmt(rate),
                _fmt(per_rank),
                "",
                check,
            ]
        )
        for b in r.get("compare") or []:
            ratio = ""
            theirs = baseline_rate(r, b)
            if theirs and rate:
                ratio = f"{rate / theirs:.2f}x"
            lib = b["library"] + _workers(b)
            rows.append(
                [
                    "",
                    "",
                    "",
                    "",
                    "",
                    "",
                    lib,
                    _fmt(b.get("median_s")),
                    _fmt(b.get("min_s")),
                    _fmt(b.get("max_s")),
                    _fmt(theirs),
                    "",
                    ratio,
                    _baseline_check(b.get("check")) + (b.get("note") or ""),
                ]
            )
    return header, rows


def _workers(b: dict[str, Any]) -> str:
    """`` (2 ranks x 1 thr)`` for an MPI baseline, `` (2 thr)`` for a single-process one."""
    if b.get("ranks"):
        return f" ({b['ranks']} ranks x {_fmt(b.get('threads'))} thr)"
    return f" ({b['threads']} thr)" if b.get("threads") else ""


def _baseline_check(chk: dict[str, Any] | None) -> str:
    if not chk:
        return ""
    text = (
        f"{'PASS' if chk['passed'] else 'FAIL'} {_fmt(chk['error_eps'])} <= "
        f"{_fmt(chk['bound_eps'])} eps"
    )
    if "vs_blasmp_eps" in chk:
        text += (
            f", vs blasmp_array {_fmt(chk['vs_blasmp_eps'])} <= "
            f"{_fmt(chk['vs_blasmp_bound_eps'])} eps"
        )
    return text + "; "


def print_table(results: list[dict[str, Any]], env: dict[str, Any], title: str) -> None:
    """Print the results on this rank (call on rank 0 only); rich if installed, else plain."""
    header, rows = result_rows(results)
    lines = [
        f"{env['ranks']} rank(s) on {', '.join(env['hosts'])}; backend {env['backend']}"
        + (f" ({env['gpu']})" if env.get("gpu") else ""),
        f"BLAS: {env['blas_summary']}",
    ]
    if env.get("blas_threads_per_rank"):
        per = {tuple(t) if t else ("?", "?") for t in env["blas_threads_per_rank"]}
        lines.append("BLAS threads per rank: " + ", ".join(f"{k} ({src})" for k, src in per))
    if env.get("env"):
        lines.append("env: " + " ".join(f"{k}={v}" for k, v in env["env"].items()))
    try:
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table
    except ImportError:
        print(title)
        for line in lines:
            print(line)
        widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=False)]
        print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=False)))
        for row in rows:
            print("  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=False)))
        sys.stdout.flush()
        return
    # escaped: notes and library paths contain "[...]", which rich reads as markup
    table = Table(title=escape(title), caption=escape("\n".join(lines)))
    for h in header:
        table.add_column(escape(h), overflow="fold")
    for row in rows:
        table.add_row(*(escape(str(x)) for x in row))
    Console(width=max(160, 100)).print(table)


def write_json(path: str, payload: dict[str, Any]) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        json.dump(payload, f, indent=2, default=_json_default)


def _json_default(x: Any) -> Any:
    if isinstance(x, np.generic):
        return x.item()
    return str(x)


CSV_FIELDS = [
    "op",
    "dtype",
    "m",
    "n",
    "k",
    "grid",
    "block",
    "num_stages",
    "ranks",
    "backend",
    "library",
    "threads",
    "median_s",
    "min_s",
    "max_s",
    "gflops",
    "gflops_per_rank",
    "gbytes_per_s",
    "check_error_eps",
    "check_bound_eps",
    "check_passed",
    "note",
]


def write_csv(path: str, results: list[dict[str, Any]]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS)
    w.writeheader()
    for r in results:
        prof = r.get("profile") or {}
        chk = r.get("check") or {}
        base = {
            "op": r["op"],
            "dtype": r["dtype"],
            "m": r["m"],
            "n": r["n"],
            "k": r["k"],
            "grid": f"{r['grid'][0]}x{r['grid'][1]}",
            "block": f"{r['block'][0]}x{r['block'][1]}",
            "num_stages": r.get("num_stages"),
            "ranks": r["ranks"],
            "backend": r["backend"],
        }
        w.writerow(
            {
                **base,
                "library": "blasmp_array",
                "median_s": prof.get("median_s"),
                "min_s": prof.get("min_s"),
                "max_s": prof.get("max_s"),
                "gflops": prof.get("gflops_total"),
                "gflops_per_rank": prof.get("gflops_per_rank"),
                "gbytes_per_s": prof.get("gbytes_per_s"),
                "check_error_eps": chk.get("error_eps"),
                "check_bound_eps": chk.get("bound_eps"),
                "check_passed": chk.get("passed"),
            }
        )
        for b in r.get("compare") or []:
            bchk = b.get("check") or {}
            w.writerow(
                {
                    **base,
                    "library": b["library"],
                    "threads": b.get("threads"),
                    "check_error_eps": bchk.get("error_eps"),
                    "check_bound_eps": bchk.get("bound_eps"),
                    "check_passed": bchk.get("passed"),
                    "median_s": b.get("median_s"),
                    "min_s": b.get("min_s"),
                    "max_s": b.get("max_s"),
                    "gflops": b.get("gflops"),
                    "gbytes_per_s": b.get("gbytes_per_s"),
                    "note": b.get("note"),
                }
            )
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(buf.getvalue())


def plot(path: str, results: list[dict[str, Any]], env: dict[str, Any]) -> str | None:
    """GFLOP/s (GB/s for data operators) against matrix size, one line per configuration and
    per comparison library. Returns why nothing was drawn, or None."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed; no plot written"
    series: dict[str, list[tuple[int, float]]] = {}
    data_op = False
    for r in results:
        prof = r.get("profile") or {}
        data_op = data_op or bool(r.get("data_op"))
        rate = prof.get("gbytes_per_s") if r.get("data_op") else prof.get("gflops_total")
        size = max(r["m"], r["n"], r["k"])
        label = f"blasmp_array {r['op']} grid {r['grid'][0]}x{r['grid'][1]} block {r['block'][0]}"
        if rate:
            series.setdefault(label, []).append((size, rate))
        for b in r.get("compare") or []:
            theirs = baseline_rate(r, b)
            if theirs:
                series.setdefault(f"{b['library']}{_workers(b)}", []).append((size, theirs))
    if not series:
        return "no timed results to plot (run with --profile)"
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, pts in series.items():
        pts = sorted(set(pts))
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
    ax.set_xlabel("matrix size (max of m, n, k)")
    ax.set_ylabel("GB/s" if data_op else "GFLOP/s (total)")
    ax.set_title(
        f"{env['ranks']} rank(s), backend {env['backend']}; {env['blas_summary'][:60]}", fontsize=8
    )
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


class _Plain:
    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.done, self.enabled = total, 0, enabled

    def advance(self, label: str) -> None:
        self.done += 1
        if self.enabled:
            print(f"[{self.done}/{self.total}] {label}", flush=True)

    def close(self) -> None:
        pass


class _Tqdm(_Plain):
    def __init__(self, total: int, enabled: bool) -> None:
        super().__init__(total, enabled)
        from tqdm import tqdm

        self.bar = tqdm(total=total, disable=not enabled)

    def advance(self, label: str) -> None:
        self.bar.set_description(label)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


class _Rich(_Plain):
    def __init__(self, total: int, enabled: bool) -> None:
        super().__init__(total, enabled)
        from rich.progress import Progress

        self.progress = Progress(disable=not enabled)
        self.progress.start()
        self.task = self.progress.add_task("sweep", total=total)

    def advance(self, label: str) -> None:
        self.progress.update(self.task, advance=1, description=label)

    def close(self) -> None:
        self.progress.stop()


def progress(total: int, enabled: bool) -> _Plain:
    """A progress bar for sweeps (rich or tqdm if installed, else a line per step)."""
    for cls in (_Rich, _Tqdm):
        try:
            return cls(total, enabled)
        except ImportError:
            continue
    return _Plain(total, enabled)
