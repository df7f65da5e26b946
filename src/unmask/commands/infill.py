"""``unmask infill``: fill the masked positions of templates with any model."""

from __future__ import annotations

import argparse
import json
import sys

from unmask.commands.flags.constraint import NAMES, constraint_from_args
from unmask.commands.flags.engine import resolve_device
from unmask.commands.flags.paths import read_items
from unmask.commands.flags.request import request_from_args
from unmask.commands.flags.sampler import sampler_text
from unmask.commands.flags.types import flags_for
from unmask.commands.registry import command
from unmask.errors import UnmaskError
from unmask.infill import context_change, infill
from unmask.models.auto import load_model
from unmask.presets import model_preset_spec


def _warn_normalised(model, templates: list[str]) -> None:
    """One warning line on stderr for the first template whose given text the model's
    tokenizer reads otherwise (an uncased model lower-cases it)."""
    tokenizer = getattr(model, "tokenizer", None)
    for i, template in enumerate(templates if tokenizer is not None else ()):
        change = context_change(tokenizer, template)
        if change:
            print(f"warning: template {i}: the model's tokenizer reads {change[0]!r} as "
                  f"{change[1]!r} (it normalises text); the filled text shows the context as "
                  "the model read it", file=sys.stderr)
            return


#: draws one run decodes at most (templates x --samples)
MAX_DRAWS = 1_000_000


@command("infill")
def infill_cmd(args: argparse.Namespace) -> int:
    templates = (args.template if args.template is not None
                 else read_items(args.file, "template", plain_lines=True))
    if len(templates) * args.samples > MAX_DRAWS:
        raise UnmaskError(f"--samples: {len(templates)} template(s) x {args.samples} draws "
                          f"exceed {MAX_DRAWS:,} draws in one run")
    templates = [t for t in templates for _ in range(args.samples)]
    sampler = sampler_text(args)
    if args.preset is not None:  # a model may have its own (unmask.presets.MODEL_PRESETS)
        sampler = model_preset_spec(args.preset, args.model)
    # refused before the model loads
    request = request_from_args(args, sampler, constraint=constraint_from_args(args))
    options = {"device": resolve_device(args.device)}
    if args.trust_remote_code:
        options["trust_remote_code"] = True
    if args.dtype:
        options["dtype"] = args.dtype
    model = load_model(args.model, **options)
    with flags_for("block_length", "steps", "batch_size", "sampler", *NAMES):
        results = infill(model, templates, request=request)
    _warn_normalised(model, templates)
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
