"""What the decode loop and each sampler cost per pass without a model, and how many host
reads (device synchronisations on a GPU) each makes per pass, against confidence decoding.

The model is :class:`~unmask.models.toy.FixedOutputModel`: fixed random logits and hidden
states, expanded to the batch at no cost, so the wall is the loop's work (log-softmax,
proposals, bookkeeping, the write) plus the sampler's selection (plus, for samplers that run
the model themselves, their own batching around the zero-cost model). Sudoku's shape: 81
positions, 9 tokens, ``--blanks`` of them masked (48: a Sudoku's share), one block.

    PYTHONPATH=src python benchmarks/loop_overhead.py [--batches 1 64 1000] [--repeats 2]
        [--threads 1] [--only confidence eb ...] [--json out.json]

Columns: ms/pass = what a pass costs: (best-of-``--repeats`` decode wall - the best wall of a
decode of rows with one masked position) / (the difference of their passes), passes being
the rows' largest step count, so that what a decode costs once is not spread over the passes of a
sampler that takes few (every sampler decoded once per round, round-robin, after an untimed
round; the JSON's ``ms_per_pass_whole`` is the wall over the passes);
vs conf = ms/pass over confidence's at the same batch (target <= 1.2x except the lookahead
samplers info-gain and lookum, which evaluate candidates every pass, and the rows that run a
model call or a network of their own, :data:`OWN_CALLS`); passes; wall s (best round);
sequences/row/pass: sequences the model evaluated per row per pass (verified passes and WINO
evaluate a second state each pass). mi-guided and demask run their MI estimator, and the
corrector its network, each a network of its own; their rows "(zero-cost ...)" give it a
fixed answer, so the wall is the selection rule's (the hooks') alone.
Host reads per pass: :func:`unmask.host_reads.count_host_reads` over one decode at
batch 64 less the reads a decode makes once (the input check), divided by its passes; the
loop's own count is confidence's (its ``select`` reads nothing).
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from unmask import Verified, decode, make_sampler
from unmask.host_reads import as_on_accelerators, count_host_reads
from unmask.models.toy import FixedOutputModel
from unmask.samplers.base import available_samplers
from unmask.samplers.spec import parse_spec

#: samplers that evaluate candidate next states every pass (exempt from the 1.2x target)
LOOKAHEAD = ("info-gain", "lookum")
#: rows that run a model call or a network of their own each pass (exempt from the target:
#: verified passes, WINO and mi-oracle's probes call the model again; the rows
#: "(zero-cost ...)" carry the target for the estimator's and the corrector's)
OWN_CALLS = ("mi-guided", "demask", "mi-oracle", "confidence+corrector", "eb+verify",
             "eb+verify (doubling)", "topk:k=3+verify=0", "threshold:tau=0.7+wino=0.9",
             "eb+verify (stop at EOS)")


def _estimator(model):
    from unmask.mi.estimator import EstimatorConfig, MIEstimator

    torch.manual_seed(0)
    return MIEstimator(EstimatorConfig(hidden_size=model.hidden_size))


def _corrector(model):
    from unmask.corrector import Corrector, CorrectorConfig

    torch.manual_seed(0)
    return Corrector(CorrectorConfig.for_model(model, d=8, n_heads=2))


def _fixed_corrector(corrector, model):
    """``corrector`` with a zero-cost network: its answer on the model's fixed pass over the
    decoded argmax tokens, computed once and expanded to every batch (the corrector is a
    network of its own, like the model), so the wall is the hooks' own work."""
    tokens = model.logits[None, :, :model.v].argmax(-1)
    with torch.inference_mode():
        fixed = corrector.wrong_probs(model(tokens), tokens)[0]  # (N,)

    def wrong_probs(output, tokens):
        return fixed.expand(tokens.shape[0], -1)

    corrector.wrong_probs = wrong_probs
    return corrector


def _fixed_mi(sampler, model):
    """``sampler`` (mi-guided or demask) with a zero-cost dependence head: the estimator's
    MI on the model's fixed hidden states, computed once and expanded to every batch, so
    the wall is the selection rule's alone (the estimator is a network of its own, like the
    model)."""
    head = getattr(sampler, "_mi", sampler)
    head.prepare(model)
    x = torch.full((1, model.n), model.mask_id, dtype=torch.long)
    with torch.inference_mode():
        out = model(x, output_hidden_layers=head.needs_hidden_layers)
        est = head.estimator
        fixed = est(est.features(out, model), x == model.mask_id)[0]  # (N, N)

    def mutual_information(state, rows=None):
        return fixed.expand(state.tokens.shape[0], -1, -1)

    head.mutual_information = mutual_information
    head.prepare = lambda model: None
    return sampler


#: parameters a registered sampler needs beyond its defaults (a function of the model)
PARAMS = {
    "mi-guided": lambda m: {"estimator": _estimator(m), "gamma": 1.0},
    "mi-oracle": lambda m: {"gamma": 1.0, "eps": 0.0},
    # a bound under which the (seeded) estimator's dependence lets a pass take a few positions
    "demask": lambda m: {"estimator": _estimator(m), "bound": 0.02},
}


def cases() -> dict:
    """label -> build(model) -> (sampler, hooks): every registered sampler with its defaults,
    verified passes (all prefixes and doubling), and the hooks (corrector, WINO, ReMDM)."""
    from unmask.hooks import corrector_hooks

    out = {name: (lambda m, n=name: (make_sampler(n, **PARAMS.get(n, lambda _: {})(m)), ()))
           for name in available_samplers()}
    for name in ("mi-guided", "demask"):
        out[f"{name} (zero-cost estimator)"] = lambda m, n=name: (
            _fixed_mi(make_sampler(n, **PARAMS[n](m)), m), ())
    out["eb+verify"] = lambda m: (Verified(make_sampler("eb")), ())
    out["eb+verify (doubling)"] = lambda m: (Verified(make_sampler("eb"), prefixes="doubling"),
                                             ())
    out["topk:k=3+verify=0"] = lambda m: (Verified(make_sampler("topk", k=3), tolerance=0.0),
                                          ())
    out["confidence+corrector"] = lambda m: (make_sampler("confidence"),
                                             corrector_hooks(_corrector(m), max_remasks=1))
    out["confidence+corrector (zero-cost corrector)"] = lambda m: (
        make_sampler("confidence"),
        corrector_hooks(_fixed_corrector(_corrector(m), m), max_remasks=1))
    for spec in ("threshold:tau=0.7+wino=0.9", "topk:k=2+remdm=0.05"):
        out[spec] = lambda m, s=spec: (parse_spec(s).build(), ())
    out["eb (stop at EOS)"] = lambda m: (_stop_at_eos(make_sampler("eb"), m), ())
    out["eb+verify (stop at EOS)"] = lambda m: (_stop_at_eos(Verified(make_sampler("eb")), m),
                                                ())
    return out


def _stop_at_eos(sampler, model):
    """``sampler`` as ``generate`` wraps it: a row whose last block of 9 is all EOS (here
    the model's first token) ends."""
    from unmask.generate import StopAtEOS

    return StopAtEOS(sampler, eos_id=model.real_token_ids[0], block=9, gen_start=0)


def masked(model: FixedOutputModel, batch: int, blanks: int | None = None) -> torch.Tensor:
    """(batch, N) inputs: every position masked, or ``blanks`` per row (the first ones of a
    fixed random order; the others hold the fixed argmax tokens)."""
    x = torch.full((batch, model.n), model.mask_id, dtype=torch.long)
    if blanks is not None and blanks < model.n:
        given = torch.randperm(model.n, generator=torch.Generator().manual_seed(0))[blanks:]
        x[:, given] = model.logits[given, :model.v].argmax(-1)
    return x


def time_per_pass(model, build, batch: int, repeats: int) -> dict:
    """Best-of-``repeats`` wall of one decode of ``batch`` fully masked rows, per pass."""
    return time_round_robin(model, {"one": build}, batch, repeats)["one"]


def time_round_robin(model, builds: dict, batch: int, repeats: int,
                     blanks: int | None = None) -> dict:
    """label -> the best-of-``repeats`` walls of one decode of ``batch`` rows with ``blanks``
    masked positions each (None: all) and of one with a single masked position (one pass),
    every label once per round (so a slow spell of a shared machine hits them alike); below
    batch 1000 a first round warms up, untimed. ``ms_per_pass`` is the difference of the two
    over the difference of their passes: what a pass costs, without what a decode costs once
    (its setup, the result, the first pass's checks), which a sampler that takes few passes
    would otherwise spread over them; ``ms_per_pass_whole`` is the decode's wall over its
    passes."""
    xs = {"wall_s": masked(model, batch, blanks), "one_pass_wall_s": masked(model, batch, 1)}
    best = {label: {"wall_s": float("inf"), "one_pass_wall_s": float("inf"), "passes": 0,
                    "sequences_per_pass": 0.0} for label in builds}
    first = 0 if batch < 1000 else 1
    for round_ in range(first, repeats + 1):
        for label, build in builds.items():
            for key, x in xs.items():
                sampler, hooks = build(model)
                t0 = time.perf_counter()
                res = decode(model, x, sampler, hooks=hooks, seed=0)
                passes = int(res.steps.max())  # the copy back waits for the device
                wall = time.perf_counter() - t0
                if round_ and wall < best[label][key]:
                    best[label][key] = wall
                    if key == "wall_s":
                        best[label].update(passes=passes, sequences_per_pass=float(
                            res.sequences.sum() / res.steps.sum().clamp(min=1)))
                    else:  # one pass, or more where a hook masks again
                        best[label]["one_passes"] = passes
    for t in best.values():
        t["ms_per_pass_whole"] = 1e3 * t["wall_s"] / max(t["passes"], 1)
        more = t["passes"] - t["one_passes"]
        t["ms_per_pass"] = (1e3 * (t["wall_s"] - t["one_pass_wall_s"]) / more if more > 0
                            else t["ms_per_pass_whole"])
    return best


def host_reads_per_pass(model, build, batch: int = 64, config=None):
    """(reads per pass, passes, reads by calling line) of one decode of ``batch`` fully masked
    rows, less the reads a decode makes once: checking the input (counted on a batch with
    nothing to decode) and the first pass's logits (:func:`unmask.models.handle.check_logits`,
    one read). The scans and the row noise run as on an accelerator
    (:func:`as_on_accelerators`): on the CPU they run as host loops that read their inputs
    there, reads that stall nothing."""
    sampler, hooks = build(model)
    x = masked(model, batch)
    with as_on_accelerators(), count_host_reads() as once:
        decode(model, torch.zeros_like(x), sampler, config, hooks=hooks)
    with as_on_accelerators(), count_host_reads(sites=True) as reads:
        res = decode(model, x, sampler, config, hooks=hooks, seed=0)
    passes = int(res.steps.max())
    # the first pass's check of the model's logits is made once a decode too
    first = sum(n for site, n in reads.by_site.items() if site.endswith(" check_logits"))
    return (reads.total - once.total - first) / max(passes, 1), passes, reads.by_site


def _row(label: str, r: dict, base: dict, batches: list[int]) -> str:
    cells = []
    for b in batches:
        t = r[f"b{b}"]
        t["vs_confidence"] = t["ms_per_pass"] / base[f"b{b}"]["ms_per_pass"]
        flag = ("" if t["vs_confidence"] <= 1.2 else " ~" if label in LOOKAHEAD + OWN_CALLS
                else " !")
        cells.append(f"{t['ms_per_pass']:.3f} ({t['vs_confidence']:.2f}x{flag}, {t['passes']})")
    extra = r["host_reads_per_pass"] - base["host_reads_per_pass"]
    seqs = r[f"b{batches[-1]}"]["sequences_per_pass"]
    return (f"| {label} | " + " | ".join(cells) + f" | {seqs:.2f}"
            + f" | {r['host_reads_per_pass']:.2f} ({extra:+.2f}) |")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 64, 1000])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--blanks", type=int, default=48,
                    help="masked positions per row (of 81; a hard Sudoku has 55-60)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", nargs="+", help="labels to run (default: all)")
    ap.add_argument("--json", help="also write the tables here")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    model = FixedOutputModel()
    table = {k: v for k, v in cases().items() if not args.only or k in args.only}
    if "confidence" not in table:
        table = {"confidence": cases()["confidence"], **table}
    rows, t_start = {}, time.perf_counter()
    print("| sampler | " + " | ".join(f"b={b} ms/pass (vs conf, passes)" for b in args.batches)
          + f" | sequences/row/pass (b={args.batches[-1]}) | host reads/pass (vs loop) |")
    print("|---" * (len(args.batches) + 3) + "|")
    for label, build in table.items():
        per, n_pass, _ = host_reads_per_pass(model, build)
        rows[label] = {"host_reads_per_pass": per, "host_read_passes": n_pass}
    for b in args.batches:
        for label, t in time_round_robin(model, table, b, args.repeats,
                                         args.blanks).items():
            rows[label][f"b{b}"] = t
    for label, r in rows.items():
        print(_row(label, r, rows["confidence"], args.batches), flush=True)
    print(f"\nwall {time.perf_counter() - t_start:.1f} s, {args.threads} thread(s), "
          f"torch {torch.__version__}; ! = above the 1.2x target; ~ = above, exempt "
          "(lookahead, or a model call or network of its own)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"batches": args.batches, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
