"""Alpha-beta + compute model of blasmp_array's SUMMA GEMM/SYRK and blocked TRSM pipelines on
the GPUs of one node (one rank per GPU, NVSHMEM over NVLink). A prediction, not a measurement:
see docs/scaling.md for the equations, the sources of the inputs and what a real run must show.

What is modelled is what ``ops/engine/panels.py`` and ``ops/blas3/trsm.py`` send:

* GEMM / SYRK (stationary C, ``num_stages`` slots): the K dimension is cut into steps of
  ``width`` columns (GPU default 2048, i.e. ``width // b`` K-blocks). At each step the owner of
  a K-block packs its part of the row panel ONCE and ``put_signal``\\ s it to each of the
  ``Pc - 1`` other processes of its process row (one message per receiver); likewise the column
  panel to the ``Pr - 1`` others of its process column. SYRK's column panel is A's rows taken
  along C's column distribution (transposed): each block goes to the ``Pr`` processes of process
  column ``I mod Pc``. The local update is one rank-``width`` GEMM (SYRK: the triangle's blocks).
* TRSM (left, lower, 'N'; steps of one block ``b``, look-ahead 1): at step ``k`` the grid row
  holding ``B_k`` solves ``X_k`` (TRSM rate), sends it to the ``Pr - 1`` others of each grid
  column (``x_row``) and every owner of ``A[i, k]`` (``i >= k``) sends its blocks to the
  ``Pc - 1`` others of grid row ``i mod Pr`` (``a_panel``); then a rank-``b`` trailing update.

Per step: ``comp`` (update at ``rate * eff(width)`` + unpack) and ``comm`` (per-message latency
``alpha`` times the messages a process sends, + the larger of its outgoing/incoming bytes over
the link bandwidth ``beta``, + the pack copy at HBM bandwidth). ``num_stages >= 2``:
``T = comm_0 + sum_k max(comp_k, comm_{k+1}) + barrier``; TRSM's step is
``max(comp, comm, solve + x_row + look-ahead update)``. ``num_stages == 1``: no overlap.

Run ``python tools/scaling_model.py [--png docs/_static/scaling_model.png]`` for the tables.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, replace

#: datasheet: NVLink 4 on H200 SXM, 900 GB/s total bidirectional per GPU -> 450 GB/s each way
NVLINK_DATASHEET_BPS = 450e9


@dataclass(frozen=True)
class Machine:
    """Inputs of the model (per GPU). Defaults: docs/scaling.md says which are measured."""

    gemm_rate: float = 53.1e12  # measured (DESIGN.md §6): cuBLAS DGEMM n=16384, 1 H200
    trsm_rate: float = 36.9e12  # measured (DESIGN.md §6): cuBLAS DTRSM n=16384
    syrk_rate: float | None = None  # 1-GPU SYRK rate; None = gemm_rate (assumption, unmeasured)
    update_eff_1024: float = 0.90  # measured: rank-1024 update / full DGEMM (DESIGN.md §6)
    latency: float = 45e-6  # measured: host-driven put_signal -> signal_wait, one way
    link_bw: float = NVLINK_DATASHEET_BPS  # datasheet, per direction (NOT measured)
    hbm_bw: float = 4.8e12  # datasheet H200 HBM3e (pack/unpack copies)
    itemsize: int = 8  # float64

    def update_eff(self, width: int) -> float:
        """Efficiency of a rank-``width`` update vs a full DGEMM.

        Assumption: a fixed per-call overhead worth ``w0`` columns, ``eff = 1 / (1 + w0 / width)``,
        with ``w0`` fitted to the one measured point (rank 1024).
        """
        w0 = 1024 * (1 / self.update_eff_1024 - 1)
        return 1 / (1 + w0 / width)


def numroc(n: int, b: int, iproc: int, nprocs: int) -> int:
    """Rows/columns of an ``n``-long, ``b``-blocked dimension held by process ``iproc``."""
    nblocks = n // b
    extent = (nblocks // nprocs) * b
    extra = nblocks % nprocs
    if iproc < extra:
        extent += b
    elif iproc == extra:
        extent += n % b
    return extent


def _block_width(n: int, b: int, j: int) -> int:
    return min(b, n - j * b)


def _pipeline(comp: list[float], comm: list[float], stages: int) -> float:
    """Time of a pipelined loop: step ``k`` computes while step ``k + 1``'s panels travel."""
    if stages <= 1:
        return sum(comp) + sum(comm)
    nxt = comm[1:] + [0.0]
    return comm[0] + sum(max(c, m) for c, m in zip(comp, nxt, strict=True))


def _barrier(m: Machine, p: int) -> float:
    return m.latency * math.ceil(math.log2(p)) if p > 1 else 0.0


def _comm(m: Machine, msgs: int, out_b: float, in_b: float, pack_b: float) -> float:
    return msgs * m.latency + max(out_b, in_b) / m.link_bw + 2 * pack_b / m.hbm_bw


def _steps(n: int, b: int, width: int) -> list[list[int]]:
    nk = -(-n // b)
    g = max(1, width // b)
    return [list(range(j, min(j + g, nk))) for j in range(0, nk, g)]


def flops(op: str, n: int) -> float:
    """Flops of one call on ``n x n`` operands (the bench command's counts)."""
    return {"gemm": 2.0 * n**3, "syrk": 1.0 * n * (n + 1) * n, "trsm": 1.0 * n**3}[op]


def _panel_traffic(
    m: Machine, n: int, b: int, step: list[int], p_own: int, rows: list[int]
) -> list[tuple[int, float, float, float]]:
    """(messages, bytes out, bytes in, bytes packed) of one panel per process index of the
    grid dimension that owns the K-blocks (``p_own`` processes, each sending its K-blocks to
    the ``p_own - 1`` others; ``rows[i]`` = panel rows held in that group)."""
    w = sum(_block_width(n, b, j) for j in step)
    out = []
    for c in range(p_own):
        own = sum(_block_width(n, b, j) for j in step if j % p_own == c)
        r = max(rows)
        msgs = (p_own - 1) if own else 0
        out.append((msgs, r * own * (p_own - 1) * m.itemsize, r * (w - own) * m.itemsize, r * own))
    return out


def gemm_time(
    n: int, pr: int, pc: int, b: int, m: Machine, stages: int = 2, width: int = 2048
) -> float:
    """Predicted seconds of ``C = A @ B`` (all ``n x n``) on a ``pr x pc`` grid."""
    p = pr * pc
    if p == 1:
        return flops("gemm", n) / m.gemm_rate  # method='local': one cuBLAS call
    lr = max(numroc(n, b, r, pr) for r in range(pr))
    lc = max(numroc(n, b, c, pc) for c in range(pc))
    comp, comm = [], []
    for step in _steps(n, b, width):
        w = sum(_block_width(n, b, j) for j in step)
        # A[:, step] -> every process of the row; B[step, :]^T -> every process of the column
        row = _panel_traffic(m, n, b, step, pc, [lr])
        col = _panel_traffic(m, n, b, step, pr, [lc])
        worst = max(
            _comm(
                m,
                row[c][0] + col[r][0],
                row[c][1] + col[r][1],
                row[c][2] + col[r][2],
                row[c][3] + col[r][3],
            )
            for r in range(pr)
            for c in range(pc)
        )
        unpack = max(row[c][2] + col[r][2] for r in range(pr) for c in range(pc))
        comm.append(worst)
        comp.append(2.0 * lr * lc * w / (m.gemm_rate * m.update_eff(w)) + 2 * unpack / m.hbm_bw)
    return _pipeline(comp, comm, stages) + _barrier(m, p)


def _triangle_blocks(nb: int, pr: int, pc: int) -> int:
    """Most lower-triangle blocks (diagonal included) held by one process."""
    return max(
        sum(1 for j in range(c, nb, pc) for i in range(j, nb) if i % pr == r)
        for r in range(pr)
        for c in range(pc)
    )


def syrk_time(
    n: int, pr: int, pc: int, b: int, m: Machine, stages: int = 2, width: int = 2048
) -> float:
    """Predicted seconds of the lower triangle of ``A @ A.T`` (``A`` is ``n x n``)."""
    p = pr * pc
    if p == 1:
        return flops("syrk", n) / (m.syrk_rate or m.gemm_rate)  # method='local': cuBLAS SYRK
    nb = -(-n // b)
    lr = max(numroc(n, b, r, pr) for r in range(pr))
    lc = max(numroc(n, b, c, pc) for c in range(pc))
    tri = _triangle_blocks(nb, pr, pc)
    comp, comm = [], []
    for step in _steps(n, b, width):
        w = sum(_block_width(n, b, j) for j in step)
        row = _panel_traffic(m, n, b, step, pc, [lr])
        worst = 0.0
        for r in range(pr):
            for c in range(pc):
                own = sum(_block_width(n, b, j) for j in step if j % pc == c)
                # A[I, step] -> the pr processes of column I mod pc (transposed distribution)
                targets = {(ri, i % pc) for i in range(r, nb, pr) for ri in range(pr)}
                targets.discard((r, c))
                msgs = len(targets) if own else 0
                out_b = sum(
                    _block_width(n, b, i) * own * (pr - (i % pc == c)) for i in range(r, nb, pr)
                )
                col = (msgs, out_b * m.itemsize, lc * w * m.itemsize, lr * own)
                worst = max(
                    worst,
                    _comm(
                        m,
                        row[c][0] + col[0],
                        row[c][1] + col[1],
                        row[c][2] + col[2],
                        row[c][3] + col[3],
                    ),
                )
        unpack = max(row[c][2] for c in range(pc)) + lc * w * m.itemsize
        comm.append(worst)
        comp.append(2.0 * tri * b * b * w / (m.gemm_rate * m.update_eff(w)) + 2 * unpack / m.hbm_bw)
    return _pipeline(comp, comm, stages) + _barrier(m, p)


def trsm_time(n: int, pr: int, pc: int, b: int, m: Machine, stages: int = 2) -> float:
    """Predicted seconds of ``solve_triangular(A, B, lower=True)``, ``A``, ``B`` ``n x n``."""
    p = pr * pc
    nk = -(-n // b)
    lc = max(numroc(n, b, c, pc) for c in range(pc))
    eff = m.update_eff(b)
    total = 0.0
    first = True
    for k in range(nk):
        bk = _block_width(n, b, k)
        below = [
            sum(_block_width(n, b, i) for i in range(k + 1, nk) if i % pr == r) for r in range(pr)
        ]
        solve = bk * bk * lc / m.trsm_rate
        # a_panel: owners of A[i>=k, k] (grid column k mod pc) -> the pc-1 others of row i mod pr
        a_rows = [below[r] + (bk if k % pr == r else 0) for r in range(pr)]
        a_out = max(a_rows) * bk * (pc - 1) * m.itemsize
        a_msgs = (pc - 1) if pc > 1 else 0
        # x_row: X_k (grid row k mod pr) -> the pr-1 others of each grid column
        x_out = bk * lc * (pr - 1) * m.itemsize
        x_msgs = pr - 1
        comm = _comm(
            m,
            a_msgs + x_msgs,
            a_out + x_out,
            (max(a_rows) * bk + bk * lc) * m.itemsize * (p > 1),
            max(a_rows) * bk + bk * lc * (pr > 1),
        )
        unpack = 2 * max(a_rows) * bk * m.itemsize * (pc > 1) / m.hbm_bw
        update = 2.0 * max(below) * bk * lc / (m.gemm_rate * eff) + unpack
        if first:
            total += _comm(m, a_msgs, a_out, max(a_rows) * bk * m.itemsize * (pc > 1), 0)
            first = False
        if stages <= 1:
            total += solve + comm + update
            continue
        # look-ahead chain: solve X_k -> send it -> update block k+1 alone -> solve X_{k+1}
        x_send = (m.latency + x_out / m.link_bw) if pr > 1 else 0.0
        ahead = 2.0 * _block_width(n, b, k + 1) * bk * lc / (m.gemm_rate * eff) if k + 1 < nk else 0
        total += max(solve + update, comm, solve + x_send + ahead)
    return total + _barrier(m, p)


TIMES = {"gemm": gemm_time, "syrk": syrk_time, "trsm": trsm_time}


def predict(op: str, n: int, pr: int, pc: int, b: int, m: Machine, stages: int = 2) -> float:
    """Predicted aggregate rate (flop/s) of ``op`` at size ``n`` on a ``pr x pc`` grid."""
    return flops(op, n) / TIMES[op](n, pr, pc, b, m, stages=stages)


def weak_n(p: int, n1: int = 16384, b: int = 1024) -> int:
    """Weak-scaling size: memory per GPU fixed, ``n = n1 sqrt(P)`` rounded to a multiple of b."""
    return max(b, round(n1 * math.sqrt(p) / b) * b)


def weak_efficiency(
    op: str, pr: int, pc: int, b: int, m: Machine, n1: int = 16384, stages: int = 2
) -> float:
    """Aggregate rate at ``weak_n(P)`` over ``P`` times the 1-GPU rate at ``n1``."""
    p = pr * pc
    return predict(op, weak_n(p, n1, b), pr, pc, b, m, stages) / (
        p * predict(op, n1, 1, 1, b, m, stages)
    )


def grids(p: int) -> list[tuple[int, int]]:
    return [(r, p // r) for r in range(1, p + 1) if p % r == 0]


def best_speedup(op: str, n: int, p: int, b: int, m: Machine) -> tuple[float, tuple[int, int]]:
    """Best predicted strong-scaling speed-up over the grids of ``p`` processes, and that grid."""
    t1 = TIMES[op](n, 1, 1, b, m)
    return max((t1 / TIMES[op](n, r, c, b, m), (r, c)) for r, c in grids(p))


OPS = ("gemm", "syrk", "trsm")
WEAK_GRIDS = [(1, 1), (1, 2), (2, 1), (2, 2), (1, 4), (2, 4), (4, 2)]


def report(m: Machine, blocks: tuple[int, ...] = (512, 1024), label: str = "") -> list[str]:
    """The tables of docs/scaling.md as text lines."""
    lines = [
        f"## {label}: link {m.link_bw / 1e9:.0f} GB/s per direction, "
        f"alpha {m.latency * 1e6:.0f} us, DGEMM {m.gemm_rate / 1e12:.1f} TF/s, "
        f"DTRSM {m.trsm_rate / 1e12:.1f} TF/s, rank-1024 eff {m.update_eff_1024:.2f}"
    ]
    for b in blocks:
        lines.append(
            f"weak scaling (n = 16384 sqrt(P), block {b}): efficiency vs 1 GPU (TF/s per GPU)"
        )
        lines.append(f"{'grid':<5} {'n':>6} " + " ".join(f"{op:>14}" for op in OPS))
        for r, c in WEAK_GRIDS:
            n, p = weak_n(r * c, b=b), r * c
            cells = [
                f"{weak_efficiency(op, r, c, b, m):.3f} "
                f"({predict(op, n, r, c, b, m) / p / 1e12:4.1f})"
                for op in OPS
            ]
            lines.append(f"{r}x{c:<3} {n:>6} " + " ".join(f"{x:>14}" for x in cells))
    for n in (32768, 65536):
        for b in blocks:
            lines.append(f"strong scaling n = {n}, block {b}: speed-up over 1 GPU (best grid)")
            lines.append(f"{'P':>2} " + " ".join(f"{op:>13}" for op in ("gemm", "syrk", "trsm")))
            for p in range(1, 9):
                cells = []
                for op in ("gemm", "syrk", "trsm"):
                    s, (r, c) = best_speedup(op, n, p, b, m)
                    cells.append(f"{s:6.2f} ({r}x{c})")
                lines.append(f"{p:>2} " + " ".join(f"{x:>13}" for x in cells))
    return lines


def _plot(path: str, machines: list[tuple[str, Machine]], b: int) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no plot"
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    ps = [1, 2, 4, 8]
    best = {1: (1, 1), 2: (1, 2), 4: (2, 2), 8: (2, 4)}
    for (label, m), style in zip(machines, ("-", "--"), strict=False):
        for op, color in (("gemm", "C0"), ("syrk", "C1"), ("trsm", "C2")):
            eff = [weak_efficiency(op, *best[p], b, m) for p in ps]
            axes[0].plot(ps, eff, style, color=color, marker="o", label=f"{op} ({label})")
            sp = [best_speedup(op, 65536, p, b, m)[0] for p in range(1, 9)]
            axes[1].plot(range(1, 9), sp, style, color=color, marker="o", label=f"{op} ({label})")
    axes[1].plot(range(1, 9), range(1, 9), ":", color="grey", label="ideal")
    axes[0].set(
        xlabel="GPUs",
        ylabel="efficiency vs 1 GPU",
        ylim=(0, 1.05),
        title=f"weak scaling, n = 16384 sqrt(P), block {b}",
    )
    axes[1].set(xlabel="GPUs", ylabel="speed-up", title=f"strong scaling, n = 65536, block {b}")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("blasmp_array scaling MODEL (not a measurement), float64, H200 node")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--link-gbs",
        type=float,
        default=NVLINK_DATASHEET_BPS / 1e9,
        help="NVLink bandwidth per direction, GB/s (datasheet 450)",
    )
    ap.add_argument("--latency-us", type=float, default=45.0, help="per-message latency, us")
    ap.add_argument("--blocks", default="512,1024", help="block sizes")
    ap.add_argument("--png", default=None, help="also draw the plot (needs matplotlib)")
    a = ap.parse_args(argv)
    base = Machine(link_bw=a.link_gbs * 1e9, latency=a.latency_us * 1e-6)
    half = replace(base, link_bw=base.link_bw / 2)
    blocks = tuple(int(x) for x in a.blocks.split(","))
    out = report(base, blocks, "link as given") + [""] + report(half, blocks, "link at 50%")
    print("\n".join(out))
    if a.png:
        why = _plot(a.png, [("link as given", base), ("link 50%", half)], blocks[-1])
        print(f"note: {why}" if why else f"plot: {a.png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
