"""Pieces shared by CLI subcommands: sampler options, model loading, progress bars."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from unmask.errors import UnmaskError
from unmask.samplers.base import make_sampler, parse_param_value


def add_sampler_args(p: argparse.ArgumentParser, default: str = "confidence") -> None:
    p.add_argument("--sampler", default=default, help=f"sampler name (default {default})")
    p.add_argument("--param", action="append", default=[], metavar="K=V",
                   help="sampler parameter, repeatable (e.g. --param k=3)")


def add_device_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="cpu",
                   help="torch device to run the model on (cpu, cuda, cuda:1, ...)")


def resolve_device(name: str):
    """The torch device ``--device`` names, or :class:`UnmaskError` saying why it cannot be
    used here."""
    import torch

    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise UnmaskError(f"--device: {name!r} is not a torch device (cpu, cuda, cuda:1, ...)"
                          ) from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise UnmaskError(f"--device: {name!r} asked for, but CUDA is not available here")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise UnmaskError(f"--device: {name!r} asked for, but this machine has "
                              f"{torch.cuda.device_count()} CUDA device(s)")
    elif device.type != "cpu":
        raise UnmaskError(f"--device: {name!r}: only cpu and cuda devices are supported")
    return device


def parse_params(items: list[str]) -> dict:
    params = {}
    for item in items:
        if "=" not in item:
            raise UnmaskError(f"--param: expected K=V, got {item!r}")
        k, v = item.split("=", 1)
        params[k.strip()] = parse_param_value(v.strip())
    return params


def sampler_from_args(args: argparse.Namespace):
    return make_sampler(args.sampler, **parse_params(args.param))


def existing_dir(path: str | Path, what: str) -> Path:
    path = Path(path)
    if not path.is_dir():
        raise UnmaskError(f"{what}: {path} is not a directory")
    return path


def output_path(path: str | Path, what: str) -> Path:
    path = Path(path)
    if not path.parent.is_dir():
        raise UnmaskError(f"{what}: folder {path.parent} does not exist")
    return path


@contextlib.contextmanager
def progress_bar(total: int, description: str, enabled: bool = True):
    """Yield update(completed) for a rich progress bar on stderr (no-op when disabled)."""
    if not enabled:
        yield lambda completed: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress("[progress.description]{task.description}", BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as prog:
        task = prog.add_task(description, total=total)
        yield lambda completed: prog.update(task, completed=completed)


def add_training_args(p: argparse.ArgumentParser, *, out: str, steps: int, batch_size: int,
                      lr: float, warmup: int, eval_every: int) -> None:
    """The flags every ``unmask train TASK`` shares, with the task's defaults."""
    p.add_argument("--out", default=out, help="run folder (checkpoints, best/)")
    add_resume_args(p)
    p.add_argument("--steps", type=int, default=steps, help="total optimiser steps")
    p.add_argument("--batch-size", type=int, default=batch_size)
    p.add_argument("--lr", type=float, default=lr)
    p.add_argument("--warmup", type=int, default=warmup)
    p.add_argument("--eval-every", type=int, default=eval_every)
    p.add_argument("--max-time", type=float, default=None, help="stop after this many seconds")
    p.add_argument("--decay-by-time", action="store_true",
                   help="with --max-time: the learning rate reaches its floor when either "
                        "--steps or --max-time (counted over resumes) runs out, for runs "
                        "whose speed is not known in advance")
    p.add_argument("--threads", type=int, default=None)
    add_device_arg(p)
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the weight initialisation and the training batches")
    p.add_argument("--model-config", default=None,
                   help="JSON object overriding the architecture (e.g. '{\"n_layers\": 6}')")
    p.add_argument("--no-bf16", action="store_true")


def add_resume_args(p: argparse.ArgumentParser) -> None:
    """``--resume`` and ``--override-config``, for every command that trains."""
    p.add_argument("--resume", action="store_true",
                   help="continue from OUT/checkpoint.pt (refused if it was written with other "
                        "training settings, unless --override-config)")
    p.add_argument("--override-config", action="store_true",
                   help="with --resume: go on with the training settings given now where they "
                        "differ from the checkpoint's (the differences are logged)")


def check_resume_args(args: argparse.Namespace) -> None:
    if args.override_config and not args.resume:
        raise UnmaskError("--override-config: only with --resume")


def training_setup(args: argparse.Namespace, **config) -> tuple[dict, object]:
    """Apply ``--threads`` and seed torch with ``--seed`` (the weight initialisation); return
    (architecture overrides from ``--model-config``, the
    :class:`~unmask.training.TrainConfig` the flags describe, plus ``config``)."""
    import json

    import torch

    from unmask.training import TrainConfig

    if args.threads:
        torch.set_num_threads(args.threads)
    resolve_device(args.device)
    check_resume_args(args)
    if args.decay_by_time and not args.max_time:
        raise UnmaskError("--decay-by-time: needs --max-time (the time budget to decay over)")
    try:
        overrides = json.loads(args.model_config) if args.model_config else {}
    except json.JSONDecodeError as e:
        raise UnmaskError(f"--model-config: not a JSON object ({e.msg})") from None
    if not isinstance(overrides, dict):
        raise UnmaskError("--model-config: not a JSON object")
    cfg = TrainConfig(batch_size=args.batch_size, lr=args.lr, warmup_steps=args.warmup,
                      total_steps=args.steps, eval_every=args.eval_every,
                      max_time_s=args.max_time, decay_by_time=args.decay_by_time,
                      seed=args.seed, device=args.device,
                      bf16=not args.no_bf16, **config)
    torch.manual_seed(args.seed)
    return overrides, cfg


def bench_entries(specs: list[str] | None, defaults: list[str], estimator: str | None = None):
    """The :class:`~unmask.bench.BenchEntry` list of a bench command: ``specs`` (or the
    command's ``defaults``), each validated now; ``estimator`` (a folder, from --estimator) is
    given to every ``mi-guided`` entry."""
    from unmask.bench import BenchEntry

    entries = [BenchEntry.parse(s) for s in (specs or defaults)]
    if estimator:
        for e in entries:
            if e.name == "mi-guided":
                e.params["estimator"] = estimator
    return entries
