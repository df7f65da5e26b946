"""``unmask mi label``: ground-truth MI labels by perturbation probing, in resumable shards."""

from __future__ import annotations

import argparse

from unmask.commands.common import (
    add_device_arg,
    add_engine_args,
    add_seed_arg,
    engine_from_args,
    output_folder,
    positive_int,
    threads_int,
)
from unmask.commands.registry import arguments, command
from unmask.errors import UnmaskError
from unmask.mi.labels import task_names, write_labels
from unmask.recipe import model_recipe
from unmask.text.labels import text_options
from unmask.workers import worker_path


def parse_ratio_range(text: str) -> tuple[float, float]:
    """'LO:HI' -> (LO, HI) with 0 <= LO < HI <= 1."""
    try:
        lo, hi = (float(part) for part in text.split(":"))
    except ValueError:
        raise UnmaskError(f"--mask-ratio: expected LO:HI, got {text!r}") from None
    if not 0.0 <= lo < hi <= 1.0:
        raise UnmaskError(f"--mask-ratio: expected 0 <= LO < HI <= 1, got {text!r}")
    return lo, hi


def _label_args(p: argparse.ArgumentParser) -> None:

    p.add_argument("--model", default=None,
                   help="model folder or shipped name (default: the task's shipped model)")
    p.add_argument("--task", default="sudoku", choices=task_names(),
                   help="where contexts come from (default sudoku)")
    p.add_argument("--contexts", type=positive_int, required=True,
                   help="number of contexts to label")
    p.add_argument("--mask-ratio", default="0.05:1.0", metavar="LO:HI",
                   help="share of masked cells, uniform in [LO, HI) (default 0.05:1.0)")
    p.add_argument("--out", required=True, help="label folder (created; resumable)")
    p.add_argument("--shard-size", type=positive_int, default=256, help="contexts per shard")
    add_seed_arg(p, help="context seed (default 0)")
    # 1e-3 keeps the measured max |error| near 1e-3 nats (benchmarks/probe_mi.py), far below
    # what an estimator resolves, while skipping most probes of confident positions
    p.add_argument("--eps", type=float, default=1e-3,
                   help="skip probes with p_i(v) < EPS (default 1e-3; 0 = exact)")
    p.add_argument("--top-k", type=positive_int, default=None, metavar="K",
                   help="probe at most the K most likely tokens per masked position (default: "
                        "no cap); bounds a context's cost by 1 + |M| K at any vocabulary size")
    p.add_argument("--batch-size", type=positive_int, default=4096,
                   help="at most this many sequences per model call (fewer at large "
                        "vocabularies: a call holds at most 2^24 logits)")
    p.add_argument("--text", default=None, metavar="FILE",
                   help="--task text: the UTF-8 corpus contexts are cut from")
    p.add_argument("--length", type=positive_int, default=None, metavar="N",
                   help="--task text: context length in tokens, special tokens included "
                        "(default 64)")
    p.add_argument("--bf16", action="store_true", help="bf16 autocast inference (CPU)")
    p.add_argument("--trust-remote-code", action="store_true",
                   help="run modelling code shipped inside the model folder (only from there)")
    p.add_argument("--threads", type=threads_int, default=None, metavar="N",
                   help="CPU threads of torch and numba (per worker with --engine ray; "
                        "default: torch's default, which follows OMP_NUM_THREADS)")
    add_engine_args(p)
    add_device_arg(p)


@command("mi", "label", help="write ground-truth pairwise MI labels (perturbation probing)")
@arguments(_label_args)
def mi_label(args: argparse.Namespace) -> int:
    import math
    import time


    mask_ratio = parse_ratio_range(args.mask_ratio)
    if args.contexts < 1:
        raise UnmaskError(f"--contexts: must be >= 1, got {args.contexts}")
    if args.shard_size < 1:
        raise UnmaskError(f"--shard-size: must be >= 1, got {args.shard_size}")
    if not (math.isfinite(args.eps) and 0.0 <= args.eps < 1.0):
        raise UnmaskError(f"--eps: must be in [0, 1), got {args.eps}")
    if args.batch_size < 1:
        raise UnmaskError(f"--batch-size: must be >= 1, got {args.batch_size}")
    if args.task == "text":
        if args.text is None:
            raise UnmaskError("--text: the text task needs a corpus file (--text FILE)")
        options = text_options(args.text, 64 if args.length is None else args.length)
    else:
        for flag, value in (("--text", args.text), ("--length", args.length)):
            if value is not None:
                raise UnmaskError(f"{flag}: applies only to --task text")
        options = {}
    output_folder(args.out, "--out")
    engine, device = engine_from_args(args)
    # a Ray worker may run in another folder: it reads the model at its absolute path
    model_arg = args.model if args.engine == "local" else worker_path(args.model)
    model = model_recipe(args.task, model_arg, str(device), bool(args.bf16),
                         trust_remote_code=args.trust_remote_code)
    t0 = time.perf_counter()
    manifest = write_labels(model, args.out, contexts=args.contexts, task=args.task,
                            seed=args.seed, eps=args.eps, mask_ratio=mask_ratio,
                            shard_size=args.shard_size, batch_size=args.batch_size,
                            top_k=args.top_k, options=options, engine=engine,
                            log=lambda line: print(line, flush=True))
    print(f"{manifest['contexts']} contexts in {len(manifest['shards'])} shards at {args.out} "
          f"({time.perf_counter() - t0:.1f} s)")
    return 0
