"""The flags of ``unmask mi ...`` (:mod:`unmask.commands.mi`)."""

from __future__ import annotations

import argparse

from unmask.commands.flags.engine import add_device_arg, add_engine_args
from unmask.commands.flags.threads import add_threads_arg, threads_int
from unmask.commands.flags.training import add_resume_args
from unmask.commands.flags.types import (
    add_seed_arg,
    add_trust_arg,
    finite_float,
    non_negative_int,
    positive_int,
    seed_int,
)


def layer_list(text: str) -> tuple[int, ...]:
    """'2,4,6' -> (2, 4, 6): hidden-layer indices for --extra-layers."""
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated layer indices such as 2,4,6, got {text!r}") from None



def label_tasks() -> list[str]:
    """The tasks with MI label contexts (:func:`unmask.tasks.label_modules`), named without
    importing them."""
    from unmask.tasks import label_modules

    return sorted(label_modules())


def label(p: argparse.ArgumentParser) -> None:

    p.add_argument("--model", default=None,
                   help="model folder or shipped name (default: the task's shipped model)")
    p.add_argument("--task", default="sudoku", choices=label_tasks(),
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
    add_trust_arg(p)
    p.add_argument("--threads", type=threads_int, default=None, metavar="N",
                   help="CPU threads of torch and numba (per worker with --engine ray; "
                        "default: torch's default, which follows OMP_NUM_THREADS)")
    add_engine_args(p)
    add_device_arg(p)


def train(p: argparse.ArgumentParser) -> None:
    p.add_argument("--labels", required=True, help="label folder written by `unmask mi label`")
    p.add_argument("--out", required=True, help="run folder (checkpoint.pt, best/, history)")
    p.add_argument("--model", default=None,
                   help="model folder or shipped name the labels were probed on "
                        "(default: the shipped model of the labels' task)")
    add_resume_args(p)
    p.add_argument("--epochs", type=positive_int, default=200, help="at most this many epochs")
    p.add_argument("--batch-size", type=positive_int, default=16)
    p.add_argument("--lr", type=finite_float(0.0, open_low=True), default=5e-3)
    p.add_argument("--patience", type=positive_int, default=15,
                   help="held-out evaluations without improvement before stopping")
    p.add_argument("--eval-every", type=non_negative_int, default=0,
                   help="steps between held-out evaluations (0 = every epoch)")
    p.add_argument("--held-out", type=finite_float(0.0, 1.0, open_low=True), default=0.1,
                   help="share of puzzles held out")
    p.add_argument("--split-seed", type=seed_int, default=0)
    add_seed_arg(p)
    p.add_argument("--layer", type=non_negative_int, default=None,
                   help="hidden layer to read (0 = embeddings; default: the final hidden states)")
    p.add_argument("--extra-layers", type=layer_list, default=(), metavar="L1,L2,...",
                   help="further hidden layers whose states are concatenated to the features")
    p.add_argument("--d", type=positive_int, default=64, help="estimator width")
    p.add_argument("--mixer-layers", type=non_negative_int, default=1)
    p.add_argument("--pair-hidden", type=positive_int, default=8, help="pair MLP units")
    p.add_argument("--pair-rank", type=positive_int, default=16,
                   help="rank of each unit's bilinear form")
    p.add_argument("--two-hop", type=non_negative_int, default=0, metavar="H",
                   help="compose the first H pair units over the masked positions between a "
                        "pair (dependence through a third position); default 0")
    p.add_argument("--pair-prior", action="store_true",
                   help="learn a prior per pair of positions (for fixed-meaning positions such "
                        "as Sudoku cells)")
    p.add_argument("--augment", type=non_negative_int, default=0,
                   help="symmetry copies of each training context (tasks with a known symmetry "
                        "group, e.g. Sudoku); held-out contexts are never moved")
    p.add_argument("--marginals", action="store_true",
                   help="also read the model's marginals (probabilities and entropy) of the "
                        "same pass (no gain on the Sudoku labels so far)")
    p.add_argument("--entropy-gate", action="store_true",
                   help="bound each pair by the smaller marginal entropy of its two cells: "
                        "MI = sigmoid(score) * min(H_i, H_j) (reads the marginals)")
    p.add_argument("--loss-scale", choices=("nats", "sqrt", "log"), default="nats",
                   help="compare MI in nats, as its square root or as log(1 + MI / 0.05) in "
                        "the squared error (sqrt weighs errors on weak pairs more, log counts "
                        "errors on strong pairs relative to their value; predictions stay in "
                        "nats)")
    p.add_argument("--rank-weight", type=finite_float(0.0), default=0.0,
                   help="add this weight times a within-context ranking loss (default 0: MSE "
                        "only)")
    p.add_argument("--max-time", type=finite_float(0.0, open_low=True), default=None,
                   help="stop after this many seconds")
    add_threads_arg(p)


def eval(p: argparse.ArgumentParser) -> None:
    p.add_argument("--labels", required=True, help="label folder written by `unmask mi label`")
    p.add_argument("--estimator", default=None,
                   help="estimator folder or shipped name (default: the shipped Sudoku one)")
    p.add_argument("--model", default=None,
                   help="model folder or shipped name (default: the shipped model of the "
                        "labels' task)")
    p.add_argument("--split", choices=("auto", "held-out", "all"), default="auto",
                   help="contexts to score: the estimator's held-out split, all, or auto (the "
                        "held-out split when these are its training labels, else all)")
    p.add_argument("--cost-batch", type=positive_int, default=256,
                   help="batch size of the cost measurement")
    p.add_argument("--json", action="store_true",
                   help="print the metrics as one JSON object (undefined values as null)")
    add_threads_arg(p)


def map(p: argparse.ArgumentParser) -> None:
    p.add_argument("puzzle", metavar="PUZZLE",
                   help="81 characters, digits with 0 or . for blanks (as in `sudoku solve`)")
    p.add_argument("--cell", default=None, metavar="R,C",
                   help="cell whose MI is drawn on the board, 1-based (default: the blank cell "
                        "with the largest total MI)")
    p.add_argument("--source", default="gt", metavar="gt|estimator|gt,estimator",
                   help="ground truth by probing, the estimator, or both side by side")
    p.add_argument("--out", required=True, help="image file (.png, .pdf or .svg)")
    p.add_argument("--model", default=None,
                   help="model folder or shipped name (default: the shipped Sudoku model)")
    p.add_argument("--estimator", default=None,
                   help="estimator folder or shipped name (default: the shipped Sudoku one)")
    p.add_argument("--eps", type=finite_float(0.0, 1.0), default=1e-4,
                   help="ground truth: skip probes with p_i(v) < EPS (0 = exact)")
    p.add_argument("--json", action="store_true",
                   help="print the structure scores as JSON (undefined values as null)")
    add_threads_arg(p)


def fit(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True,
                   help="model name or folder (antiberty, a transformers masked LM, protein, "
                        "an ESM folder, sudoku)")
    p.add_argument("--corpus", default=None, metavar="FILE",
                   help="text models: the UTF-8 corpus contexts are cut from (residue strings "
                        "for AntiBERTy); other models use their task's own contexts")
    p.add_argument("--out", required=True,
                   help="folder: the estimator (read by mi-guided:estimator=OUT), its labels "
                        "and training run; rerunning resumes the labels")
    p.add_argument("--length", type=positive_int, default=64,
                   help="text models: context length in tokens, special tokens included")
    p.add_argument("--contexts", type=positive_int, default=1024,
                   help="label at most this many contexts (default 1024)")
    p.add_argument("--label-s", type=finite_float(0.0, open_low=True), default=600.0,
                   help="stop labelling after the shard that passes this many seconds")
    p.add_argument("--train-s", type=finite_float(0.0, open_low=True), default=300.0,
                   help="stop training after this many seconds")
    p.add_argument("--mask-ratio", default="0.1:0.9", metavar="LO:HI")
    p.add_argument("--top-k", type=positive_int, default=8, metavar="K",
                   help="probe at most the K most likely tokens per masked position")
    p.add_argument("--eps", type=finite_float(0.0, 1.0), default=1e-3)
    p.add_argument("--shard-size", type=positive_int, default=32, help="contexts per shard")
    p.add_argument("--held-out", type=finite_float(0.0, 1.0, open_low=True), default=0.1)
    add_seed_arg(p)
    add_trust_arg(p)
    p.add_argument("--overwrite", action="store_true",
                   help="write into an OUT that holds other files (never into a model folder)")
    p.add_argument("--threads", type=threads_int, default=None, metavar="N",
                   help="CPU threads of torch (per worker with --engine ray)")
    add_engine_args(p)
    add_device_arg(p)
