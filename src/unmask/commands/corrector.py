"""``unmask corrector train``: the head that finds wrong decoded tokens (Sudoku model)."""

from __future__ import annotations

import argparse
from pathlib import Path

from unmask.commands.flags.corrector import DEFAULT_STATE_SAMPLERS
from unmask.commands.flags.paths import TRAINING_RUN_FILES, claim_folder, command_name
from unmask.commands.flags.sampler import bench_entries
from unmask.commands.flags.training import check_resume_args
from unmask.commands.registry import command
from unmask.corrector import (
    Corrector,
    CorrectorConfig,
    CorrectorTrainConfig,
    compute_corrector_features,
    decoded_states,
    load_decoded_states,
    save_decoded_states,
    train_corrector,
)
from unmask.errors import UnmaskError
from unmask.models.auto import check_task, load_model
from unmask.pretrained import describe_source
from unmask.progress import progress_bar
from unmask.sudoku.tokens import grid_to_tokens
from unmask.sudoku.train import SudokuPool


@command("corrector", "train")
def train_corrector_cmd(args: argparse.Namespace) -> int:
    import time

    import torch

    check_resume_args(args)
    if args.puzzles < 10:
        raise UnmaskError(f"--puzzles: need at least 10, got {args.puzzles}")
    claim_folder(args.out, "--out", command_name(args), overwrite=args.overwrite,
                 own_files=(*TRAINING_RUN_FILES, "states.pt"))
    specs = bench_entries(args.samplers, DEFAULT_STATE_SAMPLERS)
    model = load_model(args.model or "sudoku", task="sudoku")
    # the corrector is trained on Sudoku states (known answers)
    check_task(model, "sudoku", args.model or "sudoku", required=True)
    cfg = CorrectorTrainConfig(batch_size=args.batch_size, lr=args.lr, max_epochs=args.epochs,
                               patience=args.patience, held_out=args.held_out, seed=args.seed,
                               max_time_s=args.max_time)
    torch.manual_seed(args.seed)
    corrector = Corrector(CorrectorConfig.for_model(model, d=args.d, layers=args.layers))
    t0 = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # the decoded states are the slow part: kept in OUT, reused by a rerun with the same data
    key = {"model": model.fingerprint(), "puzzles": args.puzzles, "pool_seed": args.pool_seed,
           "samplers": [e.label for e in specs]}
    cache = out / "states.pt"
    saved_key, states = None, None
    if cache.is_file():
        try:
            saved_key, states = load_decoded_states(cache)
        except UnmaskError as e:
            print(f"decoded states: {e}; decoding anew", flush=True)
    if saved_key == key:
        print(f"decoded states: reused {cache}", flush=True)
    else:
        pool = SudokuPool.generate(args.puzzles, seed=args.pool_seed)
        with progress_bar(args.puzzles, "decoding") as update:
            states = decoded_states(model, grid_to_tokens(pool.puzzles),
                                    grid_to_tokens(pool.solutions),
                                    [(e.name, e.params) for e in specs], progress=update)
        save_decoded_states(cache, key, states)
    with progress_bar(len(states.tokens), "features") as update:
        feats = compute_corrector_features(model, corrector, states.tokens, progress=update)
    print(f"{len(states.tokens):,} states of {args.puzzles:,} puzzles "
          f"({int(states.wrong.sum()):,} wrong of {int(states.decoded.sum()):,} decoded "
          f"tokens) in {time.perf_counter() - t0:.0f} s; corrector "
          f"{sum(p.numel() for p in corrector.parameters()):,} parameters", flush=True)
    cfg.extra = {"model": describe_source(model.source),
                 "data": {"puzzles": args.puzzles, "pool_seed": args.pool_seed,
                          "samplers": [e.label for e in specs], "states": len(states.tokens)}}
    res = train_corrector(corrector, feats, states, cfg, args.out,
                          log=lambda s: print(s, flush=True), resume=args.resume,
                              overwrite=args.overwrite,
                          override=args.override_config, data=key)
    print(f"best epoch {res['best_epoch']}: held-out loss {res['held_out_loss']:.4f}, AUC "
          f"{res['auc']:.3f}; at 0.5: precision {res['precision']:.3f}, recall "
          f"{res['recall']:.3f} ({res['wrong']:,} wrong of {res['positions']:,} decoded); "
          f"corrector: {args.out}/best ({time.perf_counter() - t0:.0f} s)")
    return 0
