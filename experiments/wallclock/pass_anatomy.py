"""Where a rule's passes go: per pass, how many positions it reveals and how many eligible
positions the model is near-certain of.

    PYTHONPATH=src python experiments/wallclock/pass_anatomy.py [--limit 256] \
        [--rule eb:gamma=0.01,order=confidence] [--set hard]

Prints the mean, per puzzle, of: passes; passes revealing one position, and those of them
whose best position has confidence < 0.99 (a pass no parallel rule can widen without
revealing an uncertain position); passes revealing fewer positions than have confidence
>= 0.999; and the mean count per pass revealed and above each confidence level.
"""

import argparse

import torch

from unmask.decode import decode
from unmask.models.auto import load_model
from unmask.samplers.spec import parse_spec
from unmask.sudoku.datasets import set_puzzles
from unmask.sudoku.solver import is_valid_solution
from unmask.sudoku.tokens import grid_to_tokens, tokens_to_grid

LEVELS = (0.9999, 0.999, 0.99)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=256)
    ap.add_argument("--rule", default="eb:gamma=0.01,order=confidence")
    ap.add_argument("--set", default="hard")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = load_model("sudoku")
    puzzles = set_puzzles(args.set)[:args.limit]
    sampler = parse_spec(args.rule).build()
    log = []  # per (row, pass): revealed, count above each level, best confidence
    select = sampler.select

    def logged(state):
        sel = select(state)
        conf = state.x0_prob.double().masked_fill(~state.eligible, -1.0)
        above = [(conf >= level).sum(1) for level in LEVELS]
        log.append(torch.stack([sel.reveal.sum(1).double(), *[a.double() for a in above],
                                conf.max(1).values], 1))
        return sel

    sampler.select = logged
    res = decode(model, grid_to_tokens(puzzles), sampler)
    solved = is_valid_solution(tokens_to_grid(res.tokens), puzzles)
    rec = torch.cat(log)
    k, top = rec[:, 0], rec[:, -1]
    n = len(puzzles)
    print(f"{args.rule}: {len(puzzles)} puzzles, solved {solved.mean():.3f}, "
          f"passes {len(rec) / n:.2f}")
    print(f"  one-position passes {(k == 1).sum() / n:.2f}, of which best confidence < 0.99: "
          f"{((k == 1) & (top < 0.99)).sum() / n:.2f}")
    print(f"  passes revealing fewer than the positions >= 0.999: "
          f"{(k < rec[:, 2]).sum() / n:.2f}")
    counts = ", ".join(f">= {level}: {rec[:, i + 1].mean():.2f}" for i, level in
                       enumerate(LEVELS))
    print(f"  per pass: revealed {k.mean():.2f}; eligible with confidence {counts}")


if __name__ == "__main__":
    main()
