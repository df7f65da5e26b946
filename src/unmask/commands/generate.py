"""``unmask generate``: text from a Hugging Face masked/diffusion LM folder."""

from __future__ import annotations

import argparse
import json

from unmask.commands.arg_types import add_confidence_arg, add_pass_args, add_seed_arg
from unmask.commands.engine_flags import add_device_arg, resolve_device
from unmask.commands.paths import read_file_arg
from unmask.commands.registry import arguments, command
from unmask.commands.threads import add_threads_arg
from unmask.errors import UnmaskError, require
from unmask.generate import generate
from unmask.models.auto import load_model
from unmask.presets import PRESETS, preset_sampler
from unmask.validation import finite_float, non_negative_int, positive_int


def _args(p: argparse.ArgumentParser) -> None:
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
    p.add_argument("--sampler", default=None,
                   help="sampler spec (e.g. eb:gamma=0.1 or eb:gamma=1.0+verify=0.01; LLaDA's "
                        "low_confidence, random, topk_margin, entropy are accepted; default "
                        "confidence)")
    p.add_argument("--preset", default=None, choices=list(PRESETS),
                   help="a named configuration instead of --sampler")
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
    p.add_argument("--cache-kv", choices=["prefix", "dual"], default=None,
                   help="Fast-dLLM's block KV cache (folders whose code takes "
                        "past_key_values, e.g. LLaDA's); approximate, see docs/models.md")
    p.add_argument("--trust-remote-code", action="store_true",
                   help="run modelling code shipped inside the model folder (only from there)")
    p.add_argument("--dtype", default=None, help="float32, bfloat16 or float16")
    add_pass_args(p)
    add_threads_arg(p)
    p.add_argument("--json", action="store_true", help="one JSON object per prompt")
    add_device_arg(p)


def read_prompts(path: str) -> list[str]:
    """Prompts from a JSONL file (a JSON string, or an object with 'prompt', per line)."""
    text = read_file_arg(path)
    prompts = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            raise UnmaskError(f"--file: line {n} is not JSON") from None
        if isinstance(item, dict):
            item = item.get("prompt")
        require(isinstance(item, str), f"--file: line {n}: expected a string or an object "
                                       "with a string 'prompt'")
        prompts.append(item)
    require(prompts, f"--file: {path} holds no prompt")
    return prompts


@command("generate", help="generate text with a Hugging Face masked or diffusion LM folder")
@arguments(_args)
def generate_cmd(args: argparse.Namespace) -> int:

    prompts = args.prompt if args.prompt is not None else read_prompts(args.file)
    device = resolve_device(args.device)
    options = {"trust_remote_code": args.trust_remote_code, "device": device}
    if args.dtype:
        options["dtype"] = args.dtype
    model = load_model(args.model, task="text", **options)
    if args.preset and args.sampler:
        raise UnmaskError("--preset: give --sampler or --preset, not both")
    sampler = preset_sampler(args.preset) if args.preset else (args.sampler or "confidence")
    gen_length = args.gen_length or getattr(model, "default_gen_length", None) or 128
    results = generate(model, None, prompts, sampler=sampler, gen_length=gen_length,
                       block_length=args.block_length, steps=args.steps,
                       temperature=args.temperature, seed=args.seed, chat_template=args.chat,
                       stop_at_eos=not args.no_eos_stop, batch_size=args.batch_size,
                       min_new_tokens=args.min_new_tokens, confidence=args.confidence,
                       cache_kv=args.cache_kv, batch_invariant=args.batch_invariant,
                       compile=args.compile)
    for r in results:
        if args.json:
            print(json.dumps(r.to_json()), flush=True)
        else:
            print(f"{r.text}\n  [nfe {r.nfe}, {r.tokens_per_forward:.2f} tokens/forward, "
                  f"{r.wall_s:.2f} s]", flush=True)
    return 0
