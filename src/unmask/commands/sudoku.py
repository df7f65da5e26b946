"""``unmask sudoku solve`` and ``unmask sudoku bench``: Sudoku puzzles decoded with any sampler."""

from __future__ import annotations

import argparse
import json
import sys
import time

from unmask.commands.arg_types import add_seed_arg, default_of
from unmask.commands.bench_command import bench_arguments, bench_task, run_bench
from unmask.commands.corrector_flags import add_corrector_args, corrector_from_args
from unmask.commands.registry import arguments, command
from unmask.commands.sampler_flags import add_sampler_arg, entry_from_args
from unmask.commands.threads import add_threads_arg
from unmask.decode import DecodeConfig
from unmask.errors import UnmaskError
from unmask.models.auto import check_task, load_model
from unmask.progress import progress_bar
from unmask.sudoku.mdm_solver import solve_batches
from unmask.sudoku.parse import SudokuParseError, format_grid, parse_puzzle, read_puzzles, to_string
from unmask.validation import finite_float, positive_int


def _solve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("puzzles", nargs="*", metavar="PUZZLE",
                   help="81 characters, digits with 0 or . for blanks")
    p.add_argument("--file", metavar="PATH",
                   help="a UTF-8 file of puzzles, one per line (or 9-line grids); - reads "
                        "standard input")
    add_sampler_arg(p)
    p.add_argument("--model", default=None,
                   help="shipped model name or model folder (default: the shipped one)")
    p.add_argument("--temperature", type=finite_float(0.0),
                   default=default_of(DecodeConfig, "temperature"),
                   help="token temperature (default %(default)s: the argmax)")
    add_seed_arg(p)
    p.add_argument("--batch-size", type=positive_int, default=500,
                   help="puzzles per decode call; results are printed batch by batch "
                        "(default %(default)s)")
    add_corrector_args(p)
    add_threads_arg(p)
    p.add_argument("--json", action="store_true",
                   help="one JSON object per puzzle per line, written as each batch finishes")


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


@command("sudoku", "solve", help="solve Sudoku puzzles with the MDM and a sampler")
@arguments(_solve_args)
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


@command("sudoku", "bench", help="solved %% vs forward passes for every sampler on Sudoku")
@arguments(bench_arguments("sudoku"))
def bench_sudoku(args: argparse.Namespace) -> int:
    return run_bench(bench_task("sudoku"), args)
