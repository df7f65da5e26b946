"""The flags of ``unmask infill`` (:mod:`unmask.commands.infill`)."""

from __future__ import annotations

import argparse

from unmask.commands.flags.constraint import add_constraint_args
from unmask.commands.flags.engine import add_device_arg
from unmask.commands.flags.sampler import add_sampler_arg
from unmask.commands.flags.threads import add_threads_arg
from unmask.commands.flags.types import (
    add_confidence_arg,
    add_folder_model_args,
    add_pass_args,
    add_seed_arg,
    finite_float,
    positive_int,
)


def infill(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True,
                   help="a shipped or converted name (text, protein, antiberty) or a model "
                        "folder (transformers masked LM, ESM, diffusion LLM)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--template", nargs="+",
                     help="template(s): <mask> (or the model's own mask token) where to fill, "
                          "<mask:N> for N positions; protein models read residue strings "
                          "such as EVQLV<mask:5>GGLVQ")
    src.add_argument("--file", help="templates, one a line: the line itself, or a JSON string "
                                    "or {\"template\": ...} ('-' = stdin)")
    add_sampler_arg(p)
    p.add_argument("--block-length", type=positive_int, default=None,
                   help="decode in blocks of this many positions, left to right (default: "
                        "one block)")
    p.add_argument("--steps", type=positive_int, default=None,
                   help="steps per block holding masks (count samplers only)")
    p.add_argument("--temperature", type=finite_float(0.0), default=0.0)
    add_confidence_arg(p)
    add_seed_arg(p)
    p.add_argument("--samples", type=positive_int, default=1, metavar="N",
                   help="draws per template (default 1): draw s of template t decodes with "
                        "seed SEED + t*N + s, so the draws take seeds in order (give "
                        "--temperature > 0 for different draws)")
    p.add_argument("--batch-size", type=positive_int, default=None,
                   help="templates per batch (all)")
    add_constraint_args(p, "whole filled template (given text included)")
    add_folder_model_args(p)
    add_pass_args(p)
    add_threads_arg(p)
    p.add_argument("--json", action="store_true", help="one JSON object per template")
    add_device_arg(p)
