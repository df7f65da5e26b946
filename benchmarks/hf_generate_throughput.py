"""Throughput of `unmask.generate` per sampler beside diffusers' LLaDA2Pipeline
(BlockRefinementScheduler), on the same tiny random LLaDA-style model, at the same batch,
prompt, gen_length and block_length, in one run.

    PYTHONPATH=src:tests/hf python benchmarks/hf_generate_throughput.py \\
        [--batches 1 32] [--repeats 3] [--threads 1] [--device cuda] [--whole-row] \\
        [--json OUT.json]

The model is the test helpers' LLaDA-style model (code in its folder, trust_remote_code),
block-causal (a position reads only positions at or before it; its config says ``causal``),
because the pipeline runs the model on the prefix up to the current block: for such a model
the whole row gives the same logits. unmask runs it on the prefix too (samplers that read
eligible positions only); ``--whole-row`` adds, side by side, each such sampler run with every
position computed (the model on the whole row), so the rows show what the prefix saves. Its
output layer is scaled by ``--sharpen`` so that its predictions are confident enough for
adaptive samplers to reveal several positions a pass. Prompts are distinct word sequences of
exactly one block, so both place the blocks at the same positions.

The pipeline has three settings that are unmask rules exactly:

* ``top-1``: ``num_inference_steps = block_length``, ``threshold > 1`` (one most confident
  position per step; LLaDA's low-confidence remasking) = unmask ``confidence``;
* ``top-2``: ``num_inference_steps = block_length / 2``, ``threshold > 1`` = ``topk:k=2``;
* ``threshold``: ``threshold = 0.9``, at least one per step = ``threshold:tau=0.9``.

Each unmask sampler is compared with the pipeline setting that runs its rule, or else with the
one that reveals as many positions per pass (one: ``top-1``; a number the sampler chooses:
``threshold``). For the exact pairs, ``same`` says whether the tokens are identical.
diffusers' ``EntropyBoundScheduler`` does not drive this pipeline: it is a uniform-noise
scheduler (it re-draws rejected positions as random tokens; there is no mask) and its
``set_timesteps``/``step`` take none of the pipeline's block arguments.

Columns: tokens/s = batch * gen_length / wall; tokens/forward = batch * gen_length / (sum of
the rows' forward passes); NFE and sequences are per row, averaged over rows (the pipeline
runs every row in every pass of a block until the whole batch has filled it, so its per-row
NFE is its number of calls); wall s is the best of ``--repeats`` runs, timed round-robin (every
engine once per round, so that load from other processes falls on all alike; the JSON also
holds the median); vs peer = unmask wall / the pipeline's wall at the same batch.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

import torch
from gpu import ModelSpans

from unmask.generate import generate, parse_sampler
from unmask.io import atomic_path
from unmask.models.auto import load_model
from unmask.samplers.wrapper import EveryPosition

#: (spec, peer): {block} is filled in with --block-length
SPECS = [
    ("confidence", "top-1"),
    ("entropy", "top-1"),
    ("margin", "top-1"),
    ("topk:k=2", "top-2"),
    ("threshold:tau=0.9", "threshold"),
    ("eb:gamma=0.1", "threshold"),
    ("dus:block={block}", "threshold"),
    ("info-gain", "top-1"),
    ("mi-oracle:gamma=0.3", "threshold"),
    ("eb:gamma=1.0,order=confidence+verify=0.002", "threshold"),
]
#: unmask specs that are a pipeline setting exactly
EXACT = {"confidence": "top-1", "topk:k=2": "top-2", "threshold:tau=0.9": "threshold"}
#: --whole-row: the name of a spec run with every position computed
WHOLE = " (whole row)"


def build_sampler(name: str):
    """The sampler a row name runs: its spec, or (suffix ``WHOLE``) the spec with the decode
    loop computing every position (:class:`~unmask.samplers.wrapper.EveryPosition`)."""
    if name.endswith(WHOLE):
        return EveryPosition(parse_sampler(name[:-len(WHOLE)]))
    return name


def peer_settings(block: int) -> dict[str, dict]:
    """The pipeline's keyword arguments per peer name."""
    common = dict(use_chat_template=False, editing_threshold=None, minimal_topk=1,
                  eos_early_stop=False, sampling_method="greedy", temperature=0.0,
                  output_type="seq")
    return {"top-1": dict(common, num_inference_steps=block, threshold=1.5),
            "top-2": dict(common, num_inference_steps=max(block // 2, 1), threshold=1.5),
            "threshold": dict(common, num_inference_steps=block, threshold=0.9)}


def make_prompts(n: int, length: int, words: list[str], seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(length)) for _ in range(n)]


def unmask_job(model, prompts, spec, gen, block):
    """A callable running unmask once; returns (mean NFE, mean sequences, tokens per row)."""
    def once():
        out = generate(model, None, prompts, sampler=build_sampler(spec), gen_length=gen,
                       block_length=block, stop_at_eos=False)
        return (statistics.mean(o.nfe for o in out), statistics.mean(o.sequences for o in out),
                [o.token_ids for o in out])
    return once


def diffusers_job(pipe, model, ids, gen, block, kwargs):
    """A callable running the pipeline once; returns (calls, calls, tokens per row)."""
    def once():
        with ModelSpans(model.hf, "cpu") as spans:
            out = pipe(input_ids=ids, gen_length=gen, block_length=block, **kwargs)
        return spans.calls, spans.calls, out.sequences.tolist()
    return once


def time_round_robin(jobs: list, repeats: int) -> list[tuple[float, float, tuple]]:
    """Run every job once (warm-up), then ``repeats`` rounds of every job in turn, so that a
    change of load on the machine falls on all of them alike. Returns per job (best wall,
    median wall, its result)."""
    results = [job() for job in jobs]
    walls: list[list[float]] = [[] for _ in jobs]
    for _ in range(repeats):
        for i, job in enumerate(jobs):
            t0 = time.perf_counter()
            job()
            walls[i].append(time.perf_counter() - t0)
    return [(min(w), statistics.median(w), r) for w, r in zip(walls, results, strict=True)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--gen-length", type=int, default=32)
    ap.add_argument("--block-length", type=int, default=8)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 32])
    ap.add_argument("--samplers", nargs="+", default=None,
                    help="unmask specs (default: the built-in list); each is compared with "
                         "the top-1 pipeline run unless it is in the built-in list")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs each; the best counts")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--sharpen", type=float, default=4.0,
                    help="scale the model's output layer by this (a random model's predictions "
                         "are nearly flat; sharper ones let adaptive samplers reveal several "
                         "positions a pass)")
    ap.add_argument("--whole-row", action="store_true",
                    help="also run each sampler that reads eligible positions only with every "
                         "position computed (the model on whole rows, distributions at every "
                         "position), named '<spec> (whole row)'")
    ap.add_argument("--json", default=None, help="write the rows here")
    args = ap.parse_args()
    import diffusers
    import tiny_models

    torch.set_num_threads(args.threads)
    g, blk = args.gen_length, args.block_length
    folder = tiny_models.write_llada(Path(tempfile.mkdtemp()) / "m", causal=True, seed=1,
                                     layers=args.layers)
    model = load_model(folder, trust_remote_code=True, device=args.device)
    with torch.no_grad():
        model.hf.head.weight.mul_(args.sharpen)
        model.hf.head.bias.mul_(args.sharpen)
    tok = model.tokenizer
    specs = [(s.format(block=blk), p) for s, p in SPECS]
    if args.samplers:
        known = dict(specs)
        specs = [(s, known.get(s, "top-1")) for s in args.samplers]
    if args.whole_row:
        specs += [(s + WHOLE, p) for s, p in specs if parse_sampler(s).reads_eligible_only]
    settings = peer_settings(blk)
    pipe = diffusers.LLaDA2Pipeline(model=model.hf,
                                    scheduler=diffusers.BlockRefinementScheduler(),
                                    tokenizer=tok)
    pipe.set_progress_bar_config(disable=True)
    rows = []
    head = (f"{'sampler':<44} {'batch':>5} {'tokens/s':>9} {'tok/fwd':>8} {'NFE':>6} "
            f"{'seqs':>7} {'wall s':>8} {'vs peer':>8} {'peer':>10} {'same':>5}")
    print(head, flush=True)
    for b in args.batches:
        prompts = make_prompts(b, blk, tiny_models.WORDS, seed=b)
        ids = torch.tensor([tok(p)["input_ids"] for p in prompts], device=args.device)
        assert ids.shape == (b, blk), "each prompt must be one block of tokens"
        jobs = [diffusers_job(pipe, model, ids, g, blk, kwargs) for kwargs in settings.values()]
        jobs += [unmask_job(model, prompts, spec, g, blk) for spec, _ in specs]
        timed = time_round_robin(jobs, args.repeats)
        peers = {}
        for name, (wall, median, (calls, _, seqs)) in zip(settings, timed, strict=False):
            peers[name] = (wall, seqs)
            row = dict(engine="diffusers", sampler=f"LLaDA2Pipeline {name}", batch=b,
                       tokens_per_s=b * g / wall, tokens_per_forward=g / calls, nfe=calls,
                       sequences=calls, wall_s=wall, median_wall_s=median, vs_peer=1.0,
                       peer=name, same=None)
            rows.append(row)
            _print(row)
        for (spec, peer), (wall, median, (nfe, seqs, tokens)) in zip(
                specs, timed[len(settings):], strict=True):
            exact = EXACT.get(spec.removesuffix(WHOLE)) == peer
            same = tokens == peers[peer][1] if exact else None
            row = dict(engine="unmask", sampler=spec, batch=b, tokens_per_s=b * g / wall,
                       tokens_per_forward=g / nfe, nfe=nfe, sequences=seqs, wall_s=wall,
                       median_wall_s=median, vs_peer=wall / peers[peer][0], peer=peer,
                       same=same)
            rows.append(row)
            _print(row)
    if args.json:
        meta = dict(gen_length=g, block_length=blk, batches=args.batches,
                    repeats=args.repeats, threads=args.threads, layers=args.layers,
                    sharpen=args.sharpen,
                    device=args.device, torch=torch.__version__,
                    diffusers=diffusers.__version__)
        with atomic_path(args.json) as tmp:
            tmp.write_text(json.dumps({"settings": meta, "rows": rows}, indent=1) + "\n")


def _print(r: dict) -> None:
    same = "-" if r["same"] is None else ("yes" if r["same"] else "no")
    name = ("" if r["engine"] == "unmask" else "diffusers ") + r["sampler"].replace(
        "LLaDA2Pipeline ", "")
    print(f"{name:<44} {r['batch']:>5} {r['tokens_per_s']:>9.1f} "
          f"{r['tokens_per_forward']:>8.2f} {r['nfe']:>6.1f} {r['sequences']:>7.1f} "
          f"{r['wall_s']:>8.3f} {r['vs_peer']:>8.2f} {r['peer']:>10} {same:>5}", flush=True)


if __name__ == "__main__":
    main()
