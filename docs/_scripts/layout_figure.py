"""Draw docs/_static/layout_2x3.png: a 2-D block-cyclic layout on a 2 x 3 process grid.

Run once (``python docs/_scripts/layout_figure.py``) and commit the PNG; the docs build does not
need matplotlib. The ownership and local positions come from blasmp_array.layout, so the picture
shows what the library does.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from blasmp_array.layout import BlockCyclicLayout, owner  # noqa: E402

PR, PC = 2, 3
M, N = 10, 11  # global matrix, in elements
MB, NB = 2, 2  # block size: the last block row/column is ragged (10 = 5*2, 11 = 5*2 + 1)
COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2"]


def main() -> None:
    layout = BlockCyclicLayout((M, N), (MB, NB), (PR, PC))
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.8), gridspec_kw={"width_ratios": [11, 6]})
    for i in range(M):
        for j in range(N):
            p, q = owner(i, MB, PR), owner(j, NB, PC)
            rank = p * PC + q
            ax.add_patch(Rectangle((j, M - 1 - i), 1, 1, facecolor=COLORS[rank], alpha=0.75,
                                   edgecolor="white", linewidth=0.5))
    for bi in range(0, M + 1, MB):
        ax.axhline(M - bi, color="black", linewidth=1.2)
    for bj in range(0, N + 1, NB):
        ax.axvline(bj, color="black", linewidth=1.2)
    ax.axhline(0, color="black", linewidth=1.2)
    ax.axvline(N, color="black", linewidth=1.2)
    for bi, i0 in enumerate(range(0, M, MB)):
        for bj, j0 in enumerate(range(0, N, NB)):
            h, w = min(MB, M - i0), min(NB, N - j0)
            ax.text(j0 + w / 2, M - i0 - h / 2, f"({bi},{bj})", ha="center", va="center",
                    fontsize=7, color="white", weight="bold")
    ax.set_xlim(0, N)
    ax.set_ylim(0, M)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(f"global {M} x {N} matrix, {MB} x {NB} blocks (block (I, J) labelled)",
                 fontsize=9)

    # right: the process grid and each process's local matrix shape
    for p in range(PR):
        for q in range(PC):
            rank = p * PC + q
            lm, ln = layout.local_shape(p, q)
            x, y = q * 2.1, (PR - 1 - p) * 2.1
            ax2.add_patch(Rectangle((x, y), 2, 2, facecolor=COLORS[rank], alpha=0.75,
                                    edgecolor="black"))
            ax2.text(x + 1, y + 1.25, f"rank {rank}\nprocess ({p},{q})", ha="center",
                     va="center", fontsize=8, color="white", weight="bold")
            ax2.text(x + 1, y + 0.45, f"local {lm} x {ln}", ha="center", va="center",
                     fontsize=8, color="white")
    ax2.set_xlim(-0.1, PC * 2.1)
    ax2.set_ylim(-0.1, PR * 2.1)
    ax2.set_aspect("equal")
    ax2.axis("off")
    ax2.set_title(f"{PR} x {PC} process grid (row-major ranks):\n"
                  f"block (I, J) lives on process (I mod {PR}, J mod {PC})", fontsize=9)
    fig.tight_layout()
    out = Path(__file__).resolve().parent.parent / "_static" / "layout_2x3.png"
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
