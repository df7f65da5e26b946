"""``unmask infill``: fill the masked positions of templates with any model."""

from __future__ import annotations

import argparse
import json

from unmask.commands.arg_types import add_confidence_arg, add_seed_arg
from unmask.commands.engine_flags import add_device_arg, resolve_device
from unmask.commands.paths import read_file_arg
from unmask.commands.registry import arguments, command
from unmask.commands.threads import add_threads_arg
from unmask.errors import UnmaskError, require
from unmask.infill import infill
from unmask.models.auto import load_model
from unmask.presets import PRESETS, model_preset_sampler
from unmask.validation import finite_float, positive_int


def _args(p: argparse.ArgumentParser) -> None:
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
    p.add_argument("--sampler", default=None,
                   help="sampler spec (e.g. topk:k=4, eb:gamma=0.1; default confidence)")
    p.add_argument("--preset", default=None, choices=list(PRESETS),
                   help="a named configuration instead of --sampler")
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
    p.add_argument("--trust-remote-code", action="store_true",
                   help="run modelling code shipped inside the model folder (only from there)")
    p.add_argument("--dtype", default=None, help="float32, bfloat16 or float16")
    add_threads_arg(p)
    p.add_argument("--json", action="store_true", help="one JSON object per template")
    add_device_arg(p)


def read_templates(path: str) -> list[str]:
    """Templates from a file, one a line: a line starting with '"' or '{' is JSON (a string,
    or an object with a string 'template'), any other non-blank line is the template."""
    text = read_file_arg(path)
    templates = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        if line.startswith(('"', "{")):
            try:
                item = json.loads(line)
            except json.JSONDecodeError:
                raise UnmaskError(f"--file: line {n} starts like JSON but is not") from None
            line = item.get("template") if isinstance(item, dict) else item
            require(isinstance(line, str), f"--file: line {n}: expected a string or an "
                                           "object with a string 'template'")
        templates.append(line)
    require(templates, f"--file: {path} holds no template")
    return templates


@command("infill", help="fill the masked positions of templates (<mask>, <mask:N>) with any "
                        "model")
@arguments(_args)
def infill_cmd(args: argparse.Namespace) -> int:
    templates = args.template if args.template is not None else read_templates(args.file)
    templates = [t for t in templates for _ in range(args.samples)]
    if args.preset and args.sampler:
        raise UnmaskError("--preset: give --sampler or --preset, not both")
    options = {"device": resolve_device(args.device)}
    if args.trust_remote_code:
        options["trust_remote_code"] = True
    if args.dtype:
        options["dtype"] = args.dtype
    model = load_model(args.model, **options)
    sampler = (model_preset_sampler(args.preset, args.model) if args.preset
               else (args.sampler or "confidence"))
    results = infill(model, templates, sampler=sampler, block_length=args.block_length,
                     steps=args.steps, temperature=args.temperature, seed=args.seed,
                     batch_size=args.batch_size, confidence=args.confidence)
    for i, r in enumerate(results):
        if args.json:
            row = r.to_json()
            draw = {} if args.samples == 1 else {"sample": i % args.samples,
                                                 "seed": args.seed + i}
            print(json.dumps({"template": row.pop("prompt"), **draw, **row}), flush=True)
        else:
            print(f"{r.text}\n  [nfe {r.nfe}, {r.tokens_per_forward:.2f} tokens/forward, "
                  f"{r.wall_s:.2f} s]", flush=True)
    return 0
