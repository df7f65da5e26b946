"""The bench command every task shares: ``unmask <task> bench`` is built from the task's
:class:`~unmask.bench.contract.BenchTask` with the same flags and meanings. Its flags come from
the task's declared bench (``unmask.<task>.bench_task.DECLARED``: the defaults of its
options) and the task's own flags (its flags module's), its run from the bench itself
(``unmask.<task>.bench.BENCH_TASK``), given the options its flags build
(:func:`options_from_args`). A task's flags module and command module name it::

    bench = bench_arguments("sudoku", sudoku_bench_args)   # unmask.commands.flags.sudoku

    @command("sudoku", "bench")                            # unmask.commands.sudoku
    def bench_sudoku(args):
        return run_bench_command(bench_task("sudoku"), args)
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from unmask.bench.contract import DTYPES
from unmask.commands.flags.corrector import add_corrector_args
from unmask.commands.flags.engine import add_cache_arg, add_device_arg, add_engine_args
from unmask.commands.flags.paths import CACHE_COMMAND, distinct_outputs, mark_folder
from unmask.commands.flags.sampler import add_presets_arg
from unmask.commands.flags.threads import add_threads_arg
from unmask.commands.flags.types import add_seed_arg, int_at_least, temperatures_type
from unmask.commands.registry import COMMAND_MODULES

if TYPE_CHECKING:
    from unmask.bench.contract import BenchOptions, BenchTask

#: the tasks with a bench command, from the registry
BENCH_TASKS = tuple(path[0] for path in COMMAND_MODULES if path[1:] == ("bench",))
#: a task's own flags: ``add(parser, defaults)``, ``defaults`` its options' defaults
TaskFlags = Callable[[argparse.ArgumentParser, "BenchOptions"], None]


def bench_task(noun: str) -> BenchTask:
    """The :class:`~unmask.bench.contract.BenchTask` of ``unmask NOUN bench``."""
    from unmask.bench.contract import load_bench_task

    return load_bench_task(noun)


def bench_arguments(noun: str, own: TaskFlags | None = None
                    ) -> Callable[[argparse.ArgumentParser], None]:
    """The ``add_arguments`` of ``unmask NOUN bench`` (:func:`add_bench_args`), from the task's
    declared bench (``unmask.NOUN.bench_task.DECLARED``: its options' defaults, without
    importing the bench itself) and its own flags ``own``."""
    return lambda p: add_bench_args(
        p, importlib.import_module(f"unmask.{noun}.bench_task").DECLARED, own)


def temperatures_text(temperatures: tuple[float, ...]) -> str:
    """``--temperatures``' text for ``temperatures`` (0 as ``0``: the argmax)."""
    return ",".join("0" if t == 0 else str(t) for t in temperatures)


class _Alias(argparse.Action):
    """An old spelling of a flag, hidden from --help: stores into the new one's destination;
    a run that succeeds ends with a warning naming the new spelling (a refusal stays one
    line)."""

    def __init__(self, option_strings, dest, new: str, const=None, **kw):
        self.new, self.value = new, const
        super().__init__(option_strings, dest, nargs=0 if const is not None else None,
                         default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, self.value if self.value is not None else values)
        old = getattr(namespace, "deprecated_flags", [])
        namespace.deprecated_flags = [*old, (option_string, self.new)]


def add_bench_args(p: argparse.ArgumentParser, task: BenchTask,
                   own: TaskFlags | None = None) -> None:
    """The flags every bench has, then the task's own (``own``); each defaults to its
    option's default."""
    d = task.options()
    p.add_argument("--model", default=d.model, help=task.model_help)
    limit = int_at_least(task.min_limit)
    p.add_argument("--limit", type=limit, default=d.limit,
                   help=f"number of {task.items} (default "
                        f"{'all' if d.limit is None else d.limit})")
    add_presets_arg(p)
    p.add_argument("--samplers", nargs="+", default=None, metavar="SPEC",
                   help="sampler specs NAME[:K=V,...][+verify[=T]]"
                        + ("[+corrector]" if task.corrector else "")
                        + " (default: the task's comparison)")
    p.add_argument("--temperatures", type=temperatures_type, default=d.temperatures,
                   help="comma-separated token temperatures, a set of rows each (default "
                        f"{temperatures_text(d.temperatures)})")
    if task.estimator:
        p.add_argument("--estimator", default=None,
                       help="MI estimator folder for mi-guided (default: the shipped one)")
    if task.corrector:
        add_corrector_args(p)
    add_seed_arg(p)
    add_threads_arg(p)
    add_device_arg(p)
    p.add_argument("--dtype", choices=list(DTYPES), default=d.dtype,
                   help="float32, or bfloat16 autocast on the CPU (default: "
                        f"{d.dtype or 'as the model was saved'})")
    add_engine_args(p)
    add_cache_arg(p)
    p.add_argument("--json", default=None, metavar="OUT.json", help="write the rows as JSON")
    p.add_argument("--plot", default=None, metavar="OUT.png",
                   help="Pareto plot of accuracy against passes (.png, .pdf or .svg)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    if own is not None:
        own(p, d)
    types = {"--limit": limit, "--temperatures": temperatures_type}
    for old, new in task.aliases.items():  # e.g. {"--n": "--limit", "--bf16": "--dtype"}
        const = "bfloat16" if new == "--dtype" else None
        p.add_argument(old, action=_Alias, new=new, const=const, type=types.get(new),
                       dest=new.lstrip("-").replace("-", "_"))


def options_from_args(task: BenchTask, args: argparse.Namespace) -> BenchOptions:
    """The task's :class:`~unmask.bench.contract.BenchOptions` from the flags of
    :func:`add_bench_args`: each option from the flag of its name (lists as tuples)."""
    values = {}
    for f in dataclasses.fields(task.options):
        if hasattr(args, f.name):
            value = getattr(args, f.name)
            values[f.name] = tuple(value) if isinstance(value, list) else value
    return task.options(**values)


def run_bench_command(task: BenchTask, args: argparse.Namespace) -> int:
    """Run ``task``'s bench with the flags of :func:`add_bench_args`: the options they build
    run by :func:`unmask.bench.run.run_bench`'s steps, the rows printed and written."""
    import json

    from unmask.bench.run import bench_context, bench_record, decode_bench
    from unmask.commands.flags.engine import engine_from_args
    from unmask.io import IMAGE_SUFFIXES, JSON_SUFFIXES, atomic_write_text, output_path

    engine, device = engine_from_args(args)
    json_path = output_path(args.json, "--json", JSON_SUFFIXES)
    plot_path = output_path(args.plot, "--plot", IMAGE_SUFFIXES)
    distinct_outputs(json=json_path, plot=plot_path)
    ctx = bench_context(task, options_from_args(task, args), device=device, engine=engine,
                        cache=args.cache)
    if args.cache is not None:
        mark_folder(args.cache, CACHE_COMMAND)
    result = decode_bench(task, ctx, progress=not args.quiet)
    task.report(ctx, result)
    if json_path is not None:
        atomic_write_text(json_path, json.dumps(bench_record(task, ctx, result), indent=2)
                          + "\n")
    if plot_path is not None:
        task.plot(ctx, result, plot_path)
        print(f"plot: {plot_path}")
    task.write_outputs(ctx, result)
    for old, new in getattr(args, "deprecated_flags", []):
        print(f"warning: {old} is deprecated; use {new}", file=sys.stderr)
    return 0
