"""Shared benchmark pieces: the bench contract (:class:`BenchTask`, its typed
:class:`BenchRow`), sampler entries, timed batched decoding, tables, Pareto plots.

A task's bench is one :class:`BenchTask` in its package (``unmask.<task>.bench.BENCH_TASK``):
its items, how they decode (a :func:`unmask.sweep.sweep` over sampler entries) and score, and
which columns it shows. ``unmask <task> bench`` is built from it by
:mod:`unmask.commands.bench_command`, with the same flags and meanings for every task.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch

from unmask.decode import DecodeConfig, DecodeResult
from unmask.hooks import Hook
from unmask.io import atomic_path
from unmask.samplers.base import parse_param_value
from unmask.samplers.spec import CORRECTOR, VERIFY, SamplerSpec, parse_spec, verify_suffix
from unmask.sweep import Run, sweep

#: a bench entry is a parsed sampler spec (:mod:`unmask.samplers.spec`)
BenchEntry = SamplerSpec

__all__ = ["BenchContext", "BenchEntry", "BenchResult", "BenchRow", "BenchTask", "CORRECTOR",
           "SamplerSpec", "VERIFY", "add_nfe_vs_sequential", "add_paired_vs",
           "add_rate_metrics", "aup", "paired_counts", "parse_spec", "timed_decode",
           "verify_suffix"]

#: the shared fields of a :class:`BenchRow`, in the order a bench file writes them
SHARED_FIELDS = ("label", "name", "accuracy", "nfe", "sequences", "tokens_per_pass",
                 "sequences_per_token", "wall_s", "wall_per_solved", "n_items")


@dataclass
class BenchRow:
    """One row of a bench: one sampler entry (at one temperature, on one part of the task).

    Every task fills the same shared fields; ``columns`` holds the task's own (e.g. Sudoku's
    ``solved_each``, protein's ``jsd_heldout``), under their names, in the order its file
    writes them. A few columns are read by the shared helpers: ``revealed`` (mean tokens
    decoded per item: :func:`add_rate_metrics`) and ``solved_each`` ('0'/'1' per item:
    :func:`add_paired_vs`). A task whose score has had another name keeps it as a column too
    (Sudoku's ``solved``), so that older readers of the files still find it.

    Attributes:
        label: the entry's label (its spec, with the temperature where a bench runs several).
        name: the sampler's registered name (the plot's line), or e.g. ``natural``.
        accuracy: the task's score in [0, 1], higher is better (Sudoku: share solved;
            protein: 1 - composition JSD to held-out proteins; arithmetic and reasoning: share
            correct; digits: class accuracy of the samples); None: not measured.
        nfe: mean model calls per item (None: a reference row that decodes nothing).
        sequences: mean sequences evaluated per item.
        tokens_per_pass: mean tokens decoded per item over ``nfe``.
        sequences_per_token: ``sequences`` over the tokens decoded per item.
        wall_s: decode seconds for all the row's items (shards summed).
        wall_per_solved: ``wall_s`` over ``accuracy * n_items`` (None when nothing is
            solved or the score is not a share of items).
        n_items: the items the row decoded.
    """

    label: str
    name: str
    accuracy: float | None
    nfe: float | None = None
    sequences: float | None = None
    tokens_per_pass: float | None = None
    sequences_per_token: float | None = None
    wall_s: float | None = None
    wall_per_solved: float | None = None
    n_items: int | None = None
    columns: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The row as a bench file writes it: the shared fields, then the task's columns."""
        return {**{f: getattr(self, f) for f in SHARED_FIELDS}, **self.columns}

    @classmethod
    def from_dict(cls, row: dict) -> BenchRow:
        """The row a bench file holds (:meth:`to_dict` read back); a shared field the file
        lacks (an older file's) is None."""
        return cls(**{f: row.get(f) for f in SHARED_FIELDS},
                   columns={k: v for k, v in row.items() if k not in SHARED_FIELDS})


@dataclass
class BenchContext:
    """What a :class:`BenchTask` decodes with, from the bench command's flags.

    Attributes:
        args: the parsed flags (the task's own ones included).
        model: the model, on the driver's device.
        entries: the sampler entries, one row (per temperature, per part) each.
        limit: items to decode (``--limit``; None: the task's whole set).
        temperatures: token temperatures (``--temperatures``).
        seed: ``--seed``.
        sweep: keyword arguments of :func:`unmask.sweep.sweep`: engine, recipe (with the
            corrector's, when an entry is corrected), cache, progress.
        hooks: the corrector's decode hooks, for entries marked ``corrected``.
    """

    args: argparse.Namespace
    model: Any
    entries: list[SamplerSpec]
    limit: int | None
    temperatures: tuple[float, ...]
    seed: int
    sweep: dict[str, Any] = field(default_factory=dict)
    hooks: tuple = ()


@dataclass
class BenchResult:
    """A bench's rows, in table order, and what its file records beside them (``header``:
    the items measured, the model, references) and prints under its tables (``notes``)."""

    rows: list[BenchRow]
    header: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: anything a task's own output needs (e.g. the digits' samples for ``--grid``)
    extras: dict[str, Any] = field(default_factory=dict)

    def dicts(self) -> list[dict]:
        return [r.to_dict() for r in self.rows]


class BenchTask:
    """One task's bench: its items, how they decode and score, which columns it shows.

    A subclass sets the class attributes and implements :meth:`load_model` and :meth:`run`;
    ``unmask <name> bench`` (:mod:`unmask.commands.bench_command`) gives every task the same flags.
    """

    #: the noun of ``unmask NAME bench``
    name: ClassVar[str]
    #: the sampler specs run without ``--samplers``
    default_specs: ClassVar[list[str]] = []
    #: ``--limit``'s default (None: every item of the set) and smallest value
    default_limit: ClassVar[int | None] = None
    min_limit: ClassVar[int] = 1
    #: what one item is, for ``--limit``'s help (e.g. "puzzles", "problems per task")
    items: ClassVar[str] = "items"
    #: ``--temperatures``' default
    default_temperatures: ClassVar[str] = "0"
    #: whether :meth:`run` decodes several temperatures at once (else it is run once per
    #: temperature, and the rows' labels get `` T=t`` when there are several)
    all_temperatures: ClassVar[bool] = False
    #: ``--dtype``'s default (None: as the model was saved)
    default_dtype: ClassVar[str | None] = None
    #: the task's specs may end in ``+corrector`` (the corrector's flags are added)
    corrector: ClassVar[bool] = False
    #: the task's specs may read an MI estimator (``--estimator`` is added)
    estimator: ClassVar[bool] = False
    #: ``--model``'s default (None: the task's shipped model) and what else it may name
    default_model: ClassVar[str | None] = None
    model_help: ClassVar[str] = "shipped model name or model folder (default: the shipped one)"
    #: the task the model's config must record (None: :meth:`load_model` checks)
    model_task: ClassVar[str | None] = None
    #: the table: (header, row key, format) over :meth:`BenchRow.to_dict`'s keys
    columns: ClassVar[list[tuple[str, str, str]]] = []
    #: the Pareto plot's y axis label (the accuracy in %)
    accuracy_label: ClassVar[str] = "accuracy %"
    #: old flag spellings still read, with a warning: old -> new
    aliases: ClassVar[dict[str, str]] = {}

    def add_arguments(self, p: argparse.ArgumentParser, types) -> None:
        """The task's own flags; ``types`` holds the CLI's argument types (``positive_int``,
        ``finite_float``, ...)."""

    def check(self, args: argparse.Namespace) -> None:
        """Refuse bad task flags in one line (before the model loads)."""

    def load_model(self, args: argparse.Namespace, device):
        """The model ``--model`` names, on ``device``."""
        raise NotImplementedError

    def recipe(self, args: argparse.Namespace, model, device):
        """How a worker of a non-local engine loads the model
        (:class:`unmask.recipe.ModelRecipe`)."""
        raise NotImplementedError

    def entries(self, model, specs: list[str] | None, parse) -> list[SamplerSpec]:
        """The rows' entries for ``--samplers`` ``specs`` (None: not given, the task's
        defaults); ``parse(spec)`` reads one spec, refusing a bad one in one line."""
        return [parse(s) for s in (self.default_specs if specs is None else specs)]

    def n_runs(self, ctx: BenchContext) -> int:
        """The runs :meth:`run` reports progress over (by default one per entry, and per
        temperature when it decodes them all at once)."""
        return len(ctx.entries) * (len(ctx.temperatures) if self.all_temperatures else 1)

    def run(self, ctx: BenchContext) -> BenchResult:
        """Decode the items with every entry and score them."""
        raise NotImplementedError

    def title(self, ctx: BenchContext, result: BenchResult) -> str:
        return f"{self.name} bench"

    def report(self, ctx: BenchContext, result: BenchResult) -> None:
        """Print the rows (one table by default) and the notes."""
        render_table(result.dicts(), self.columns, self.title(ctx, result))
        for line in result.notes:
            print(line)

    def plot(self, ctx: BenchContext, result: BenchResult, path: Path) -> None:
        """The Pareto plot of accuracy against forward passes."""
        rows = [r for r in result.dicts() if r["nfe"] is not None and r["accuracy"] is not None]
        pareto_plot(rows, path, ylabel=self.accuracy_label, title=self.title(ctx, result))

    def write_outputs(self, ctx: BenchContext, result: BenchResult) -> None:
        """Files of the task's own output flags (e.g. the digits' ``--grid``)."""


def with_temperature(row: BenchRow, temperature: float) -> BenchRow:
    """``row`` labelled with `` T=t`` (a bench run at several temperatures)."""
    return dataclasses.replace(row, label=f"{row.label} T={temperature:g}")


def timed_decode(model, tokens: torch.Tensor, entry: SamplerSpec, config: DecodeConfig,
                 *, seed: int = 0, batch_size: int = 1000,
                 corrector_hooks: tuple[Hook, ...] = ()) -> tuple[DecodeResult, float]:
    """Decode ``tokens`` (B, N) with ``entry`` in chunks of ``batch_size`` rows.

    Args:
        corrector_hooks: the hooks an entry marked ``corrected`` decodes with
            (:func:`unmask.hooks.corrector_hooks`); required for such entries.

    Returns:
        (the chunks' results merged, seconds).
    """
    [(result, wall)] = sweep([Run(entry, tokens, config, seed)], model, batch_size=batch_size,
                             hooks=corrector_hooks)
    return result, wall


def add_rate_metrics(rows: list[BenchRow], *, per_solved: bool = True) -> None:
    """Set the rate fields of every row that has their inputs: ``tokens_per_pass`` (the
    row's ``revealed`` column, mean tokens decoded per item, over ``nfe``),
    ``sequences_per_token`` (``sequences`` over ``revealed``) and ``wall_per_solved``
    (``wall_s`` over ``accuracy * n_items``; None when nothing was solved).

    Args:
        per_solved: the accuracy is a share of items solved (False, e.g. a closeness to a
            reference distribution: ``wall_per_solved`` stays None).
    """
    for r in rows:
        revealed = r.columns.get("revealed")
        r.tokens_per_pass = revealed / r.nfe if revealed is not None and r.nfe else None
        r.sequences_per_token = (r.sequences / revealed
                                 if r.sequences is not None and revealed else None)
        n_solved = (r.accuracy * r.n_items if per_solved and r.accuracy is not None
                    and r.n_items is not None else None)
        r.wall_per_solved = r.wall_s / n_solved if n_solved and r.wall_s is not None else None


def aup(rows: list[BenchRow], *, alpha: float = 3.0,
        y_min_offset: float = 5.0) -> float | None:
    """Accuracy Under Parallelism (d3LLM, arXiv 2601.07568) over a bench's rows.

    With the rows' points (rho_i = ``tokens_per_pass``, y_i = 100 * ``accuracy``, in %)
    sorted by rho, y_1 the accuracy at the smallest rho, and only the points with
    y_i >= y_1 - ``y_min_offset`` kept:

        AUP = rho_1 y_1 + sum_{i >= 2} (rho_i - rho_{i-1}) (y_i W(y_i) + y_{i-1} W(y_{i-1})) / 2,
        W(y) = min(exp(-alpha (1 - y / y_max)), 1), y_max = the largest accuracy of all rows.

    A weighted area under the accuracy vs parallelism curve: parallelism bought with accuracy
    counts less the more accuracy it cost. Rows without either (a reference row that decodes
    nothing) are skipped; None when none is left.
    """
    pts = sorted((r.tokens_per_pass, 100.0 * r.accuracy) for r in rows
                 if r.tokens_per_pass is not None and r.accuracy is not None
                 and r.tokens_per_pass > 0)
    if not pts:
        return None
    y_max = max(p[1] for p in pts)
    y_1 = pts[0][1]
    pts = [p for p in pts if p[1] >= y_1 - y_min_offset]

    def w(acc: float) -> float:
        return min(math.exp(-alpha * (1.0 - acc / y_max)), 1.0) if y_max > 0 else 0.0

    total = pts[0][0] * pts[0][1]
    for (r0, a0), (r1, a1) in zip(pts[:-1], pts[1:], strict=True):
        total += (r1 - r0) * (a1 * w(a1) + a0 * w(a0)) / 2.0
    return total


def wide_console(table):
    """A rich Console at least as wide as ``table``'s natural width. Rich squeezes a table
    into the terminal's width (80 columns when the output is a file or a pipe), and a long
    unwrapped first column then leaves the number columns no room at all."""
    from rich.console import Console

    console = Console()
    need = console.measure(table, options=console.options.update_width(10_000)).maximum
    return Console(width=need) if need > console.width else console


def render_table(rows: list[dict], columns: list[tuple[str, str, str]], title: str) -> None:
    """Print ``rows`` with rich. columns: (header, key, format spec) e.g. ("NFE", "nfe", ".1f")."""
    from rich.table import Table

    table = Table(title=title)
    for i, (header, _, _) in enumerate(columns):
        table.add_column(header, justify="left" if i == 0 else "right", no_wrap=i == 0)
    for r in rows:
        table.add_row(*[("-" if r.get(key) is None else format(r[key], fmt))
                        for _, key, fmt in columns])
    wide_console(table).print(table)


#: one-position-per-step samplers, in the order preferred as the NFE reference
SEQUENTIAL_LABELS = ("confidence", "entropy", "margin", "uniform")


def add_nfe_vs_sequential(rows: list[BenchRow]) -> BenchRow | None:
    """Set the column ``nfe_vs_sequential`` on every row: its ``nfe`` over that of the first
    sequential sampler run with default settings (confidence, else entropy, margin, uniform),
    or None when none was run or the row has no NFE. Returns the reference row."""
    seq = next((r for label in SEQUENTIAL_LABELS for r in rows if r.label == label), None)
    for r in rows:
        r.columns["nfe_vs_sequential"] = (r.nfe / seq.nfe if seq and r.nfe is not None
                                          else None)
    return seq


def paired_counts(each: str, ref_each: str) -> tuple[int, int]:
    """(gained, lost): the items right in ``each`` and wrong in ``ref_each``, and the reverse,
    from per-item strings of '0'/'1' over the same items in the same order. A paired
    (McNemar) comparison rests on them: a difference in solved share is noise unless
    gained - lost is large against sqrt(gained + lost)."""
    if len(each) != len(ref_each):
        raise ValueError(f"solved_each: rows cover {len(each)} and {len(ref_each)} items")
    pairs = list(zip(each, ref_each, strict=True))
    return pairs.count(("1", "0")), pairs.count(("0", "1"))


def add_paired_vs(rows: list[BenchRow], ref: BenchRow | None) -> None:
    """Set the columns ``gained_vs_ref`` / ``lost_vs_ref`` on every row: its
    :func:`paired_counts` against ``ref`` over their ``solved_each`` columns; None without a
    reference."""
    for r in rows:
        if ref is None or "solved_each" not in r.columns or "solved_each" not in ref.columns:
            r.columns["gained_vs_ref"] = r.columns["lost_vs_ref"] = None
            continue
        r.columns["gained_vs_ref"], r.columns["lost_vs_ref"] = paired_counts(
            r.columns["solved_each"], ref.columns["solved_each"])


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
