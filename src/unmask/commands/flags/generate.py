"""The flags of ``unmask generate`` (:mod:`unmask.commands.generate`)."""

from __future__ import annotations

import argparse

from unmask.commands.flags.constraint import add_constraint_args
from unmask.commands.flags.engine import add_device_arg
from unmask.commands.flags.sampler import add_sampler_arg
from unmask.commands.flags.threads import add_threads_arg
from unmask.commands.flags.types import (
    add_cache_kv_arg,
    add_confidence_arg,
    add_folder_model_args,
    add_pass_args,
    add_seed_arg,
    finite_float,
    non_negative_int,
    positive_int,
)


def generate(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="text",
                   help="a transformers model folder, or a shipped name (default: the shipped "
                        "character-level text MDM, 'text')")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", nargs="+", help="prompt text(s)")
    src.add_argument("--file", help="JSONL of prompts: a JSON string or {\"prompt\": ...} a line"
                                    " ('-' = stdin)")
    p.add_argument("--gen-length", type=positive_int, default=None,
                   help="tokens to generate (default: the folder's generation_config.json "
                        "max_new_tokens, else 128)")
    p.add_argument("--block-length", type=positive_int, default=None,
                   help="semi-autoregressive block; divides --gen-length (default: one block)")
    p.add_argument("--steps", type=positive_int, default=None,
                   help="total steps, split over the blocks (count samplers only)")
    add_sampler_arg(p, also=" (LLaDA's low_confidence, random, topk_margin, entropy too)")
    p.add_argument("--temperature", type=finite_float(0.0), default=0.0)
    add_confidence_arg(p)
    add_seed_arg(p)
    p.add_argument("--batch-size", type=positive_int, default=None, help="prompts per batch (all)")
    p.add_argument("--chat", action="store_true", help="apply the tokenizer's chat template")
    p.add_argument("--no-eos-stop", action="store_true",
                   help="do not end a row at a block of only EOS")
    p.add_argument("--min-new-tokens", type=non_negative_int, default=0, metavar="N",
                   help="the first N generated positions cannot be EOS (at most --gen-length;"
                        " default 0)")
    p.add_argument("--pad-to-multiple-of", type=positive_int, default=None, metavar="M",
                   help="round a batch's prompt slots up to a multiple of M (default: the "
                        "longest prompt; the server rounds to whole blocks)")
    add_cache_kv_arg(p)
    add_constraint_args(p)
    add_folder_model_args(p)
    add_pass_args(p)
    add_threads_arg(p)
    p.add_argument("--json", action="store_true", help="one JSON object per prompt")
    add_device_arg(p)
