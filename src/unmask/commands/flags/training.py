"""The flags every ``unmask TASK train`` of an MDM shares, and the
:class:`~unmask.training.loop.TrainConfig` they describe: one place for both (the library is
imported when the flags are read, not when they are added)."""

from __future__ import annotations

import argparse
import json

from unmask.commands.flags.engine import add_device_arg, resolve_device
from unmask.commands.flags.paths import (
    TRAINING_RUN_FILES,
    claim_folder,
    command_name,
    holds_nothing,
    mark_folder,
)
from unmask.commands.flags.threads import add_threads_arg
from unmask.commands.flags.types import (
    add_seed_arg,
    finite_float,
    non_negative_int,
    positive_int,
)
from unmask.errors import UnmaskError
from unmask.validation import field_hints, field_problem, json_type, union_options

#: the loop settings no flag sets: the floor of the cosine, gradient clipping, the seconds
#: between checkpoints (the MDM trainers select the weights of the highest metric)
FIXED_LOOP = {"min_lr": 5e-5, "grad_clip": 1.0, "checkpoint_every_s": 300.0,
              "higher_is_better": True}


def add_training_args(p: argparse.ArgumentParser, *, out: str, steps: int, batch_size: int,
                      lr: float, warmup: int, eval_every: int, max_time: float | None = None,
                      decay_by_time: bool | None = None, architecture: bool = True,
                      device: bool = True) -> None:
    """The shared training flags, with the task's defaults.

    decay_by_time: None gives the ``--decay-by-time`` flag; True decays by time always (a
        task whose runs are sized by their time budget, ``max_time``).
    architecture, device: whether the task takes ``--model-config`` and ``--device``.
    """
    p.add_argument("--out", default=out, help=f"run folder (checkpoints, best/; default {out})")
    add_resume_args(p)
    p.add_argument("--steps", type=positive_int, default=steps,
                   help=f"total optimiser steps (default {steps})")
    p.add_argument("--batch-size", type=positive_int, default=batch_size)
    p.add_argument("--lr", type=finite_float(0.0, open_low=True), default=lr)
    p.add_argument("--warmup", type=non_negative_int, default=warmup)
    p.add_argument("--eval-every", type=positive_int, default=eval_every)
    if decay_by_time is None:
        p.add_argument("--max-time", type=finite_float(0.0, open_low=True), default=max_time,
                       help="stop after this many seconds")
        p.add_argument("--decay-by-time", action="store_true",
                       help="with --max-time: the learning rate reaches its floor when either "
                            "--steps or --max-time (counted over resumes) runs out, for runs "
                            "whose speed is not known in advance")
    else:
        p.add_argument("--max-time", type=finite_float(0.0, open_low=True), default=max_time,
                       help="seconds of training over all resumes; the learning rate decays "
                            "over whichever budget, steps or time, runs out first (default "
                            f"{max_time:g})")
        p.set_defaults(decay_by_time=decay_by_time)
    add_threads_arg(p)
    if device:
        add_device_arg(p)
    add_seed_arg(p, help="seed of the weight initialisation and the training batches "
                          "(default 0)")
    if architecture:
        p.add_argument("--model-config", default=None,
                       help="JSON object overriding the architecture (e.g. '{\"n_layers\": 6}')")
    p.add_argument("--no-bf16", action="store_true")


def training_config(args: argparse.Namespace, metric: str = "accuracy"):
    """The :class:`~unmask.training.loop.TrainConfig` the flags of :func:`add_training_args`
    describe, selecting the weights of the highest ``metric``."""
    from unmask.training.loop import LoopConfig, TrainConfig

    if args.decay_by_time and not args.max_time:
        raise UnmaskError("--decay-by-time: needs --max-time (the time budget to decay over)")
    loop = LoopConfig(total_steps=args.steps, lr=args.lr, warmup_steps=args.warmup,
                      eval_every=args.eval_every, metric=metric, max_time_s=args.max_time,
                      decay_by_time=args.decay_by_time, batch_size=args.batch_size,
                      **FIXED_LOOP)
    return TrainConfig(loop=loop, seed=args.seed, device=getattr(args, "device", "cpu"),
                       bf16=not args.no_bf16)


def training_setup(args: argparse.Namespace, metric: str = "accuracy"
                   ) -> tuple[dict, object]:
    """Check the run folder and the flags, seed torch with ``--seed`` (the weight
    initialisation); return (architecture overrides from ``--model-config``, the
    :class:`TrainConfig` of :func:`training_config`)."""
    import torch

    from unmask.io import parse_json

    claim_folder(args.out, "--out", command_name(args), overwrite=args.overwrite,
                 own_files=TRAINING_RUN_FILES)
    # a folder holding nothing yet is marked at once, so a run stopped before its first
    # checkpoint (after writing a cache of its own there) is still this command's; a folder
    # that holds a run is left untouched here (resuming or overwriting it is the loop's)
    if holds_nothing(args.out):
        mark_folder(args.out, command_name(args))
    if getattr(args, "device", None) is not None:
        resolve_device(args.device)
    check_resume_args(args)
    cfg = training_config(args, metric)
    text = getattr(args, "model_config", None)
    try:
        overrides = parse_json(text) if text else {}
    except json.JSONDecodeError as e:
        raise UnmaskError(f"--model-config: not a JSON object ({e.msg})") from None
    if not isinstance(overrides, dict):
        raise UnmaskError("--model-config: not a JSON object")
    check_config_overrides(overrides, "--model-config")
    torch.manual_seed(args.seed)
    return overrides, cfg


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
    from unmask.training.loop import check_run_folder

    if args.override_config and not args.resume:
        raise UnmaskError("--override-config: only with --resume")
    if args.resume and args.overwrite:
        raise UnmaskError("--overwrite: cannot be combined with --resume")
    check_run_folder(args.out, resume=args.resume, overwrite=args.overwrite)


def check_config_overrides(overrides: dict, flag: str) -> None:
    """Refuse keys that are not :class:`~unmask.models.transformer.TransformerConfig` fields
    and values of the wrong JSON type (``"d_model": "128"``); ranges are the config's to
    check."""
    from unmask.models.transformer import TransformerConfig

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
