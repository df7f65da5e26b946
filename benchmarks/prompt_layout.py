"""`unmask.generate`'s row layout: a prompt then the masks, against prompt slots rounded up
to whole blocks (``pad_to_multiple_of=block_length``, the layout before the loop counted its
blocks back from the row's end, and the one the server's calls keep), side by side.

    PYTHONPATH=src python benchmarks/prompt_layout.py [--model DIR] [--batches 1 8]
        [--gen-length 128] [--block-length B] [--samplers confidence eb:gamma=0.1]
        [--repeats 3] [--threads 1]

Prompts are reasoning-style questions of 20 to 90 characters; at batch b the first b of them
(cycled). Greedy, so both layouts must give the same tokens (pad positions are left out of
attention, positions counted from the first real token). Columns: positions per pass (the
row width the model runs), NFE per row, sequences per row, best wall of ``--repeats``
round-robin rounds, and exact / padded wall.
"""

from __future__ import annotations

import argparse
import time

import torch

from unmask.generate import encode_prompt, generate, prompt_batch
from unmask.models.auto import load_model
from unmask.pretrained import pretrained_path

PROMPTS = ["What is 3 + 4?", "Sum 12 7 30 and 5.",
           "Count the vowels in the word 'masked diffusion'.",
           "What is 17 * 3 - 4? Answer with one number.",
           "Sort these numbers from smallest to largest: 9 2 71 40 5 13 8.",
           "A train leaves at 3pm and travels for 2 hours at 40 km/h. How far does it go?",
           "Reverse the letters of 'unmask'.", "What is 100 - 37?"]


def run(model, prompts, spec, pad_to, args) -> tuple[float, list]:
    t0 = time.perf_counter()
    out = generate(model, None, prompts, sampler=spec, gen_length=args.gen_length,
                   block_length=args.block_length, stop_at_eos=False, pad_to_multiple_of=pad_to)
    return time.perf_counter() - t0, out


def width(model, prompts, pad_to, args) -> int:
    """The positions a pass runs: the width of the decode input ``generate`` builds."""
    ids = [encode_prompt(model.tokenizer, p) for p in prompts]
    block = args.block_length or args.gen_length
    x, _ = prompt_batch(model, ids, block, args.gen_length, pad_to_multiple_of=pad_to)
    return x.shape[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="a text model folder (default: shipped)")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--gen-length", type=int, default=128)
    ap.add_argument("--block-length", type=int, default=None)
    ap.add_argument("--samplers", nargs="+", default=["confidence", "eb:gamma=0.1"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = load_model(args.model or pretrained_path("text"), task="text")
    block = args.block_length or args.gen_length
    print(f"gen_length {args.gen_length}, block {block}, {args.threads} thread(s); "
          "wall: best of the round-robin rounds")
    print(f"{'batch':>5}  {'sampler':<16}{'layout':<8}{'pos/pass':>9}{'NFE':>7}{'seqs':>7}"
          f"{'wall s':>9}{'exact/padded':>14}  same")
    for b in args.batches:
        prompts = [PROMPTS[i % len(PROMPTS)] for i in range(b)]
        for spec in args.samplers:
            best = {None: float("inf"), block: float("inf")}
            outs = {}
            for _ in range(args.repeats):
                for pad_to in best:
                    wall, outs[pad_to] = run(model, prompts, spec, pad_to, args)
                    best[pad_to] = min(best[pad_to], wall)
            same = [g.token_ids for g in outs[None]] == [g.token_ids for g in outs[block]]
            for pad_to, name in ((block, "padded"), (None, "exact")):
                out = outs[pad_to]
                nfe = sum(g.nfe for g in out) / b
                seqs = sum(g.sequences for g in out) / b
                ratio = f"{best[None] / best[block]:.2f}x" if pad_to is None else ""
                print(f"{b:>5}  {spec:<16}{name:<8}"
                      f"{width(model, prompts, pad_to, args):>9}{nfe:>7.1f}"
                      f"{seqs:>7.1f}{best[pad_to]:>9.2f}{ratio:>14}  "
                      f"{same if pad_to is None else ''}")


if __name__ == "__main__":
    main()
