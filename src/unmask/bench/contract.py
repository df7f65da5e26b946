"""The bench contract: :class:`BenchTask` (one task's bench), the rows it returns
(:class:`BenchRow`, :class:`BenchResult`) and what it decodes with (:class:`BenchContext`).

A task's bench is one :class:`BenchTask` in its package (``unmask.<task>.bench_task.BENCH_TASK``):
its items, how they decode (a :func:`unmask.bench.sweep.sweep` over sampler entries) and
score, and which columns it shows. ``unmask <task> bench`` is built from it by
:mod:`unmask.commands.flags.bench`, with the same flags and meanings for every task. This module
imports neither torch nor numpy: a bench's ``--help`` reads its task's declaration only.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from unmask.bench.table import render_table
from unmask.errors import UnmaskError

if TYPE_CHECKING:
    from unmask.samplers.spec import SamplerSpec

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
        sweep: keyword arguments of :func:`unmask.bench.sweep.sweep`: engine, recipe (with the
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
    ``unmask <name> bench`` (:mod:`unmask.commands.flags.bench`) gives every task the same flags.
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
    #: published points (label, NFE, accuracy %), drawn hollow by ``unmask results plot
    #: --references``
    references: ClassVar[list[tuple[str, float, float]]] = []
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
        (:class:`unmask.bench.recipe.ModelRecipe`)."""
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
        from unmask.bench.plot import pareto_plot

        rows = [r for r in result.dicts() if r["nfe"] is not None and r["accuracy"] is not None]
        pareto_plot(rows, path, ylabel=self.accuracy_label, title=self.title(ctx, result))

    def write_outputs(self, ctx: BenchContext, result: BenchResult) -> None:
        """Files of the task's own output flags (e.g. the digits' ``--grid``)."""


def load_bench_task(name: str) -> BenchTask:
    """The :class:`BenchTask` of task ``name`` (``unmask.<name>.bench.BENCH_TASK``, its module
    imported); :class:`UnmaskError` when there is no such bench."""
    module = None
    if name.isidentifier():
        try:
            module = importlib.import_module(f"unmask.{name}.bench")
        except ModuleNotFoundError as e:
            if e.name not in (f"unmask.{name}", f"unmask.{name}.bench"):
                raise  # the bench exists; something it needs is not installed
    task = getattr(module, "BENCH_TASK", None)
    if not isinstance(task, BenchTask):
        raise UnmaskError(f"bench {name!r}: no such bench")
    return task


def with_temperature(row: BenchRow, temperature: float) -> BenchRow:
    """``row`` labelled with `` T=t`` (a bench run at several temperatures)."""
    return dataclasses.replace(row, label=f"{row.label} T={temperature:g}")


