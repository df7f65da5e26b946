"""``unmask generate``: text from a Hugging Face masked/diffusion LM folder."""

from __future__ import annotations

import argparse
import json

from unmask.commands.flags.constraint import NAMES, constraint_from_args
from unmask.commands.flags.engine import resolve_device
from unmask.commands.flags.paths import read_items
from unmask.commands.flags.request import request_from_args
from unmask.commands.flags.sampler import sampler_text
from unmask.commands.flags.types import flags_for
from unmask.commands.registry import command
from unmask.generate import generate
from unmask.models.auto import load_model


@command("generate")
def generate_cmd(args: argparse.Namespace) -> int:

    prompts = (args.prompt if args.prompt is not None
               else read_items(args.file, "prompt", plain_lines=False))
    # refused before the model loads
    request = request_from_args(args, sampler_text(args), constraint=constraint_from_args(args))
    device = resolve_device(args.device)
    options = {"trust_remote_code": args.trust_remote_code, "device": device}
    if args.dtype:
        options["dtype"] = args.dtype
    model = load_model(args.model, task="text", **options)
    with flags_for("block_length", "gen_length", "steps", "batch_size", "sampler",
                   "min_new_tokens", "cache_kv", *NAMES):
        results = generate(model, None, prompts, request)
    for r in results:
        if args.json:
            print(json.dumps(r.to_json()), flush=True)
        else:
            print(f"{r.text}\n  [nfe {r.nfe}, {r.tokens_per_forward:.2f} tokens/forward, "
                  f"{r.wall_s:.2f} s]", flush=True)
    return 0
