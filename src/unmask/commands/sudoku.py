"""``unmask sudoku solve``, ``bench`` and ``train``: Sudoku puzzles decoded with any sampler,
the samplers benchmarked, the Sudoku MDM trained (checkpoints, --resume)."""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from pathlib import Path

from unmask.commands.flags.bench import bench_task, run_bench_command
from unmask.commands.flags.corrector import corrector_from_args
from unmask.commands.flags.sampler import entry_from_args
from unmask.commands.flags.training import training_setup
from unmask.commands.registry import command
from unmask.decode import DecodeConfig
from unmask.errors import UnmaskError
from unmask.models.auto import check_task, load_model
from unmask.models.files import read_json_object
from unmask.models.transformer import MDMTransformer
from unmask.pretrained import describe_source
from unmask.progress import progress_bar
from unmask.sudoku.datasets import load_set
from unmask.sudoku.mdm_solver import solve_batches
from unmask.sudoku.parse import SudokuParseError, format_grid, parse_puzzle, read_puzzles, to_string
from unmask.sudoku.train import (
    DecoderStatePool,
    SudokuPool,
    mixed_batch,
    solve_rate,
    sudoku_model_config,
)
from unmask.training.mdm import train


def read_puzzle_args(texts: list[str], file: str | None):
    """(P, 81) int8: the PUZZLE arguments then the puzzles of ``file`` (``-``: standard
    input); a bad one is named by its argument position or its file and line."""
    import numpy as np

    items = []
    for k, text in enumerate(texts, start=1):
        try:
            items.append(parse_puzzle(text))
        except SudokuParseError as e:
            raise UnmaskError(f"PUZZLE {k}: {e}" if len(texts) > 1 else f"PUZZLE: {e}"
                              ) from None
    if file is not None:
        items.extend(read_puzzles(file))
    if not items:
        raise UnmaskError("no puzzle given: pass PUZZLE arguments or --file")
    return np.stack(items).astype(np.int8)


@command("sudoku", "solve")
def solve(args: argparse.Namespace) -> int:
    import numpy as np

    entry = entry_from_args(args)
    config = DecodeConfig(temperature=args.temperature)
    puzzles = read_puzzle_args(args.puzzles, args.file)
    model = load_model(args.model, task="sudoku")
    check_task(model, "sudoku", args.model or "sudoku", required=True)
    model.autocast_bf16 = False
    _, hooks = corrector_from_args(args, model, entry.corrected)
    sampler = entry.build()
    out = sys.stdout
    pictures = len(puzzles) <= 10 and not args.json
    done, solved_n, nfe_sum = 0, 0, 0
    t0 = time.perf_counter()
    try:
        with progress_bar(len(puzzles), "solving",
                          enabled=not args.json and len(puzzles) > 50) as update:
            for i, grids, solved, nfe in solve_batches(model, puzzles, sampler, config,
                                                       seed=args.seed,
                                                       batch_size=args.batch_size,
                                                       hooks=hooks):
                for k, (g, s, n) in enumerate(zip(grids, solved, nfe, strict=True)):
                    if args.json:
                        out.write(json.dumps({"puzzle": to_string(puzzles[i + k]),
                                              "grid": to_string(g), "solved": bool(s),
                                              "nfe": int(n)}) + "\n")
                    elif pictures:
                        out.write(f"puzzle {i + k + 1}: {'solved' if s else 'NOT solved'} in "
                                  f"{int(n)} passes\n{format_grid(g)}\n\n")
                out.flush()  # each finished batch is out before the next one starts
                done += len(grids)
                solved_n += int(np.sum(solved))
                nfe_sum += int(np.sum(nfe))
                update(done)
    except KeyboardInterrupt:
        print(f"interrupted: {done} of {len(puzzles)} puzzles finished and written",
              file=sys.stderr)
        return 130
    if not args.json:
        wall = time.perf_counter() - t0
        out.write(f"{solved_n}/{done} solved ({100 * solved_n / done:.1f}%), "
                  f"mean {nfe_sum / done:.1f} forward passes, {wall:.2f} s "
                  f"({done / wall:.1f} puzzles/s), sampler {entry.label}\n")
    return 0


@command("sudoku", "bench")
def bench_sudoku(args: argparse.Namespace) -> int:
    return run_bench_command(bench_task("sudoku"), args)


def _initial_model(args: argparse.Namespace, overrides: dict):
    """(model, origin): a fresh Sudoku MDM, or with --init-from the parent's weights (deepened,
    with a self-conditioning map) and what it was grown from."""

    if not args.init_from:
        if args.self_condition:
            overrides = {**overrides, "self_condition": True}
        return MDMTransformer(sudoku_model_config(**overrides)), {}
    parent = load_model(args.init_from, task="sudoku")
    # the parent's own origin goes along, so a chain of fine-tunes stays readable
    parent_origin = read_json_object(Path(parent.source) / "config.json").get("origin")
    origin = {"init_from": {"model": describe_source(parent.source),
                            "fingerprint": parent.fingerprint(),
                            **({"origin": parent_origin} if parent_origin else {})}}
    if args.deepen > 1:
        origin["deepen"] = args.deepen
    model = parent.deepened(args.deepen)
    if args.self_condition:
        origin["self_condition"] = True
        model = model.with_self_conditioning()
    return model, origin


@command("sudoku", "train")
def train_sudoku(args: argparse.Namespace) -> int:

    overrides, cfg = training_setup(args)
    if args.init_from and args.resume:
        raise UnmaskError("--init-from: cannot be combined with --resume")
    if args.init_from and overrides:
        raise UnmaskError("--model-config: the architecture comes from --init-from")
    if args.deepen < 1:
        raise UnmaskError(f"--deepen: must be >= 1, got {args.deepen}")
    if args.deepen > 1 and not args.init_from:
        raise UnmaskError("--deepen: needs --init-from (the model whose layers it copies)")
    if not 0.0 < args.states_fraction <= 1.0:
        raise UnmaskError(f"--states-fraction: must be in (0, 1], got {args.states_fraction}")
    states = None
    if args.decoder_states:
        try:
            states = DecoderStatePool.load(args.decoder_states)
        except (pickle.UnpicklingError, EOFError, ValueError) as e:
            if isinstance(e, UnmaskError):
                raise
            raise UnmaskError(f"--decoder-states: {args.decoder_states} is not a states file "
                              f"of `unmask corrector train` ({type(e).__name__})") from None
    model, origin = _initial_model(args, overrides)
    out = Path(args.out)
    print(f"generating {args.pool:,} training puzzles (cached under {out})", flush=True)
    pool = SudokuPool.generate(args.pool, seed=1000 + args.seed, cache_dir=out / "cache")
    eval_set = load_set("hard")[0][: args.eval_puzzles]

    def evaluate(m):
        m.autocast_bf16 = False
        res = solve_rate(m, eval_set)
        return {"accuracy": res["accuracy"], "eval_nfe": res["nfe"]}

    print(f"model: {sum(p.numel() for p in model.parameters()):,} parameters", flush=True)
    def report(step, loss):
        if step % 100 == 0:
            print(f"step {step} loss {loss:.4f}", flush=True)

    def batch(step, bs):
        return pool.batch(step, bs, seed=args.seed, puzzle_fraction=args.puzzle_fraction)

    if states is not None:
        print(f"decoder states: {len(states.states):,} from {args.decoder_states}, "
              f"{args.states_fraction:.0%} of each batch", flush=True)
        origin["decoder_states"] = {"file": str(args.decoder_states),
                                    "states": len(states.states),
                                    "fraction": args.states_fraction}
        batch = mixed_batch(batch, lambda step, bs: states.batch(step, bs, seed=args.seed),
                            args.states_fraction)
    data = {"pool": args.pool, "puzzle_fraction": args.puzzle_fraction,
            "eval_puzzles": args.eval_puzzles,
            "decoder_states": str(args.decoder_states) if states is not None else None,
            "states_fraction": args.states_fraction if states is not None else None}
    train(model, batch, cfg, out, evaluate, resume=args.resume, overwrite=args.overwrite,
          override=args.override_config,
          log=lambda s: print(s, flush=True), progress=report, origin=origin or None,
          data=data)
    print(f"best weights: {out / 'best'}")
    return 0
