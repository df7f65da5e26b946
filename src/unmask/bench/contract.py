"""The bench contract: :class:`BenchTask` (one task's bench), what it is asked for
(:class:`BenchOptions`), the rows it returns (:class:`BenchRow`, :class:`BenchResult`) and
what it decodes with (:class:`BenchContext`).

A task's bench is one :class:`BenchTask` in its package (``unmask.<task>.bench.BENCH_TASK``):
its items, how they decode (a :func:`unmask.bench.sweep.sweep` over sampler entries) and
score, and which columns it shows; its options are a :class:`BenchOptions` subclass
(``unmask.<task>.bench_task``), run from Python by :func:`unmask.bench.run.run_bench` and
built from flags by ``unmask <task> bench`` (:mod:`unmask.commands.flags.bench`), with the same
flags and meanings for every task. This module imports neither torch nor numpy: a bench's
``--help`` reads its task's declaration only.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from unmask.bench.table import render_table
from unmask.errors import UnmaskError

if TYPE_CHECKING:
    from unmask.samplers.spec import SamplerSpec

#: ``dtype`` -> the model's ``autocast_bf16``
DTYPES = {"float32": False, "bfloat16": True}
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


@dataclass(frozen=True, kw_only=True)
class BenchOptions:
    """What a bench run is asked for: the settings every task's bench shares. A task's
    subclass (e.g. :class:`unmask.sudoku.bench_task.SudokuBench`) adds its own and sets its
    defaults; ``unmask <task> bench`` builds it from its flags of the same names, with the same
    defaults.

    Attributes:
        model: shipped model name or model folder (None: the task's shipped model).
        limit: items to decode (None: the task's whole set).
        samplers: sampler specs, a row each (None: the task's comparison; with ``preset``,
            none).
        preset: preset names, a row each (:mod:`unmask.presets`).
        temperatures: token temperatures, a set of rows each.
        seed: the decode seed (item r decodes with a seed from it, whatever the shard).
        dtype: ``float32``, or ``bfloat16`` autocast (None: as the model was saved).
        estimator: the MI estimator folder of every entry whose sampler reads one (None: the
            spec's own, or the shipped one).
    """

    #: the noun of the task whose options these are (``unmask <task> bench``)
    task: ClassVar[str]

    model: str | None = None
    limit: int | None = None
    samplers: tuple[str, ...] | None = None
    preset: tuple[str, ...] = ()
    temperatures: tuple[float, ...] = (0.0,)
    seed: int = 0
    dtype: str | None = None
    estimator: str | None = None

    def to_json(self) -> dict:
        """The options as a bench file records them (tuples as lists): :meth:`from_json`
        reads them back."""
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
                for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, data: dict) -> BenchOptions:
        """The options a bench file records (:meth:`to_json`), lists read as tuples."""
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


@dataclass(frozen=True, kw_only=True)
class CorrectedBenchOptions(BenchOptions):
    """The options of a bench whose specs may end in ``+corrector``: the corrector
    (:func:`unmask.hooks.corrector_hooks`) of those entries.

    Attributes:
        corrector: its folder (None: the shipped one).
        remask_threshold: remask decoded tokens it finds wrong with a probability above this.
        max_remasks: times one cell may be remasked.
        ban_remasked: a token it sent back is not proposed at that cell again.
    """

    corrector: str | None = None
    remask_threshold: float = 0.3
    max_remasks: int = 2
    ban_remasked: bool = False


@dataclass
class BenchContext:
    """What a :class:`BenchTask` decodes with, from its options.

    Attributes:
        options: what the run is asked for (the task's :class:`BenchOptions`, checked).
        model: the model, on the driver's device.
        entries: the sampler entries, one row (per temperature, per part) each.
        limit: items to decode (None: the task's whole set).
        temperatures: token temperatures (a part of the options' when a task decodes one at a
            time).
        seed: the options' seed.
        sweep: keyword arguments of :func:`unmask.bench.sweep.sweep`: engine, recipe (with the
            corrector's, when an entry is corrected), cache, progress.
        hooks: the corrector's decode hooks, for entries marked ``corrected``.
    """

    options: BenchOptions
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

    A subclass sets the class attributes and implements :meth:`load_model`, :meth:`recipe`
    and :meth:`run`; its :attr:`options` class holds what a run is asked for, and
    ``unmask <name> bench`` (:mod:`unmask.commands.flags.bench`) gives every task the same
    flags for the shared ones.
    """

    #: the noun of ``unmask NAME bench``
    name: ClassVar[str]
    #: what a run is asked for (its defaults are the flags')
    options: ClassVar[type[BenchOptions]] = BenchOptions
    #: the sampler specs run without ``samplers``
    default_specs: ClassVar[list[str]] = []
    #: the smallest ``limit``
    min_limit: ClassVar[int] = 1
    #: what one item is, for ``--limit``'s help (e.g. "puzzles", "problems per task")
    items: ClassVar[str] = "items"
    #: whether :meth:`run` decodes several temperatures at once (else it is run once per
    #: temperature, and the rows' labels get `` T=t`` when there are several)
    all_temperatures: ClassVar[bool] = False
    #: the task's specs may read an MI estimator (``--estimator`` is added)
    estimator: ClassVar[bool] = False
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

    @property
    def corrector(self) -> bool:
        """Whether the task's specs may end in ``+corrector`` (its options name the
        corrector)."""
        return issubclass(self.options, CorrectedBenchOptions)

    def check(self, options: BenchOptions) -> BenchOptions:
        """``options`` as the run reads them, or a bad task option refused in one line
        (before the model loads)."""
        return options

    def load_model(self, options: BenchOptions, device):
        """The model ``options.model`` names, on ``device``."""
        raise NotImplementedError

    def recipe(self, options: BenchOptions, model, device):
        """How a worker of a non-local engine loads the model
        (:class:`unmask.bench.recipe.ModelRecipe`)."""
        raise NotImplementedError

    def entries(self, model, specs: tuple[str, ...] | None, parse) -> list[SamplerSpec]:
        """The rows' entries for the options' ``samplers`` ``specs`` (None: the task's
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


