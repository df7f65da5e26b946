"""``unmask demo``: the main job in one command, on the shipped default model."""

from __future__ import annotations

import argparse
import time

from unmask.commands.registry import command
from unmask.decode import DecodeConfig, decode
from unmask.errors import UnmaskError
from unmask.models import ExactJointMDM
from unmask.models.auto import load_model
from unmask.pretrained import describe_source
from unmask.samplers import make_sampler
from unmask.samplers.spec import verify_suffix
from unmask.samplers.verified import Verified
from unmask.sudoku.datasets import load_set
from unmask.sudoku.mdm_solver import solve_puzzles

#: (sampler, params, verify tolerance or None: ``Verified(tolerance=)``)
DEMO_SAMPLERS = [
    ("confidence", {}, None),
    ("topk", {"k": 7}, None),
    ("eb", {"gamma": 0.1, "order": "confidence"}, None),
    ("threshold", {"tau": 0.9}, None),
    ("mi-guided", {"gamma": 0.3, "order": "confidence"}, None),  # the shipped MI estimator
    ("mi-guided", {"gamma": 1.0, "order": "confidence"}, 0.002),  # its passes verified
]


def _label(params: dict, tolerance: float | None) -> str:

    text = " ".join(f"{k}={v}" for k, v in params.items()) or "k=1"
    return text if tolerance is None else f"{text} {verify_suffix(tolerance)}"


@command("demo")
def demo(args: argparse.Namespace) -> int:
    import sys

    from rich.console import Console
    from rich.table import Table

    console = Console()
    try:
        model = load_model("sudoku", task="sudoku")  # a bare name: the shipped asset
    except UnmaskError as e:
        # said on stderr, so a missing asset is never mistaken for the demo itself
        print(f"demo: the shipped Sudoku model cannot be loaded ({e}); showing the exact toy "
              "MDM instead", file=sys.stderr)
        return _toy_demo(console)

    puzzles, _ = load_set("hard")
    puzzles = puzzles[: args.puzzles]
    table = Table(title=f"{len(puzzles)} hard Sudokus, model {describe_source(model.source)}")
    for col in ("sampler", "params", "solved %", "mean passes", "seconds"):
        table.add_column(col, justify="right" if col not in ("sampler", "params") else "left")
    for name, params, tolerance in DEMO_SAMPLERS:
        t0 = time.perf_counter()
        _, solved, nfe = solve_puzzles(model, puzzles, make_sampler(name, **params),
                                       verify=tolerance is not None,
                                       verify_tolerance=1.0 if tolerance is None else tolerance)
        table.add_row(name, _label(params, tolerance), f"{100 * solved.mean():.1f}",
                      f"{nfe.mean():.1f}", f"{time.perf_counter() - t0:.1f}")
    console.print(table)
    return 0


def _toy_demo(console) -> int:
    """Without a shipped model: decode the exact toy MDM, whose true mode is known."""
    import torch
    from rich.table import Table

    model = ExactJointMDM(n=5, v=3, seed=1, concentration=0.3)
    x = torch.full((1000, 5), model.mask_id)
    logp = model.joint.flatten().log()
    table = Table(title="exact toy MDM (N=5, |V|=3): mean log-likelihood of decoded sequences")
    for col in ("sampler", "params", "mean log p(x)", "mean passes"):
        table.add_column(col)
    for name, params, tolerance in DEMO_SAMPLERS:
        if name == "mi-guided":  # no estimator ships for the toy: ground-truth MI
            name, params = "mi-oracle", {**params, "eps": 0.0}
        sampler = make_sampler(name, **params)
        if tolerance is not None:
            sampler = Verified(sampler, tolerance=tolerance)
        res = decode(model, x, sampler, DecodeConfig())
        idx = (res.tokens * (3 ** torch.arange(4, -1, -1))).sum(1)
        table.add_row(name, _label(params, tolerance), f"{float(logp[idx].mean()):.3f}",
                      f"{res.nfe.float().mean():.1f}")
    console.print(table)
    return 0
