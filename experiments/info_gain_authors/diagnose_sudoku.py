"""Where Info-Gain with its authors' settings goes wrong on Sudoku: in the block bypass's
greedy fill, or in the searched steps before it.

On the hard puzzles that ``results_sudoku.jsonl`` records as solved by only one of confidence
and info-gain-authors (the paired difference), decodes again (same per-puzzle seeds) with
info-gain-authors, with the same without its bypass, and with confidence; for each decode
reports how many puzzles are solved and, of the failed ones, how many have a wrong cell
written by the bypass's fill (the last step of a row whose ``stats['bypassed']`` is 1: with
one block the fill completes the puzzle) and how many only in searched steps. Writes
``diagnose_sudoku.json``.

    OMP_NUM_THREADS=1 nice -n 10 python experiments/info_gain_authors/diagnose_sudoku.py
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from unmask.decode import DecodeConfig, decode
from unmask.models.auto import load_model
from unmask.presets import preset_spec
from unmask.samplers.spec import parse_spec
from unmask.sudoku.datasets import load_set
from unmask.sudoku.tokens import grid_to_tokens, tokens_to_grid

HERE = Path(__file__).resolve().parent
SPECS = {"info-gain-authors": preset_spec("info-gain-authors"),
         "info-gain-authors without bypass": preset_spec("info-gain-authors").replace(
             "bypass=0.8,", ""),
         "confidence": "confidence"}


def main():
    torch.set_num_threads(1)
    rows = {r["sampler"]: r for r in map(json.loads, (HERE / "results_sudoku.jsonl").open())}
    conf, ig = rows["confidence"]["correct"], rows["info-gain-authors"]["correct"]
    subset = [i for i, (a, b) in enumerate(zip(conf, ig, strict=True)) if a != b]
    puzzles, solutions = load_set("hard")
    x = grid_to_tokens(puzzles[subset])
    truth = grid_to_tokens(solutions[subset])
    model = load_model("sudoku")
    out = {"puzzles": subset, "rows": []}
    for label, spec in SPECS.items():
        t0 = time.perf_counter()
        res = decode(model, x, parse_spec(spec).build(), DecodeConfig(),
                     seed=torch.tensor(subset))
        wall = time.perf_counter() - t0
        wrong = (res.tokens != truth) & (x == model.mask_id)
        failed = wrong.any(1)
        bypassed = res.stats.get("bypassed", torch.zeros(len(subset), dtype=torch.long))
        filled = (res.reveal_step == (res.steps - 1)[:, None]) & (bypassed[:, None] > 0)
        grids_ok = torch.from_numpy((tokens_to_grid(res.tokens) == solutions[subset]).all(1))
        row = {"sampler": label, "spec": spec, "n": len(subset),
               "solved": int((~failed).sum()), "solved_check": int(grids_ok.sum()),
               "failed": int(failed.sum()),
               "failed_with_a_wrong_bypass_cell": int((failed & (wrong & filled).any(1)).sum()),
               "failed_only_in_searched_steps": int((failed & ~(wrong & filled).any(1)).sum()),
               "cells_filled_by_bypass_mean": float(filled.sum(1).double().mean()),
               "nfe": float(res.nfe.double().mean()),
               "sequences": float(res.sequences.double().mean()), "wall_s": wall}
        out["rows"].append(row)
        print(json.dumps(row), flush=True)
    (HERE / "diagnose_sudoku.json").write_text(json.dumps(out, indent=1) + "\n")




def first_errors():
    """On the puzzles info-gain-authors loses to confidence: the step that first writes a
    wrong cell, whether its winner was the greedy (most confident) candidate, and the winner's
    cost C and next-state mean entropy against the greedy candidate's. Adds ``first_errors``
    to ``diagnose_sudoku.json``."""
    torch.set_num_threads(1)
    rows = {r["sampler"]: r for r in map(json.loads, (HERE / "results_sudoku.jsonl").open())}
    conf, ig = rows["confidence"]["correct"], rows["info-gain-authors"]["correct"]
    lost = [i for i, (a, b) in enumerate(zip(conf, ig, strict=True)) if a == "1" and b == "0"]
    puzzles, solutions = load_set("hard")
    x, truth = grid_to_tokens(puzzles[lost]), grid_to_tokens(solutions[lost])
    sampler = parse_spec(SPECS["info-gain-authors"]).build()
    steps, score = [], sampler.score

    def recording(state):
        step = score(state)
        steps.append((state.row_ids.clone(), step))
        return step

    sampler.score = recording
    decode(load_model("sudoku"), x, sampler, DecodeConfig(), seed=torch.tensor(lost))
    found, out = set(), []
    for rows_, step in steps:
        c = step.candidates
        w = step.winner
        idx = torch.arange(len(rows_))
        reveal = c.reveal[idx, w]
        wrong = (reveal & (c.tokens[idx, w] != truth[rows_])).any(1)
        for j in wrong.nonzero().flatten().tolist():
            r = int(rows_[j])
            if r in found:
                continue
            found.add(r)
            out.append({"puzzle": lost[r], "bypass": bool(step.bypass[j]),
                        "winner_is_greedy": int(w[j]) == 0,
                        "winner_cost": float(c.cost[j, w[j]]),
                        "greedy_cost": float(c.cost[j, 0]),
                        "winner_hbar_next": float(step.hbar_next[j, w[j]]),
                        "greedy_hbar_next": float(step.hbar_next[j, 0]),
                        "greedy_cell_right": bool((c.tokens[j, 0] == truth[r])[c.reveal[j, 0]]
                                                  .all())})
    path = HERE / "diagnose_sudoku.json"
    data = json.loads(path.read_text())
    data["first_errors"] = out
    path.write_text(json.dumps(data, indent=1) + "\n")
    n = len(out)
    print(f"{n} lost puzzles: first wrong cell by the bypass {sum(o['bypass'] for o in out)}, "
          f"by a non-greedy winner {sum(not o['winner_is_greedy'] for o in out)} (the greedy "
          f"cell right in {sum(o['greedy_cell_right'] and not o['winner_is_greedy'] for o in out)}"
          f"), winner's Hbar(next) below the greedy's in "
          f"{sum(o['winner_hbar_next'] < o['greedy_hbar_next'] for o in out)}, winner's C above "
          f"in {sum(o['winner_cost'] > o['greedy_cost'] for o in out)}")


if __name__ == "__main__":
    import sys

    first_errors() if sys.argv[1:] == ["first-errors"] else main()
