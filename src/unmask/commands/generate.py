"""``unmask generate``: text from a Hugging Face masked/diffusion LM folder."""

from __future__ import annotations

import argparse
import json

from unmask.commands.flags.engine import resolve_device
from unmask.commands.flags.paths import read_file_arg
from unmask.commands.flags.sampler import sampler_text
from unmask.commands.registry import command
from unmask.errors import UnmaskError, require
from unmask.generate import generate
from unmask.io import parse_json
from unmask.models.auto import load_model


def read_prompts(path: str) -> list[str]:
    """Prompts from a JSONL file (a JSON string, or an object with 'prompt', per line)."""
    text = read_file_arg(path)
    prompts = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = parse_json(line)
        except json.JSONDecodeError:
            raise UnmaskError(f"--file: line {n} is not JSON") from None
        if isinstance(item, dict):
            item = item.get("prompt")
        require(isinstance(item, str), f"--file: line {n}: expected a string or an object "
                                       "with a string 'prompt'")
        prompts.append(item)
    require(prompts, f"--file: {path} holds no prompt")
    return prompts


@command("generate")
def generate_cmd(args: argparse.Namespace) -> int:

    prompts = args.prompt if args.prompt is not None else read_prompts(args.file)
    device = resolve_device(args.device)
    options = {"trust_remote_code": args.trust_remote_code, "device": device}
    if args.dtype:
        options["dtype"] = args.dtype
    model = load_model(args.model, task="text", **options)
    sampler = sampler_text(args)
    gen_length = args.gen_length or getattr(model, "default_gen_length", None) or 128
    results = generate(model, None, prompts, sampler=sampler, gen_length=gen_length,
                       block_length=args.block_length, steps=args.steps,
                       temperature=args.temperature, seed=args.seed, chat_template=args.chat,
                       stop_at_eos=not args.no_eos_stop, batch_size=args.batch_size,
                       min_new_tokens=args.min_new_tokens, confidence=args.confidence,
                       cache_kv=args.cache_kv)
    for r in results:
        if args.json:
            print(json.dumps(r.to_json()), flush=True)
        else:
            print(f"{r.text}\n  [nfe {r.nfe}, {r.tokens_per_forward:.2f} tokens/forward, "
                  f"{r.wall_s:.2f} s]", flush=True)
    return 0
