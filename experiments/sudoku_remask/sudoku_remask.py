"""Where do failing Sudoku boards go wrong, and would re-masking fix them?

Decodes the first N hard puzzles with one sampler, recording the confidence p_i(x_i) at which
each cell was revealed. Against the known solutions it prints, for the failed boards, the pass
of the first wrong commit, the confidence it was made at (the largest among the wrong cells of
that pass; quantiles over boards) and how many cells end up wrong, and whether that commit was
the head of its pass (the most confident cell revealed in it, which a sequential decoder would
also have revealed) or a rider taken beside the head. Then, for each threshold
tau, masks again every decoded cell revealed below tau and decodes those cells a second time
(the rest of the board as context) with a second sampler. Prints solved % and total passes of
both stages, and how many boards the second stage fixed and broke. If low-confidence commits
were the errors and the finished board could correct them, the second stage would fix boards.

    PYTHONPATH=src .venv/bin/python experiments/sudoku_remask/sudoku_remask.py --limit 200 \\
        --first mi-guided:gamma=1.0,order=confidence --second eb:gamma=0.3,order=confidence
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from unmask.decode import decode
from unmask.models.auto import load_model
from unmask.samplers.spec import SamplerSpec
from unmask.sudoku.datasets import load_set
from unmask.sudoku.solver import is_valid_solution
from unmask.sudoku.tokens import grid_to_tokens, tokens_to_grid


class RevealConfidence:
    """Wraps a sampler; records p_i(x0_i) of every position it reveals in ``confidence``
    (B, N) (1 where never revealed), and in ``head`` (B, N) whether it was the most confident
    position revealed in its pass."""

    def __init__(self, inner, batch: int, length: int):
        self.inner = inner
        self.confidence = torch.ones(batch, length, dtype=torch.float64)
        self.head = torch.zeros(batch, length, dtype=torch.bool)

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def select(self, state):
        selection = self.inner.select(state)
        rows = state.row_ids.cpu()
        conf = self.confidence[rows]
        reveal = selection.reveal.cpu()
        prob = state.x0_prob.cpu().double()
        conf[reveal] = prob[reveal]
        self.confidence[rows] = conf
        top = prob.masked_fill(~reveal, -1.0).max(1, keepdim=True).values
        head = self.head[rows]
        head[reveal] = (prob >= top)[reveal]
        self.head[rows] = head
        return selection


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=200, help="first N hard puzzles")
    ap.add_argument("--first", default="mi-guided:gamma=1.0,order=confidence")
    ap.add_argument("--second", default="eb:gamma=0.3,order=confidence")
    ap.add_argument("--tau", type=float, nargs="*", default=[0.9, 0.99, 0.999, 0.9999],
                    help="re-mask thresholds (none: only the first-stage analysis)")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model = load_model()
    puzzles, solutions = load_set("hard")
    puzzles, solutions = puzzles[:args.limit], solutions[:args.limit]
    given = grid_to_tokens(puzzles)
    first_stage = RevealConfidence(SamplerSpec.parse(args.first).build(), *given.shape)
    res = decode(model, given, first_stage)
    solved = is_valid_solution(tokens_to_grid(res.tokens), puzzles)
    print(f"{len(puzzles)} hard puzzles; first stage {args.first}: {100 * solved.mean():.1f}% "
          f"solved at {res.nfe.double().mean():.2f} passes")
    wrong = (res.tokens != grid_to_tokens(solutions)) & (given == model.mask_id)
    failed = wrong.any(1)
    if failed.any():
        step = res.reveal_step.masked_fill(~wrong, torch.iinfo(torch.long).max)
        first = step.min(1, keepdim=True).values
        at_first = wrong & (res.reveal_step == first)
        conf = first_stage.confidence.masked_fill(~at_first, -1.0).max(1).values[failed]
        q = np.quantile(conf.numpy(), [0.1, 0.5, 0.9])
        print(f"failed boards {int(failed.sum())}: first wrong commit at pass "
              f"{first.squeeze(1)[failed].double().mean() + 1:.1f} of "
              f"{res.steps[failed].double().mean():.1f} on average, at confidence "
              f"{q[1]:.3f} (10-90%: {q[0]:.3f}-{q[2]:.3f}); "
              f"{wrong[failed].sum(1).double().mean():.1f} wrong cells per failed board")
        by_head = (at_first & first_stage.head).any(1)[failed]
        for name, boards in (("the head of its pass", by_head), ("a rider", ~by_head)):
            if boards.any():
                q = np.quantile(conf[boards].numpy(), [0.1, 0.5, 0.9])
                print(f"  first wrong commit {name}: {int(boards.sum())} boards, confidence "
                      f"{q[1]:.3f} (10-90%: {q[0]:.3f}-{q[2]:.3f})")
    for tau in args.tau:
        again = (first_stage.confidence < tau) & (given == model.mask_id)
        tokens = res.tokens.clone()
        tokens[again] = model.mask_id
        res2 = decode(model, tokens, SamplerSpec.parse(args.second).build())
        solved2 = is_valid_solution(tokens_to_grid(res2.tokens), puzzles)
        print(f"re-mask cells revealed below p={tau}: {again.sum(1).double().mean():.1f} per "
              f"board; after {args.second}: {100 * solved2.mean():.1f}% at "
              f"{(res.nfe + res2.nfe).double().mean():.2f} passes in all; boards fixed "
              f"{int((solved2 & ~solved).sum())}, broken {int((~solved2 & solved).sum())}")


if __name__ == "__main__":
    main()
