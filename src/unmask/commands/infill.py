"""``unmask infill``: fill the masked positions of templates with any model."""

from __future__ import annotations

import argparse
import json

from unmask.commands.flags.engine import resolve_device
from unmask.commands.flags.paths import read_file_arg
from unmask.commands.flags.sampler import sampler_text
from unmask.commands.registry import command
from unmask.errors import UnmaskError, require
from unmask.infill import infill
from unmask.io import parse_json
from unmask.models.auto import load_model
from unmask.presets import model_preset_spec


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
                item = parse_json(line)
            except json.JSONDecodeError:
                raise UnmaskError(f"--file: line {n} starts like JSON but is not") from None
            line = item.get("template") if isinstance(item, dict) else item
            require(isinstance(line, str), f"--file: line {n}: expected a string or an "
                                           "object with a string 'template'")
        templates.append(line)
    require(templates, f"--file: {path} holds no template")
    return templates


@command("infill")
def infill_cmd(args: argparse.Namespace) -> int:
    templates = args.template if args.template is not None else read_templates(args.file)
    templates = [t for t in templates for _ in range(args.samples)]
    sampler = sampler_text(args)  # refused before the model loads
    if args.preset is not None:  # a model may have its own (unmask.presets.MODEL_PRESETS)
        sampler = model_preset_spec(args.preset, args.model)
    options = {"device": resolve_device(args.device)}
    if args.trust_remote_code:
        options["trust_remote_code"] = True
    if args.dtype:
        options["dtype"] = args.dtype
    model = load_model(args.model, **options)
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
