"""``unmask sudoku solve``: decode Sudoku puzzles with any sampler."""

from __future__ import annotations

import argparse
import json
import sys
import time

from unmask.cli import arguments, command
from unmask.commands.common import add_sampler_args, progress_bar, sampler_from_args
from unmask.errors import UnmaskError


def _solve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("puzzles", nargs="*", metavar="PUZZLE",
                   help="81 characters, digits with 0 or . for blanks")
    p.add_argument("--file", help="a file of puzzles, one per line (or 9-line grids)")
    add_sampler_args(p)
    p.add_argument("--model", default=None, help="model folder (default: the shipped one)")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=500)
    p.add_argument("--corrector", nargs="?", const="sudoku_corrector", default=None,
                   metavar="PATH",
                   help="take back the decoded digits a corrector finds wrong (no PATH: the "
                        "shipped one); costs a few passes")
    p.add_argument("--remask-threshold", type=float, default=0.3,
                   help="with --corrector: remask digits it finds wrong with a probability "
                        "above this (default 0.3)")
    p.add_argument("--verify", action="store_true",
                   help="verify every pass's set against sequential decoding in one batched "
                        "call (same passes; more sequences per pass); not with --corrector")
    p.add_argument("--verify-tolerance", type=float, default=None, metavar="T",
                   help="with --verify: also hold the order to sequential decoding's, accepting "
                        "a position only within T of the surest one's confidence (0: exactly "
                        "sequential decoding's output; default 1: tokens only)")
    p.add_argument("--json", action="store_true", help="one JSON object per puzzle per line")


def solve_puzzles(model, puzzles, sampler, *, temperature=0.0, seed=0, batch_size=500,
                  show_progress=False, corrector=None, remask_threshold=0.3, verify=False,
                  verify_tolerance=1.0):
    """Decode puzzles (P, 81) int8 -> (grids (P, 81) int8, solved (P,), nfe (P,)), with an
    optional corrector (:func:`unmask.hooks.corrector_hooks`) or verification
    (:class:`unmask.samplers.verified.Verified`)."""
    import numpy as np

    from unmask.decode import DecodeConfig, decode
    from unmask.hooks import corrector_hooks
    from unmask.samplers.verified import Verified
    from unmask.sudoku import grid_to_tokens, is_valid_solution, tokens_to_grid

    cfg = DecodeConfig(temperature=temperature)
    if verify:
        sampler = Verified(sampler, tolerance=verify_tolerance)
    hooks = (() if corrector is None
             else corrector_hooks(corrector, threshold=remask_threshold))
    grids, nfe = [], []
    with progress_bar(len(puzzles), "solving", enabled=show_progress) as update:
        for i in range(0, len(puzzles), batch_size):
            chunk = puzzles[i:i + batch_size]
            res = decode(model, grid_to_tokens(chunk), sampler, cfg, seed=seed + i,
                         hooks=hooks)
            grids.append(tokens_to_grid(res.tokens))
            nfe.append(res.nfe.numpy())
            update(i + len(chunk))
    grids_all = np.concatenate(grids) if grids else np.zeros((0, 81), np.int8)
    return grids_all, is_valid_solution(grids_all, puzzles), np.concatenate(nfe) if nfe else []


@command("sudoku", "solve", help="solve Sudoku puzzles with the MDM and a sampler")
@arguments(_solve_args)
def solve(args: argparse.Namespace) -> int:
    import numpy as np

    from unmask.models.auto import load_model
    from unmask.sudoku.parse import format_grid, parse_puzzle, read_puzzles, to_string

    if args.batch_size < 1:
        raise UnmaskError(f"--batch-size: must be >= 1, got {args.batch_size}")
    if args.verify_tolerance is not None and not args.verify:
        raise UnmaskError("--verify-tolerance: only with --verify")
    if args.verify and args.corrector:
        raise UnmaskError("--verify, --corrector: choose one (the corrector may change the "
                          "state after a verified pass)")
    sampler = sampler_from_args(args)
    items = [parse_puzzle(p) for p in args.puzzles]
    if args.file:
        items.extend(read_puzzles(args.file))
    if not items:
        raise UnmaskError("no puzzle given: pass PUZZLE arguments or --file")
    puzzles = np.stack(items).astype(np.int8)
    model = load_model(args.model, task="sudoku")
    model.autocast_bf16 = False
    corrector = None
    if args.corrector:
        from unmask.corrector import load_corrector

        corrector = load_corrector(args.corrector, model=model)
    t0 = time.perf_counter()
    grids, solved, nfe = solve_puzzles(model, puzzles, sampler, temperature=args.temperature,
                                       seed=args.seed, batch_size=args.batch_size,
                                       show_progress=not args.json and len(puzzles) > 50,
                                       corrector=corrector,
                                       remask_threshold=args.remask_threshold,
                                       verify=args.verify,
                                       verify_tolerance=(1.0 if args.verify_tolerance is None
                                                         else args.verify_tolerance))
    wall = time.perf_counter() - t0
    if args.json:
        for p, g, s, n in zip(puzzles, grids, solved, nfe, strict=True):
            print(json.dumps({"puzzle": to_string(p), "grid": to_string(g), "solved": bool(s),
                              "nfe": int(n)}))
        return 0
    out = sys.stdout
    if len(puzzles) <= 10:
        for k, (g, s, n) in enumerate(zip(grids, solved, nfe, strict=True)):
            out.write(f"puzzle {k + 1}: {'solved' if s else 'NOT solved'} in {int(n)} passes\n")
            out.write(format_grid(g) + "\n\n")
    out.write(f"{int(solved.sum())}/{len(puzzles)} solved ({100 * solved.mean():.1f}%), "
              f"mean {np.mean(nfe):.1f} forward passes, {wall:.2f} s "
              f"({len(puzzles) / wall:.1f} puzzles/s), sampler {sampler.name}\n")
    return 0
