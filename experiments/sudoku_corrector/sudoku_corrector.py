"""Can taking tokens back repair what parallel decoding gets wrong on Sudoku?

Four measurements, printed as tables:

0. The MDM itself as a corrector: how well its own probability of the current token, at the
   revealed positions of the states a sampler visits, separates wrong tokens from right ones
   (it is trained on masked positions only).
1. The learned corrector on its held-out decoding states (from ``unmask corrector train``'s
   ``OUT/states.pt``, the same split): AUC, and precision / recall at several thresholds.
2. A *perfect* corrector (it knows the solution: exactly the wrong decoded tokens are flagged,
   at every pass) on the boards a sampler fails: how many of them the decode loop repairs,
   with remasking alone and with ``ban_remasked``. This bounds what any corrector can do, and
   tells whether a wrong token comes back when its cell is decoded again.
3. Backtracking judged by the solution: decode; if the board is wrong, go back to the
   earliest commit made below a confidence, forbid that token there, keep only the cells
   revealed before it, and decode again (at most 3 times).

    PYTHONPATH=src .venv/bin/python experiments/sudoku_corrector/sudoku_corrector.py \
        --run runs/corrector \
        --limit 100 --threads 1
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from unmask.corrector import (
    Corrector,
    DecodedStates,
    compute_corrector_features,
    corrector_metrics,
    load_decoded_states,
    predict_wrong,
)
from unmask.decode import DecodeConfig, decode
from unmask.hooks import corrector_hooks
from unmask.metrics import held_out_mask, roc_auc
from unmask.models.auto import load_model
from unmask.models.base import MaskedModel, ModelOutput
from unmask.samplers import make_sampler
from unmask.sudoku.datasets import load_set
from unmask.sudoku.solver import is_valid_solution
from unmask.sudoku.tokens import grid_to_tokens, tokens_to_grid


class PerfectCorrector:
    """Flags exactly the decoded tokens that differ from the solution of each row."""

    def __init__(self, answers: torch.Tensor, mask_id: int):
        self.answers, self.mask_id = answers, mask_id

    def check_model(self, model):
        pass

    def wrong_probs(self, output, tokens):
        # rows are matched to their answer by the given cells (decoded one puzzle at a time)
        return ((tokens != self.answers) & (tokens != self.mask_id)).float()


class WithBans(MaskedModel):
    """``model`` with some (position, token) pairs forbidden (logit -inf)."""

    def __init__(self, model: MaskedModel, bans: list[tuple[int, int]]):
        super().__init__()
        self.model, self.bans = model, bans
        for k in ("vocab_size", "mask_id", "max_length", "hidden_size", "real_token_ids"):
            setattr(self, k, getattr(model, k))

    def forward(self, tokens, output_hidden_layers=False, **kw):
        out = self.model(tokens, output_hidden_layers=output_hidden_layers)
        logits = out.logits.clone()
        for pos, tok in self.bans:
            logits[:, pos, tok] = -torch.inf
        return ModelOutput(logits, out.hidden, out.hidden_layers)


class RecordConfidence:
    """Wraps a sampler; keeps p(x0) of each position at the pass it was revealed (one row)."""

    name = "record"

    def __init__(self, inner, n: int):
        self.inner, self.conf = inner, torch.ones(n)

    def begin(self, b, n):
        self.inner.begin(b, n)

    def select(self, state):
        sel = self.inner.select(state)
        self.conf = torch.where(sel.reveal[0], state.x0_prob[0].float(), self.conf)
        return sel


def held_out_table(run: Path, model) -> None:
    _, states = load_decoded_states(run / "states.pt")
    corrector = Corrector.load(run / "best", model=model)
    # the split it was trained with (runs that did not record it used the defaults)
    split = corrector.metadata.get("split", {"held_out": 0.1, "seed": 0})
    test = held_out_mask(states.groups, split["held_out"], split["seed"])
    sub = DecodedStates(*(t[test] for t in (states.tokens, states.wrong, states.decoded,
                                            states.groups)))
    probs = predict_wrong(corrector, compute_corrector_features(model, corrector, sub.tokens))
    full = (sub.tokens != model.mask_id).all(1)
    print(f"held-out states: {len(sub.tokens):,} ({int(full.sum()):,} finished boards)")
    print("threshold  positions  wrong     AUC  precision  recall   | finished boards: AUC  "
          "precision  recall")
    fin = DecodedStates(*(t[full] for t in (sub.tokens, sub.wrong, sub.decoded, sub.groups)))
    for t in (0.3, 0.5, 0.7):
        a, f = corrector_metrics(probs, sub, t), corrector_metrics(probs[full], fin, t)
        print(f"{t:9.1f}  {a['positions']:9,} {a['wrong']:6,}  {a['auc']:.3f}  "
              f"{a['precision']:9.3f}  {a['recall']:6.3f}   | {f['auc']:20.3f}  "
              f"{f['precision']:9.3f}  {f['recall']:6.3f}")


def mdm_as_corrector(model, puzzles, solutions, spec) -> None:
    from unmask.probs import real_log_probs

    x, answers = grid_to_tokens(puzzles), grid_to_tokens(solutions)
    res = decode(model, x, make_sampler(spec[0], **spec[1]), DecodeConfig(record_history=True))
    scores, wrong, prev = [], [], x
    for h in res.history:
        moved = (h != prev).any(1)
        prev = h
        if not moved.any():
            continue
        s = h[moved]
        probs = real_log_probs(model(s).logits, model.real_token_mask).exp()
        decoded = (s != model.mask_id) & (x[moved] == model.mask_id)
        current = probs.gather(-1, s.clamp(max=probs.shape[-1] - 1)[..., None])[..., 0]
        scores.append(-current[decoded])
        wrong.append((s != answers[moved])[decoded])
    y = torch.cat(wrong)
    print(f"the MDM's own p(current token) as a corrector, {spec[0]} {spec[1]} on "
          f"{len(puzzles)} puzzles: AUC {roc_auc(torch.cat(scores), y):.3f} "
          f"({int(y.sum()):,} wrong of {len(y):,} decoded tokens over the visited states)")


def perfect_corrector_table(model, puzzles, solutions, spec) -> None:
    x, answers = grid_to_tokens(puzzles), grid_to_tokens(solutions)
    sampler = make_sampler(spec[0], **spec[1])
    base = decode(model, x, sampler)
    ok = torch.as_tensor(is_valid_solution(tokens_to_grid(base.tokens), puzzles))
    fails = (~ok).nonzero().squeeze(1).tolist()
    print(f"{spec[0]} {spec[1]}: {int(ok.sum())} of {len(puzzles)} solved at "
          f"{base.nfe.double().mean():.1f} passes; {len(fails)} failed boards")
    print("perfect corrector                 repaired   passes on those boards (before)")
    for max_remasks, ban in ((1, False), (2, False), (1, True), (2, True)):
        repaired, nfe = 0, []
        for i in fails:
            res = decode(model, x[i:i + 1], make_sampler(spec[0], **spec[1]),
                         hooks=corrector_hooks(PerfectCorrector(answers[i:i + 1],
                                                                model.mask_id),
                                               max_remasks=max_remasks, ban_remasked=ban))
            repaired += bool(is_valid_solution(tokens_to_grid(res.tokens), puzzles[i:i + 1])[0])
            nfe.append(res.nfe.item())
        print(f"max_remasks={max_remasks} ban={str(ban):5}          {repaired:3d} / {len(fails)}"
              f"   {sum(nfe) / max(1, len(nfe)):.1f} ({base.nfe[fails].double().mean():.1f})")


def backtracking_table(model, puzzles, spec, below: float, attempts: int = 4) -> None:
    solved, first_ok, passes = 0, 0, 0
    for i in range(len(puzzles)):
        x, bans = grid_to_tokens(puzzles[i:i + 1]), []
        for attempt in range(attempts):
            rec = RecordConfidence(make_sampler(spec[0], **spec[1]), x.shape[1])
            res = decode(WithBans(model, bans) if bans else model, x, rec)
            passes += int(res.nfe.item())
            ok = bool(is_valid_solution(tokens_to_grid(res.tokens), puzzles[i:i + 1])[0])
            first_ok += ok and attempt == 0
            if ok:
                solved += 1
                break
            decoded = x[0] == model.mask_id
            cand = decoded & (rec.conf < below)
            cand = cand if cand.any() else decoded
            # the earliest pass's least confident commit below the bound
            key = res.reveal_step[0].double() * 10 + rec.conf.double()
            cell = int(key.masked_fill(~cand, torch.inf).argmin())
            step = int(res.reveal_step[0, cell])
            bans.append((cell, int(res.tokens[0, cell])))
            keep = decoded & (res.reveal_step[0] < step) & (res.reveal_step[0] >= 0)
            x = torch.where(keep, res.tokens[0], x[0])[None]
    print(f"backtrack to the earliest commit below p={below}, judged by the solution "
          f"(<= {attempts - 1} times): {first_ok} -> {solved} of {len(puzzles)} solved, "
          f"{passes / len(puzzles):.1f} passes per puzzle")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", default=None, help="unmask corrector train run folder (table 1)")
    ap.add_argument("--limit", type=int, default=100, help="first N hard puzzles (tables 2-3)")
    ap.add_argument("--gamma", type=float, default=0.3, help="EB budget (confidence order)")
    ap.add_argument("--below", type=float, nargs="+", default=[0.9, 0.8])
    ap.add_argument("--mdm-baseline", type=int, default=0, metavar="N",
                    help="also score the MDM itself as a corrector on the first N hard puzzles")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model = load_model("sudoku").eval()
    if args.run:
        held_out_table(Path(args.run), model)
    puzzles, solutions = load_set("hard")
    puzzles, solutions = puzzles[:args.limit], solutions[:args.limit]
    spec = ("eb", {"gamma": args.gamma, "order": "confidence"})
    with torch.inference_mode():
        if args.mdm_baseline:
            p, sol = load_set("hard")
            mdm_as_corrector(model, p[:args.mdm_baseline], sol[:args.mdm_baseline], spec)
        perfect_corrector_table(model, puzzles, solutions, spec)
        for below in args.below:
            backtracking_table(model, puzzles, spec, below)


if __name__ == "__main__":
    main()
