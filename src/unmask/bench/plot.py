"""Pareto plots of bench rows: accuracy against forward passes (or seconds, or sequences),
one line per sampler family, the front dashed; matplotlib is imported when one is drawn."""

from __future__ import annotations

import math
from pathlib import Path

from unmask.io import atomic_path
from unmask.samplers.base import parse_param_value
from unmask.samplers.spec import CORRECTOR, VERIFY


def pareto_front(rows: list[dict], x: str, y: str) -> list[dict]:
    """Rows (as a file holds them) not dominated by another (lower or equal ``x`` and higher
    or equal ``y``)."""
    return [r for r in rows if not any(
        (o[x] <= r[x] and o[y] >= r[y]) and (o[x] < r[x] or o[y] > r[y]) for o in rows)]


def _greek(text: str) -> str:
    """Plot labels: ``gamma=0.3 lam=10 tau=0.9 +verify=0.01`` as ``γ=0.3 λ=10 τ=0.9 T=0.01``."""
    for name, letter in (("gamma=", "γ="), ("lam=", "λ="), ("tau=", "τ="), ("+verify=", "T=")):
        text = text.replace(name, letter)
    return text


def plot_family(row: dict) -> str:
    """The line a bench row is drawn on: its sampler with the options in its label that change
    the rule's form (those whose value is not a number: a scan order, a switch such as
    ``free_max=True``), and whether it ran with the corrector or verified. Numeric options
    (gamma, k, tau, a verify tolerance) are the points along the line."""
    def is_form(token: str) -> bool:
        value = parse_param_value(token.split("=", 1)[1])
        return isinstance(value, bool) or not isinstance(value, (int, float))

    forms = [t for t in row["label"].split()[1:] if "=" in t and is_form(t)]
    suffixes = [suffix for key, suffix in (("corrected", CORRECTOR),
                                           ("verified", VERIFY)) if row.get(key)]
    return " ".join([row["name"], *forms, *suffixes])


def _plot_families(ax, rows: list[dict], x: str, y: str, cmap) -> None:
    """One line per sampler family (points sorted by ``x``), each point labelled with the
    parameters it does not share with the rest of its family."""
    families = list(dict.fromkeys(plot_family(r) for r in rows))
    for k, fam in enumerate(families):
        part = sorted((r for r in rows if plot_family(r) == fam), key=lambda r: r[x])
        params = [[t for t in r["label"].split() if t not in fam.split()] for r in part]
        # parameters every point of the family shares go in the legend, not on each point
        shared = ([t for t in params[0] if all(t in p for p in params)]
                  if len(part) > 1 else [])
        ax.plot([r[x] for r in part], [100 * r[y] for r in part], "o-", color=cmap(k % 10),
                label=_greek(" ".join([fam, *shared])), alpha=0.85, ms=6)
        for j, (r, p) in enumerate(zip(part, params, strict=True)):
            short = _greek(" ".join(t for t in p if t not in shared))
            if short:  # above or below, alternating along a line and between lines
                ax.annotate(short, (r[x], 100 * r[y]), fontsize=7,
                            xytext=(4, 3 if (k + j) % 2 else -10),
                            textcoords="offset points", color=cmap(k % 10))


def _plot_references(ax, references, guides) -> None:
    """Published points (hollow squares) and guide lines ("h" | "v", value, label)."""
    for label, rx, ry in references:
        ax.plot([rx], [ry], marker="s", mfc="none", mec="gray", ms=8, ls="none")
        ax.annotate(label, (rx, ry), fontsize=7, color="gray", xytext=(4, -10),
                    textcoords="offset points")
    for kind, value, label in guides:
        style = {"fontsize": 7, "color": "gray", "xytext": (2, 2),
                 "textcoords": "offset points"}
        if kind == "h":  # label at the left end
            ax.axhline(value, color="gray", lw=0.8, ls=":")
            ax.annotate(label, (0.01, value), xycoords=("axes fraction", "data"), va="bottom",
                        **style)
        else:  # label along the line, from the top
            ax.axvline(value, color="gray", lw=0.8, ls=":")
            ax.annotate(label, (value, 0.99), xycoords=("data", "axes fraction"), rotation=90,
                        va="top", **style)


def _log_x_axis(ax, xs: list[float], xlim, ylim) -> None:
    """A log x axis with round ticks around ``xs`` (or every whole count in ``xlim``)."""
    from matplotlib.ticker import FixedLocator, NullFormatter, ScalarFormatter

    ax.set_xscale("log")
    if xlim is None:
        ticks = [t for t in (1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100, 150, 200, 300, 500)
                 if min(xs) / 1.5 <= t <= max(xs) * 1.5]
        if sum(min(xs) <= t <= max(xs) for t in ticks) < 3:  # narrow: whole counts, <= ~10
            lo, hi = math.floor(min(xs)), math.ceil(max(xs))
            ticks = list(range(lo, hi + 1, max(1, (hi - lo) // 8)))
    else:  # a zoom: every whole pass count in range
        ticks = list(range(math.ceil(xlim[0]), math.floor(xlim[1]) + 1))
        ax.set_xlim(*xlim)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())


def pareto_plot(rows: list[dict], path: str | Path, *, x: str = "nfe", y: str = "accuracy",
                xlabel: str = "mean forward passes (NFE)", ylabel: str = "solved %",
                title: str = "", references: list[tuple[str, float, float]] = (),
                xlim: tuple[float, float] | None = None, ylim: tuple[float, float] | None = None,
                guides: list[tuple[str, float, str]] = ()) -> None:
    """Scatter of ``y`` (as %) against ``x`` per sampler family, Pareto front drawn, saved
    atomically, in the format its extension names (.png, .pdf, .svg).
    references: extra (label, x, y%) points drawn hollow (published).
    xlim / ylim: the axes' ranges (a zoom; y in %). guides: ("h" | "v", value, label) lines
    drawn across the plot (a target accuracy in %, a pass budget)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=120)
    _plot_families(ax, rows, x, y, plt.get_cmap("tab10"))
    front = sorted(pareto_front(rows, x, y), key=lambda r: r[x])
    ax.plot([r[x] for r in front], [100 * r[y] for r in front], "k--", lw=1, alpha=0.5,
            label="Pareto front")
    _plot_references(ax, references, guides)
    _log_x_axis(ax, [r[x] for r in rows] + [rx for _, rx, _ in references], xlim, ylim)
    ax.set_xlabel(xlabel + " (log scale)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, which="both")
    # outside the axes, to the right, so that no point hides behind it however many rows;
    # a second column once one would outgrow the plot's height
    n_entries = len(ax.get_legend_handles_labels()[1])
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
              ncol=1 + (n_entries - 1) // 24)
    fig.tight_layout()
    with atomic_path(path) as tmp:  # the saved image grows to hold the legend
        fig.savefig(tmp, format=Path(path).suffix.lower().lstrip(".") or "png",
                    bbox_inches="tight")
    plt.close(fig)
