"""MI maps of Sudoku contexts: an N x N heatmap, one cell's MI on the board, structure score.

A Sudoku MDM that has learnt the rules should put its pairwise MI on *peers*: cells that share
a row, a column or a box (20 of the 80 other cells, 25%). The structure score measures that:
the share of the MI mass, and of the top pairs, that falls on peer pairs, against the share of
peer pairs among the pairs scored (the chance level; 25% when every cell is masked).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from unmask.errors import UnmaskError
from unmask.io import atomic_path
from unmask.models.transformer import grid_relations

SIDE, BOX = 9, 3
N_CELLS = SIDE * SIDE
IMAGE_FORMATS = ("png", "pdf", "svg")


def peer_mask(side: int = SIDE, box: int = BOX) -> torch.Tensor:
    """(side^2, side^2) bool: True where two distinct cells share a row, column or box."""
    return (grid_relations(side, box) > 0) & ~torch.eye(side * side, dtype=torch.bool)


def structure_score(mi: torch.Tensor, masked: torch.Tensor, top_fraction: float = 0.1) -> dict:
    """How much of the MI of one context (N, N) lies on row/column/box peers.

    Over the unordered pairs i < j of masked cells (``masked`` (N,) bool):
    mass_share: share of the summed MI on peer pairs; top_share: share of the
    ceil(top_fraction * pairs) pairs with the largest MI that are peers; chance_share: share of
    peer pairs among all pairs scored (what a map blind to the rules would get).
    """
    n = mi.shape[-1]
    masked = masked.cpu()
    pairs = masked[:, None] & masked[None, :] & torch.ones(n, n, dtype=torch.bool).triu(1)
    peers = peer_mask()[pairs]
    values = mi.detach().cpu().double()[pairs]
    if values.numel() == 0:
        return {"pairs": 0, "mass_share": float("nan"), "top_share": float("nan"),
                "chance_share": float("nan")}
    total = float(values.sum())
    k = max(1, math.ceil(top_fraction * values.numel()))
    top = torch.argsort(values, descending=True, stable=True)[:k]
    return {"pairs": int(values.numel()),
            "mass_share": float(values[peers].sum()) / total if total > 0 else float("nan"),
            "top_share": float(peers[top].double().mean()),
            "chance_share": float(peers.double().mean())}


def parse_cell(text: str) -> int:
    """'R,C' (1-based row and column) -> cell index 0..80."""
    try:
        r, c = (int(part) for part in text.split(","))
    except ValueError:
        raise UnmaskError(f"--cell: expected R,C (e.g. 5,3), got {text!r}") from None
    if not (1 <= r <= SIDE and 1 <= c <= SIDE):
        raise UnmaskError(f"--cell: {text!r} is outside the board (rows and columns 1-9)")
    return (r - 1) * SIDE + (c - 1)


def cell_name(cell: int) -> str:
    return f"r{cell // SIDE + 1}c{cell % SIDE + 1}"


def check_image_path(path: str | Path) -> Path:
    """The output path of a map: its folder must exist and its suffix name an image format."""
    path = Path(path)
    if not path.parent.is_dir():
        raise UnmaskError(f"--out: folder {path.parent} does not exist")
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in IMAGE_FORMATS:
        raise UnmaskError(f"--out: expected a .png, .pdf or .svg file, got {path.name!r}")
    return path


def _draw_heatmap(ax, mi: np.ndarray, blank: np.ndarray, vmax: float, cmap):
    """MI (81, 81); rows and columns of clues (``blank`` False) in grey: no MI is defined."""
    shown = np.where(blank[:, None] & blank[None, :], mi, np.nan)
    im = ax.imshow(shown, cmap=cmap.with_extremes(bad="0.88"), vmin=0.0, vmax=vmax,
                   interpolation="nearest")
    for k in range(SIDE, N_CELLS, SIDE):  # row boundaries; thicker at box bands
        lw = 0.9 if k % (SIDE * BOX) == 0 else 0.25
        ax.axhline(k - 0.5, color="0.55", lw=lw)
        ax.axvline(k - 0.5, color="0.55", lw=lw)
    ticks = np.arange(SIDE) * SIDE + (SIDE - 1) / 2
    ax.set_xticks(ticks, [f"r{r + 1}" for r in range(SIDE)], fontsize=7)
    ax.set_yticks(ticks, [f"r{r + 1}" for r in range(SIDE)], fontsize=7)
    ax.tick_params(length=0)
    ax.set_xlabel("cell j (grouped by row)", fontsize=8)
    ax.set_ylabel("cell i (grouped by row)", fontsize=8)
    return im


def _draw_board(ax, grid: np.ndarray, values: np.ndarray, cell: int, vmax: float, cmap):
    """The 9x9 board: masked cells coloured by their MI with ``cell``, clues as digits."""
    import matplotlib.patches as patches

    clue = grid > 0
    shown = np.where(clue, np.nan, values).reshape(SIDE, SIDE)
    cm = cmap.with_extremes(bad="0.88")  # clues on light grey
    ax.imshow(shown, cmap=cm, vmin=0.0, vmax=vmax, interpolation="nearest")
    for k in range(SIDE + 1):
        lw = 2.0 if k % BOX == 0 else 0.5
        ax.axhline(k - 0.5, color="black", lw=lw)
        ax.axvline(k - 0.5, color="black", lw=lw)
    for i in range(N_CELLS):
        r, c = divmod(i, SIDE)
        if clue[i]:
            ax.text(c, r, str(int(grid[i])), ha="center", va="center", fontsize=12,
                    fontweight="bold", color="black")
        elif i != cell and vmax >= 0.05:  # below that, two decimals would all read 0.00
            v = values[i]
            dark = v > 0.55 * vmax
            ax.text(c, r, f"{v:.2f}", ha="center", va="center", fontsize=6.5,
                    color="white" if dark else "0.25")
    r, c = divmod(cell, SIDE)
    ax.add_patch(patches.Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, lw=2.5,
                                   edgecolor="#00a0ff"))
    ax.text(c, r, "?", ha="center", va="center", fontsize=12, color="#00a0ff",
            fontweight="bold")
    ax.set_xticks(range(SIDE), [str(k + 1) for k in range(SIDE)], fontsize=7)
    ax.set_yticks(range(SIDE), [str(k + 1) for k in range(SIDE)], fontsize=7)
    ax.tick_params(length=0)


def plot_mi_maps(grid, maps: dict[str, torch.Tensor], cell: int, out: str | Path,
                 title: str = "") -> dict[str, dict]:
    """Draw each map in ``maps`` (name -> MI (81, 81) in nats) as a column: the heatmap above,
    the board coloured by MI with ``cell`` below. One colour scale for all columns, so the
    sources compare at a glance. Writes ``out`` atomically; returns name -> structure score.

    grid: (81,) puzzle, 0 for blanks (the blanks are the masked cells).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = np.asarray(grid).reshape(-1)
    if grid.shape != (N_CELLS,):
        raise UnmaskError(f"grid: expected 81 cells, got {grid.shape}")
    if not maps:
        raise UnmaskError("maps: nothing to draw")
    out = check_image_path(out)
    masked = torch.from_numpy(grid == 0)
    arrays = {k: v.detach().cpu().double().numpy() for k, v in maps.items()}
    scores = {k: structure_score(maps[k], masked) for k in maps}
    heat_max = max(float(np.quantile(a[a > 0], 0.995)) if (a > 0).any() else 1e-9
                   for a in arrays.values())
    board_max = max(max(float(a[cell].max()), 1e-9) for a in arrays.values())
    cmap = plt.get_cmap("magma_r")
    cols = len(arrays)
    fig, axes = plt.subplots(2, cols, figsize=(5.6 * cols, 11.2), squeeze=False,
                             gridspec_kw={"hspace": 0.35, "wspace": 0.3})
    for col, (name, a) in enumerate(arrays.items()):
        s = scores[name]
        im = _draw_heatmap(axes[0, col], a, grid == 0, heat_max, cmap)
        axes[0, col].set_title(
            f"{name}: pairwise MI (nats), clues in grey\n"
            f"peers hold {100 * s['mass_share']:.0f}% of the MI, "
            f"{100 * s['top_share']:.0f}% of the top-10% pairs\n(chance "
            f"{100 * s['chance_share']:.0f}%)", fontsize=9)
        fig.colorbar(im, ax=axes[0, col], fraction=0.046, pad=0.03).ax.tick_params(labelsize=7)
        _draw_board(axes[1, col], grid, a[cell], cell, board_max, cmap)
        row_peers = a[cell][peer_mask()[cell].numpy() & (grid == 0)].sum()
        share = row_peers / a[cell].sum() if a[cell].sum() > 0 else float("nan")
        axes[1, col].set_title(f"{name}: MI of {cell_name(cell)} (?) with every cell\n"
                               f"{100 * share:.0f}% of it on its peers; clues in grey",
                               fontsize=9)
        sm = plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(0.0, board_max))
        fig.colorbar(sm, ax=axes[1, col], fraction=0.046, pad=0.03).ax.tick_params(labelsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, format=out.suffix.lower().lstrip("."), dpi=110, bbox_inches="tight")
    plt.close(fig)
    return scores
