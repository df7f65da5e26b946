"""Pieces shared by CLI subcommands: argument types, threads, sampler options, output
paths, progress bars."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import math
import os
from pathlib import Path

from unmask.bench import BenchEntry
from unmask.corrector import load_corrector
from unmask.decode import CONFIDENCE
from unmask.errors import UnmaskError
from unmask.hooks import corrector_hooks
from unmask.io import (  # noqa: F401  (re-exported for the commands)
    IMAGE_SUFFIXES,
    JSON_SUFFIXES,
    JSONL_SUFFIXES,
    output_path,
)
from unmask.models.transformer import TransformerConfig
from unmask.presets import PRESETS, preset_entry
from unmask.sweep import CorrectorRecipe
from unmask.validation import (  # noqa: F401  (argument types, re-exported for the commands)
    field_hints,
    field_problem,
    finite_float,
    int_at_least,
    json_type,
    non_negative_int,
    positive_int,
    seed_int,
    union_options,
)
from unmask.workers import ENGINES, Engine, LocalEngine, make_engine

# ------------------------------------------------------------------ argument types
# argparse turns an ArgumentTypeError into one line "argument --x: ..." and exit 2; the types
# themselves live in unmask.validation


def folder_to_keep(text: str) -> str:
    """An argparse type: a folder that exists or can be made (:func:`folder_problem`);
    nothing is created here."""
    problem = folder_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def default_of(cls, name: str):
    """The default of field ``name`` of dataclass ``cls``, or of keyword parameter ``name``
    of function ``cls`` (so a flag's default is read from what it configures, never
    copied)."""
    if not dataclasses.is_dataclass(cls):
        param = inspect.signature(cls).parameters.get(name)
        if param is None or param.default is inspect.Parameter.empty:
            raise KeyError(f"{cls.__name__} has no defaulted parameter {name!r}")
        return param.default
    for f in dataclasses.fields(cls):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
    raise KeyError(f"{cls.__name__} has no defaulted field {name!r}")


# ------------------------------------------------------------------ threads and seeds


def threads_int(text: str) -> int:
    """An argparse type: a thread count, from 1 to the CPUs of this machine."""
    value = positive_int(text)
    cpus = os.cpu_count() or 1
    if value > cpus:
        raise argparse.ArgumentTypeError(f"must be <= {cpus} (the CPUs of this machine), "
                                         f"got {value}")
    return value


def add_threads_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", type=threads_int, default=None, metavar="N",
                   help="CPU threads of torch and numba (default: torch's default, which "
                        "follows OMP_NUM_THREADS)")


def add_seed_arg(p: argparse.ArgumentParser, help: str = "random seed (default 0)") -> None:
    p.add_argument("--seed", type=seed_int, default=0, help=help)


def apply_threads(threads: int | None) -> int:
    """Give torch and numba ``threads`` CPU threads (None: torch's current count, for both);
    returns the count. numba's OpenMP pool sets the process's OpenMP thread count when it
    starts, which is torch's too: it is started here, before any work, and torch's count set
    after it."""
    import numba
    import torch

    n = threads if threads is not None else torch.get_num_threads()
    if threads is not None and threads < 1:
        raise UnmaskError(f"--threads: must be >= 1, got {threads}")
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))  # starts numba's pool
    torch.set_num_threads(n)
    return n


def thread_counts(counts: tuple[int, int | None] | None = None) -> tuple[int, int | None]:
    """(torch's, numba's) thread counts (numba's None while its pool has not started); with
    ``counts``, set them back to those first."""
    import numba
    import torch

    if counts is not None:
        if counts[1] is not None:
            numba.set_num_threads(counts[1])
        torch.set_num_threads(counts[0])
    started = getattr(numba.np.ufunc.parallel, "_is_initialized", True)
    return torch.get_num_threads(), (numba.get_num_threads() if started else None)


# ------------------------------------------------------------------ engines


def add_engine_args(p: argparse.ArgumentParser, *, gpus: bool = True) -> None:
    """``--engine`` and ``--workers`` (:mod:`unmask.workers`); ``gpus``: the command has
    ``--device``, and a Ray worker on cuda reserves one GPU."""
    p.add_argument("--engine", default="local", choices=ENGINES,
                   help="local: this process (default); ray: Ray actors, one model each, on "
                        "the cluster at RAY_ADDRESS or a local one (pip install 'unmask[ray]')")
    p.add_argument("--workers", type=positive_int, default=None,
                   help="Ray workers (default 1), each reserving --threads CPUs"
                        + (" and, with --device cuda, one GPU" if gpus else ""))


def add_cache_arg(p: argparse.ArgumentParser) -> None:
    """``--cache DIR``: keep each finished shard of a bench sweep there and reuse it
    (:mod:`unmask.sweep_cache`)."""
    p.add_argument("--cache", default=None, metavar="DIR", type=folder_to_keep,
                   help="keep each finished shard here and reuse it: a killed bench run again "
                        "with the same flags resumes where it stopped")


def engine_from_args(args: argparse.Namespace):
    """(the engine ``--engine`` and ``--workers`` name, the torch device its workers run the
    model on). The local engine's device is ``--device`` (cpu without the flag), checked
    here; a Ray worker's is cpu or cuda, checked where it runs (each gets its own GPU).
    Refused in one line: ``--workers`` above 1 on the local engine, Ray not installed, a
    device with an index under Ray."""
    import torch

    name = getattr(args, "device", "cpu")
    if args.engine == "local":
        if args.workers not in (None, 1):
            raise UnmaskError(f"--workers: the local engine runs 1 worker, got {args.workers}; "
                              "add --engine ray")
        return LocalEngine(), resolve_device(name)
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise UnmaskError(f"--device: {name!r} is not a torch device") from None
    if device.type not in ("cpu", "cuda") or device.index is not None:
        raise UnmaskError(f"--device: with --engine ray give cpu or cuda (each worker gets "
                          f"its own GPU), got {name!r}")
    engine = make_engine("ray", args.workers, cpus_per_worker=args.threads or 1,
                         gpus_per_worker=1 if device.type == "cuda" else 0)
    return engine, device


def driver_device(engine: Engine, device):
    """Where the command's own copy of the model goes: ``device`` on the local engine; the
    CPU beside remote workers (the driver reads the model's metadata, the workers decode)."""
    import torch

    return device if isinstance(engine, LocalEngine) else torch.device("cpu")


# ------------------------------------------------------------------ samplers


def add_sampler_arg(p: argparse.ArgumentParser, default: str = "confidence") -> None:
    """``--sampler SPEC`` and ``--preset NAME`` (one or the other)."""
    p.add_argument("--sampler", default=None, metavar="SPEC",
                   help="sampler spec NAME[:K=V,K=V][+verify[=T]][+corrector], e.g. "
                        f"eb:gamma=0.1 or topk:k=9+verify=0 (default {default})")
    p.add_argument("--preset", default=None, choices=list(PRESETS),
                   help="a named configuration instead of --sampler: "
                        + "; ".join(f"{k}: {v.text}" for k, v in PRESETS.items()))
    p.set_defaults(default_sampler=default)


def add_presets_arg(p: argparse.ArgumentParser) -> None:
    """``--preset NAME ...`` on a bench: rows for named configurations, beside --samplers."""
    p.add_argument("--preset", nargs="+", default=[], choices=list(PRESETS), metavar="NAME",
                   help=f"add the rows of these presets ({', '.join(PRESETS)})")


def entry_from_args(args: argparse.Namespace):
    """The bench entry ``--sampler`` or ``--preset`` names (the default sampler when
    neither)."""
    if args.preset is not None:
        if args.sampler is not None:
            raise UnmaskError("--preset: give --sampler or --preset, not both")
        return preset_entry(args.preset)
    return sampler_entry(args.sampler or args.default_sampler)


def add_device_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="cpu",
                   help="torch device to run the model on (cpu, cuda, cuda:1, ...)")


def resolve_device(name: str):
    """The torch device ``--device`` names, or :class:`UnmaskError` saying why it cannot be
    used here."""
    from unmask.devices import check_device

    return check_device(name, "--device")


def sampler_entry(spec: str, flag: str = "--sampler"):
    """The :class:`~unmask.bench.BenchEntry` a sampler spec names, validated now; errors name
    ``flag``."""
    try:
        return BenchEntry.parse(spec)
    except (UnmaskError, TypeError, ValueError) as e:  # a value of the wrong type, too
        raise UnmaskError(f"{flag}: {spec!r}: {e}" if not isinstance(e, UnmaskError)
                          else f"{flag}: {e}") from None


def existing_dir(path: str | Path, what: str) -> Path:
    path = Path(path)
    if not path.is_dir():
        raise UnmaskError(f"{what}: {path} is not a directory")
    return path


def folder_problem(path: str | Path) -> str | None:
    """What keeps ``path`` from being a folder a command creates or fills (None: nothing): it
    must be a folder or not exist yet, and the nearest existing folder above it writable."""
    if str(path) == "":
        return "empty path"
    path = Path(path)
    if path.exists() and not path.is_dir():
        return f"{path} exists and is not a folder"
    above = next(p for p in (path, *path.parents) if p.exists())
    if not above.is_dir():
        return f"{above} is a file, not a folder"
    if not os.access(above, os.W_OK | os.X_OK):
        return f"folder {above} is not writable"
    return None


def output_folder(path: str | Path, what: str) -> Path:
    """``path`` checked as a folder the command will create or fill (before any work,
    :func:`folder_problem`); :class:`UnmaskError` ``"{what}: ..."`` otherwise."""
    problem = folder_problem(path)
    if problem:
        raise UnmaskError(f"{what}: {problem}")
    return Path(path)


def distinct_outputs(**paths: Path | None) -> None:
    """Refuse two output flags naming the same file (one would overwrite the other);
    keys are flag names with ``_`` for ``-`` (``json``, ``plot``)."""
    seen: dict[str, str] = {}
    for flag, path in paths.items():
        if path is None:
            continue
        key = os.path.normcase(os.path.abspath(path))
        if key in seen:
            raise UnmaskError(f"--{flag.replace('_', '-')}: same file as --{seen[key]} "
                              f"({path}); give two different paths")
        seen[key] = flag.replace("_", "-")




def add_resume_args(p: argparse.ArgumentParser) -> None:
    """``--resume`` and ``--override-config``, for every command that trains."""
    p.add_argument("--resume", action="store_true",
                   help="continue from OUT/checkpoint.pt (refused if it was written with other "
                        "training settings, unless --override-config)")
    p.add_argument("--override-config", action="store_true",
                   help="with --resume: go on with the training settings given now where they "
                        "differ from the checkpoint's (the differences are logged)")
    p.add_argument("--overwrite", action="store_true",
                   help="start afresh in an OUT that holds a run (its checkpoint and history "
                        "are replaced); without it or --resume such an OUT is refused")


def check_resume_args(args: argparse.Namespace) -> None:
    """--override-config only with --resume; an --out holding a run only with --resume or
    --overwrite (checked before any work)."""
    from unmask.training import check_run_folder

    if args.override_config and not args.resume:
        raise UnmaskError("--override-config: only with --resume")
    if args.resume and args.overwrite:
        raise UnmaskError("--overwrite: cannot be combined with --resume")
    check_run_folder(args.out, resume=args.resume, overwrite=args.overwrite)


def check_config_overrides(overrides: dict, flag: str) -> None:
    """Refuse keys that are not :class:`~unmask.models.transformer.TransformerConfig` fields
    and values of the wrong JSON type (``"d_model": "128"``); ranges are the config's to
    check."""
    problem = field_problem(TransformerConfig, overrides, partial=True)
    if problem is None:
        return
    if problem.kind == "unknown":
        raise UnmaskError(f"{flag}: unknown field {problem.key!r}; fields: "
                          f"{', '.join(field_hints(TransformerConfig))}")
    base = next((t for t in union_options(problem.hint) if t is not type(None)), problem.hint)
    value = overrides[problem.key]
    raise UnmaskError(f"{flag}: {problem.key} must be {getattr(base, '__name__', str(base))}, "
                      f"got {json_type(value)} {value!r}")


def bench_entries(specs: list[str] | None, defaults: list[str], estimator: str | None = None,
                  presets: list[str] = ()):
    """The :class:`~unmask.bench.BenchEntry` list of a bench command: ``specs`` (or the
    command's ``defaults`` when neither specs nor ``presets`` are given), each validated now,
    then the rows of ``presets``; ``estimator`` (a folder, from --estimator) is given to every
    ``mi-guided`` entry."""
    if specs is not None and not specs:
        raise UnmaskError("--samplers: no sampler spec given")
    entries = []
    for spec in specs or ([] if presets else defaults):
        entries.append(sampler_entry(spec, "--samplers"))
    entries += [preset_entry(name) for name in presets]
    if estimator:
        for e in entries:
            if e.name == "mi-guided":
                e.params["estimator"] = estimator
    return entries


def add_corrector_args(p: argparse.ArgumentParser) -> None:
    """The corrector's flags, for commands whose sampler specs may end in '+corrector'
    (defaults read from :func:`unmask.hooks.corrector_hooks`)."""
    p.add_argument("--corrector", default=None, metavar="PATH",
                   help="corrector folder for specs ending in '+corrector' (default: the "
                        "shipped one)")
    p.add_argument("--remask-threshold", type=finite_float(),
                   default=default_of(corrector_hooks, "threshold"),
                   help="with a corrector: remask decoded tokens it finds wrong with a "
                        "probability above this (default %(default)s)")
    p.add_argument("--max-remasks", type=non_negative_int,
                   default=default_of(corrector_hooks, "max_remasks"),
                   help="with a corrector: times one cell may be remasked (default "
                        "%(default)s)")
    p.add_argument("--ban-remasked", action="store_true",
                   help="with a corrector: a token it sent back is not proposed at that cell "
                        "again")


def corrector_recipe(args: argparse.Namespace, corrector) -> CorrectorRecipe | None:
    """How a worker rebuilds the corrector of :func:`corrector_from_args` (None without
    one)."""
    if corrector is None:
        return None
    return CorrectorRecipe(args.corrector, threshold=args.remask_threshold,
                           max_remasks=args.max_remasks, ban_remasked=args.ban_remasked)


def corrector_from_args(args: argparse.Namespace, model, corrected: bool):
    """(corrector or None, its decode hooks) for ``model``, from :func:`add_corrector_args`'
    flags; ``corrected``: whether any sampler spec ends in '+corrector' (a --corrector without
    one is refused)."""
    if not corrected:
        if args.corrector:
            raise UnmaskError("--corrector: no sampler spec ends in '+corrector'")
        return None, ()
    corrector = load_corrector(args.corrector, model=model)
    return corrector, corrector_hooks(corrector, threshold=args.remask_threshold,
                                      max_remasks=args.max_remasks,
                                      ban_remasked=args.ban_remasked)


def add_confidence_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--confidence", choices=CONFIDENCE, default="draw",
                   help="what confidence-type rules rank by when sampling: the drawn token's "
                        "probability (draw, default) or the largest probability (max)")


def temperatures_arg(text: str) -> tuple[float, ...]:
    """``--temperatures``: comma-separated numbers >= 0."""
    try:
        values = tuple(float(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise UnmaskError(f"--temperatures: expected comma-separated numbers, got {text!r}") \
            from None
    if not values or any(not (t >= 0 and math.isfinite(t)) for t in values):
        raise UnmaskError(f"--temperatures: expected finite numbers >= 0, got {text!r}")
    return values
