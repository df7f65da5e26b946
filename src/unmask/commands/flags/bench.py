"""The bench command every task shares: ``unmask <task> bench`` is built from the task's
:class:`~unmask.bench.contract.BenchTask` with the same flags and meanings. Its flags come from
the task's declared bench (``unmask.<task>.bench_task.DECLARED``), its run from the bench
itself (``unmask.<task>.bench.BENCH_TASK``). A task's flags module and command module name
it::

    bench = bench_arguments("sudoku")          # unmask.commands.flags.sudoku

    @command("sudoku", "bench")                # unmask.commands.sudoku
    def bench_sudoku(args):
        return run_bench_command(bench_task("sudoku"), args)
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from unmask.commands.flags import types as arg_types
from unmask.commands.flags.corrector import (
    add_corrector_args,
    corrector_from_args,
    corrector_recipe,
)
from unmask.commands.flags.engine import (
    add_cache_arg,
    add_device_arg,
    add_engine_args,
    driver_device,
    engine_from_args,
)
from unmask.commands.flags.paths import CACHE_COMMAND, distinct_outputs, mark_folder
from unmask.commands.flags.sampler import add_presets_arg, preset_entry, sampler_entry
from unmask.commands.flags.threads import add_threads_arg
from unmask.commands.flags.types import add_seed_arg, temperatures_type
from unmask.commands.registry import COMMAND_MODULES
from unmask.errors import UnmaskError
from unmask.validation import int_at_least

if TYPE_CHECKING:
    from unmask.bench.contract import BenchContext, BenchResult, BenchTask

#: the tasks with a bench command, from the registry
BENCH_TASKS = tuple(path[0] for path in COMMAND_MODULES if path[1:] == ("bench",))
#: ``--dtype`` choices -> the model's ``autocast_bf16``
DTYPES = {"float32": False, "bfloat16": True}


def bench_task(noun: str) -> BenchTask:
    """The :class:`~unmask.bench.contract.BenchTask` of ``unmask NOUN bench``."""
    from unmask.bench.contract import load_bench_task

    return load_bench_task(noun)


def bench_arguments(noun: str) -> Callable[[argparse.ArgumentParser], None]:
    """The ``add_arguments`` of ``unmask NOUN bench`` (:func:`add_bench_args`), from the task's
    declared bench (``unmask.NOUN.bench_task.DECLARED``: its flags and defaults, without
    importing the bench itself)."""
    return lambda p: add_bench_args(
        p, importlib.import_module(f"unmask.{noun}.bench_task").DECLARED)


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


def add_bench_args(p: argparse.ArgumentParser, task: BenchTask) -> None:
    """The flags every bench has, then the task's own."""
    p.add_argument("--model", default=task.default_model, help=task.model_help)
    limit = int_at_least(task.min_limit)
    default = "all" if task.default_limit is None else task.default_limit
    p.add_argument("--limit", type=limit, default=task.default_limit,
                   help=f"number of {task.items} (default {default})")
    add_presets_arg(p)
    p.add_argument("--samplers", nargs="+", default=None, metavar="SPEC",
                   help="sampler specs NAME[:K=V,...][+verify[=T]]"
                        + ("[+corrector]" if task.corrector else "")
                        + " (default: the task's comparison)")
    p.add_argument("--temperatures", type=temperatures_type, default=task.default_temperatures,
                   help="comma-separated token temperatures, a set of rows each (default "
                        f"{task.default_temperatures})")
    if task.estimator:
        p.add_argument("--estimator", default=None,
                       help="MI estimator folder for mi-guided (default: the shipped one)")
    if task.corrector:
        add_corrector_args(p)
    add_seed_arg(p)
    add_threads_arg(p)
    add_device_arg(p)
    p.add_argument("--dtype", choices=list(DTYPES), default=task.default_dtype,
                   help="float32, or bfloat16 autocast on the CPU (default: "
                        f"{task.default_dtype or 'as the model was saved'})")
    add_engine_args(p)
    add_cache_arg(p)
    p.add_argument("--json", default=None, metavar="OUT.json", help="write the rows as JSON")
    p.add_argument("--plot", default=None, metavar="OUT.png",
                   help="Pareto plot of accuracy against passes (.png, .pdf or .svg)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    task.add_arguments(p, arg_types)
    types = {"--limit": limit, "--temperatures": temperatures_type}
    for old, new in task.aliases.items():  # e.g. {"--n": "--limit", "--bf16": "--dtype"}
        const = "bfloat16" if new == "--dtype" else None
        p.add_argument(old, action=_Alias, new=new, const=const, type=types.get(new),
                       dest=new.lstrip("-").replace("-", "_"))


def run_bench_command(task: BenchTask, args: argparse.Namespace) -> int:
    """Run ``task``'s bench with the flags of :func:`add_bench_args`."""
    import dataclasses
    import json

    from unmask.bench.contract import BenchContext
    from unmask.io import IMAGE_SUFFIXES, JSON_SUFFIXES, atomic_write_text, output_path
    from unmask.models.auto import check_task

    engine, device = engine_from_args(args)
    json_path = output_path(args.json, "--json", JSON_SUFFIXES)
    plot_path = output_path(args.plot, "--plot", IMAGE_SUFFIXES)
    distinct_outputs(json=json_path, plot=plot_path)
    if args.samplers is not None and not args.samplers:
        raise UnmaskError("--samplers: no sampler spec given")
    task.check(args)
    presets = [preset_entry(name) for name in args.preset]
    model = task.load_model(args, driver_device(engine, device))
    if task.model_task is not None:
        check_task(model, task.model_task, args.model or task.model_task, required=True)
    if args.dtype is not None:
        model.autocast_bf16 = DTYPES[args.dtype]
    entries = [] if args.samplers is None and presets else task.entries(
        model, args.samplers, lambda spec: sampler_entry(spec, "--samplers"))
    entries += presets
    for e in entries:
        if getattr(args, "estimator", None) and e.name == "mi-guided":
            e.params["estimator"] = args.estimator
    corrected = any(e.corrected for e in entries)
    if task.corrector:
        corrector, hooks = corrector_from_args(args, model, corrected)
    elif corrected:
        raise UnmaskError(f"--samplers: the {task.name} bench has no corrector; drop "
                          "'+corrector'")
    else:
        corrector, hooks = None, ()
    recipe = dataclasses.replace(task.recipe(args, model, device), bf16=model.autocast_bf16,
                                 corrector=corrector_recipe(args, corrector) if corrector
                                 else None)
    if args.cache is not None:
        mark_folder(args.cache, CACHE_COMMAND)
    ctx = BenchContext(args, model, entries, args.limit, args.temperatures, args.seed,
                       {"engine": engine, "recipe": recipe, "cache": args.cache}, hooks)
    result = _decode(task, ctx)
    task.report(ctx, result)
    if json_path is not None:
        atomic_write_text(json_path, json.dumps(
            {"bench": task.name, **result.header, "temperatures": list(ctx.temperatures),
             "seed": ctx.seed, "rows": result.dicts()}, indent=2) + "\n")
    if plot_path is not None:
        task.plot(ctx, result, plot_path)
        print(f"plot: {plot_path}")
    task.write_outputs(ctx, result)
    for old, new in getattr(args, "deprecated_flags", []):
        print(f"warning: {old} is deprecated; use {new}", file=sys.stderr)
    return 0


def _decode(task: BenchTask, ctx: BenchContext) -> BenchResult:
    """``task.run`` over the context, with a progress bar; once per temperature when the
    task decodes one at a time (rows labelled with their temperature when there are
    several)."""
    import dataclasses

    from unmask.bench.contract import BenchResult, with_temperature
    from unmask.progress import progress_bar

    per = [ctx.temperatures] if task.all_temperatures else [(t,) for t in ctx.temperatures]
    total = task.n_runs(ctx) * len(per)
    results = []
    with progress_bar(total, "decoding", enabled=not ctx.args.quiet) as update:
        for k, temps in enumerate(per):
            done = k * total // len(per)
            sub = dataclasses.replace(ctx, temperatures=temps, sweep={
                **ctx.sweep, "progress": lambda n, done=done: update(done + n)})
            results.append(task.run(sub))
    if len(results) == 1:
        return results[0]
    rows = [with_temperature(r, t[0]) for t, res in zip(per, results, strict=True)
            for r in res.rows]
    return BenchResult(rows, results[0].header, [n for r in results for n in r.notes],
                       results[0].extras)
