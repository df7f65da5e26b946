"""``unmask generate``: text from a Hugging Face masked/diffusion LM folder."""

from __future__ import annotations

import argparse
import json

from unmask.commands.flags.engine import resolve_device
from unmask.commands.flags.paths import read_items
from unmask.commands.flags.sampler import sampler_text
from unmask.commands.flags.types import flags_for
from unmask.commands.registry import command
from unmask.generate import generate
from unmask.models.auto import load_model


@command("generate")
def generate_cmd(args: argparse.Namespace) -> int:

    prompts = (args.prompt if args.prompt is not None
               else read_items(args.file, "prompt", plain_lines=False))
    device = resolve_device(args.device)
    options = {"trust_remote_code": args.trust_remote_code, "device": device}
    if args.dtype:
        options["dtype"] = args.dtype
    model = load_model(args.model, task="text", **options)
    sampler = sampler_text(args)
    gen_length = args.gen_length or getattr(model, "default_gen_length", None) or 128
    with flags_for("block_length", "gen_length", "steps", "batch_size", "sampler",
                   "min_new_tokens", "cache_kv"):
        results = generate(model, None, prompts, sampler=sampler, gen_length=gen_length,
                           block_length=args.block_length, steps=args.steps,
                           temperature=args.temperature, seed=args.seed,
                           chat_template=args.chat, stop_at_eos=not args.no_eos_stop,
                           batch_size=args.batch_size, min_new_tokens=args.min_new_tokens,
                           confidence=args.confidence, cache_kv=args.cache_kv,
                           batch_invariant=args.batch_invariant, compile=args.compile,
                           pad_to_multiple_of=args.pad_to_multiple_of)
    for r in results:
        if args.json:
            print(json.dumps(r.to_json()), flush=True)
        else:
            print(f"{r.text}\n  [nfe {r.nfe}, {r.tokens_per_forward:.2f} tokens/forward, "
                  f"{r.wall_s:.2f} s]", flush=True)
    return 0
