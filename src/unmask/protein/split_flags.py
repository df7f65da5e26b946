"""The flags naming a protein train/held-out split, shared by ``unmask protein train`` and
``unmask protein bench``; this module imports nothing heavy, so that ``--help`` does not."""

from __future__ import annotations


def add_split_args(p, types) -> None:
    """The flags naming the train/held-out split (:func:`unmask.protein.data.model_split`);
    ``types``: the CLI's argument types."""
    p.add_argument("--fasta", default=None,
                   help="protein FASTA file (default: the proteome shipped with pyhmmer)")
    p.add_argument("--heldout-fraction", type=types.finite_float(0.0, 1.0, open_low=True),
                   default=None,
                   help="share of proteins held out (default 0.1, or the model's split.json)")
    p.add_argument("--split-seed", type=types.seed_int, default=None,
                   help="seed of the train/held-out split (default 0, or the model's "
                        "split.json)")
