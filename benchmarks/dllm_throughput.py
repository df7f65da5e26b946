"""Throughput of `unmask.generate` without a cache, with Fast-dLLM's prefix cache and with its
dual cache, beside Fast-dLLM's own generate functions (``generate``,
``generate_with_prefix_cache``, ``generate_with_dual_cache``), on the same tiny random LLaDA
built from LLaDA's own modelling code (output layer scaled by ``--sharpen``), in one run.

    PYTHONPATH=src:tests/hf python benchmarks/dllm_throughput.py \\
        [--batches 1 16] [--gen-length 256] [--block-length 32] [--repeats 2] [--threads 1] \\
        [--whole-row]

Needs ``../shared/external/fast-dllm`` (the reference code; not part of the project). Prompts
are distinct word sequences of exactly one block, so both place the blocks at the same
positions. Two rules: Fast-dLLM's threshold rule (``threshold=0.9`` there,
``threshold:tau=0.9`` here) and LLaDA's low-confidence remasking with a fixed number of steps
(``confidence`` here). The references decode one prompt at a time (their functions take one
row): at batch B they run B times, and their wall is the sum.

Columns: tokens/s = batch * gen_length / wall; tokens/fwd = batch * gen_length / (sum of the
rows' forward passes); NFE = forward passes per row (mean); sequences = sequences the model
evaluated per row (mean; = NFE for these rules); wall s = best of ``--repeats``
rounds after an untimed warm-up round, timed round-robin (every engine once per round);
vs ref = the reference's wall / the engine's (> 1: faster than the reference) for the same
rule and cache; same = identical tokens in every row. ``--whole-row`` adds the engine
``unmask whole row``: the same rules with every position computed per pass (distributions at
all positions, the output layer on whole rows), to show what computing the current block
only saves. model ms/call and outside ms/call: the best round's wall split at the model's
forward calls (``gpu.ModelSpans``), per call: inside them, and the rest (the loop's work).
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import tempfile
import time
from pathlib import Path

import torch
import torch._dynamo
from dllm_models import fastdllm_generate, write_llada
from gpu import REFERENCES, RULES, ModelSpans

from unmask.generate import generate, parse_sampler
from unmask.models.auto import load_model
from unmask.samplers.wrapper import EveryPosition


def _unmask_run(model, prompts, spec, steps, args, cache, whole_row=False):
    if whole_row:  # the same rule, every position computed (EveryPosition)
        sampler = parse_sampler(spec)
        if steps:
            sampler = dataclasses.replace(
                sampler, steps=steps // (args.gen_length // args.block_length))
        spec, steps = EveryPosition(sampler), None
    t0 = time.perf_counter()
    out = generate(model, None, prompts, sampler=spec, gen_length=args.gen_length,
                   block_length=args.block_length, steps=steps, stop_at_eos=False,
                   cache_kv=cache)
    return (time.perf_counter() - t0, [g.token_ids for g in out], [g.nfe for g in out],
            [g.sequences for g in out])


def _reference_run(model, prompts, kw, steps, args, cache):
    fn = getattr(fastdllm_generate(), REFERENCES[cache])
    t0, tokens, nfes = time.perf_counter(), [], []
    for p in prompts:
        ids = torch.tensor([model.tokenizer(p)["input_ids"]])
        x, nfe = fn(model.hf, ids, steps=steps, gen_length=args.gen_length,
                    block_length=args.block_length, temperature=0.0,
                    mask_id=model.mask_id, **kw)
        tokens.append(x[0, ids.shape[1]:].tolist())
        nfes.append(int(nfe))
    return time.perf_counter() - t0, tokens, nfes, nfes  # one sequence a pass


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--gen-length", type=int, default=256)
    ap.add_argument("--block-length", type=int, default=32)
    ap.add_argument("--steps", type=int, default=64, help="low-confidence steps in total")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--rules", nargs="+", choices=list(RULES), default=list(RULES))
    ap.add_argument("--vocab-size", type=int, default=96,
                    help="ids of the tiny model (LLaDA-8B has 126,464; the per-position work "
                         "outside the model grows with it)")
    ap.add_argument("--sharpen", type=float, default=3.0,
                    help="scale of the output layer (confident predictions, so that the "
                         "threshold rule reveals several positions a pass)")
    ap.add_argument("--whole-row", action="store_true",
                    help="also run unmask with every position computed per pass (engine "
                         "'unmask whole row': distributions at all positions, the output "
                         "layer on whole rows), the cost the narrow pass saves")
    ap.add_argument("--compile", action="store_true",
                    help="keep the torch.compile LLaDA's code wraps its attention in (on a CPU "
                         "every new shape recompiles; off by default)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    if not args.compile:
        torch._dynamo.config.disable = True
    folder = write_llada(Path(tempfile.mkdtemp()) / "llada", d_model=args.d_model,
                         n_layers=args.layers, vocab_size=args.vocab_size,
                         mask_id=args.vocab_size - 3)
    model = load_model(folder, trust_remote_code=True)
    with torch.no_grad():
        model.hf.model.transformer.ff_out.weight.mul_(args.sharpen)
    rng = random.Random(0)
    pool = [" ".join(f"w{rng.randrange(3, 90)}" for _ in range(args.block_length))
            for _ in range(max(args.batches))]
    print(f"tiny LLaDA (LLaDA's code; d_model {args.d_model}, {args.layers} layers, vocab "
          f"{args.vocab_size}),"
          f" gen_length {args.gen_length}, block {args.block_length}, prompt {args.block_length}"
          f" tokens, greedy, {args.threads} thread(s), best of {args.repeats}, "
          f"{'compiled' if args.compile else 'eager'} attention")
    print("| rule | batch | cache | engine | tokens/s | tokens/fwd | NFE | sequences | wall s "
          "| vs ref | same | model ms/call | outside ms/call |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for batch in args.batches:
        prompts = pool[:batch]
        for rule in args.rules:
            spec, kw = RULES[rule]
            steps = args.steps if rule == "low-confidence" else None
            ref_steps = steps or args.gen_length // args.block_length
            for cache in REFERENCES:
                best = dict.fromkeys(["unmask", "Fast-dLLM"]
                                     + ["unmask whole row"] * args.whole_row)
                for round_ in range(args.repeats + 1):  # round 0 warms up, untimed
                    for engine in best:  # round-robin: each engine once per round
                        with ModelSpans(model.hf, "cpu") as spans:
                            run = (_reference_run(model, prompts, kw, ref_steps, args, cache)
                                   if engine == "Fast-dLLM" else
                                   _unmask_run(model, prompts, spec, steps, args, cache,
                                               whole_row=engine != "unmask"))
                        run = (*run, spans.calls, spans.seconds)
                        if round_ and (best[engine] is None or run[0] < best[engine][0]):
                            best[engine] = run
                for engine, (wall, tokens, nfes, seqs, calls, inside) in best.items():
                    n_tok = batch * args.gen_length
                    same = tokens == best["Fast-dLLM"][1]
                    print(f"| {rule} | {batch} | {cache or 'none'} | {engine} | "
                          f"{n_tok / wall:,.0f} | {n_tok / sum(nfes):.2f} | "
                          f"{sum(nfes) / batch:.1f} | {sum(seqs) / batch:.1f} | {wall:.2f} | "
                          f"{best['Fast-dLLM'][0] / wall:.2f}x | "
                          f"{'yes' if same else 'no'} | {1e3 * inside / calls:.3f} | "
                          f"{1e3 * (wall - inside) / calls:.3f} |", flush=True)


if __name__ == "__main__":
    main()
