"""Constrained decoding: valid outputs, task accuracy, passes, the cost of a constrained pass
over an unconstrained one, and compile time, on the shipped text model and a subword model.

    PYTHONPATH=src python benchmarks/constraints.py [--prompts 20] [--vocab 50000]
        [--batches 1 64] [--threads 1] [--json out.json]

Part 1 (quality), the shipped character-level text MDM, ``--prompts`` arithmetic prompts
asking for JSON ``{"answer": <int>}`` (schema: one integer field), as many yes/no
questions asking for a label (choice ``yes`` / ``no``) and as many of reasoning-gym's
basic_arithmetic problems in the format the model was trained on (regex ``-?[0-9]+``,
judged by the task's verifier; needs reasoning-gym), each decoded unconstrained and
constrained (eb:gamma=0.1, 32 tokens in blocks of 8): valid % (the text parses and matches),
accuracy % (the right number / label), mean passes, wall.
Part 2 (cost), a pass's wall constrained over unconstrained at each batch (the same
prompts, ``confidence``: one token a pass, so both take the same passes; ms/pass = best of
3 decode walls over the passes), on the shipped model and on a random 2-layer MDM over a
byte-level BPE of ``--vocab`` tokens trained here on Python's standard library: the JSON
schema's automaton (its states S and token classes C printed).
Part 3: compile time of each language (cold cache) per tokenizer.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from pathlib import Path

import torch

from unmask import constraints
from unmask.constraints import compile as compiling
from unmask.decode import DecodeConfig, decode
from unmask.generate import generate, prompt_batch, text_constraint
from unmask.models import MDMTransformer, TransformerConfig
from unmask.models.auto import load_model

SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer"}},
          "required": ["answer"]}
LABEL = constraints.choice("yes", "no")
JSON = constraints.json_schema(SCHEMA)
NUMBER = constraints.regex("-?[0-9]+")


def tasks(n: int, seed: int = 0):
    """n arithmetic prompts (answer an int) and n yes/no questions (answer a label)."""
    rng = random.Random(seed)
    arith, labels = [], []
    for _ in range(n):
        a, b = rng.randint(1, 20), rng.randint(1, 20)
        arith.append((f"What is {a} + {b}? Reply with JSON like {{\"answer\": 0}}.", a + b))
        k = rng.randint(1, 30)
        labels.append((f"Is {k} an even number? Answer yes or no.",
                       "yes" if k % 2 == 0 else "no"))
    return arith, labels


def _json_answer(text: str):
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None, False
    ok = isinstance(value, dict) and set(value) == {"answer"} and type(value["answer"]) is int
    return (value["answer"] if ok else None), ok


def gym_arithmetic(n: int):
    """reasoning-gym's basic_arithmetic problems, in the format the shipped model was trained
    on (its answer a bare integer), with their verifier; None without reasoning-gym."""
    try:
        from unmask.reasoning.tasks import get_tasks

        task = get_tasks(["basic_arithmetic"])[0]
        items = task.items(n, 0)
    except Exception:  # noqa: BLE001 - an optional part
        return None
    return [(it.prompt, it) for it in items], task


def quality(model, n: int) -> list[dict]:
    arith, labels = tasks(n)
    rows = []
    plan = [("json", arith, JSON), ("label", labels, LABEL)]
    gym = gym_arithmetic(n)
    if gym is not None:
        plan.append(("number", gym[0], NUMBER))
    for name, items, spec in plan:
        for constrained in (False, True):
            t0 = time.perf_counter()
            gens = generate(model, None, [p for p, _ in items], gen_length=32, block_length=8,
                            sampler="eb:gamma=0.1", constraint=spec if constrained else None)
            wall = time.perf_counter() - t0
            valid = right = 0
            for g, (_, truth) in zip(gens, items, strict=True):
                text = g.text.strip() if not constrained else g.text
                if name == "json":
                    answer, ok = _json_answer(text)
                elif name == "number":  # the verifier judges the text
                    ok = re.fullmatch(NUMBER.value, text) is not None
                    answer, truth = ok and gym[1].correct(text, truth), True
                else:
                    answer, ok = text, text in ("yes", "no")
                valid += ok
                right += ok and answer == truth
            rows.append({"task": name, "constrained": constrained, "valid_pct":
                         100 * valid / n, "accuracy_pct": 100 * right / n,
                         "passes": sum(g.nfe for g in gens) / n, "wall_s": wall,
                         "cut_passes": (sum(g.constraint["cut_passes"] for g in gens) / n
                                        if constrained else 0.0)})
    return rows


def pass_cost(model, prompts_ids: list[list[int]], spec, batch: int) -> dict:
    """ms per pass unconstrained and constrained, ``batch`` rows of 32 generated tokens."""
    ids = [prompts_ids[i % len(prompts_ids)] for i in range(batch)]
    x, ends = prompt_batch(model, ids, 32, 32, pad_to_multiple_of=32)
    con = text_constraint(model, x, ends, spec)
    out = {}
    for label, c in (("free", None), ("constrained", con)):
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            res = decode(model, x, "confidence", DecodeConfig(block_size=32),
                         hooks=ends.hooks(), constraint=c)
            best = min(best, (time.perf_counter() - t0) / int(res.steps.max()))
        out[label] = 1000 * best
    states = con.delta.shape
    return {"batch": batch, "ms_pass_free": out["free"], "ms_pass_constrained":
            out["constrained"], "ratio": out["constrained"] / out["free"],
            "states": states[0], "classes": states[1]}


def subword_model(vocab: int, seed: int = 0):
    """A random 2-layer MDM over a byte-level BPE of ``vocab`` tokens trained on the
    standard library's Python files (no download)."""
    import tokenizers
    import transformers

    text, size = [], 0
    for f in sorted(Path(sys.modules["json"].__file__).parents[1].rglob("*.py")):
        text.append(f.read_text(encoding="utf-8", errors="ignore"))
        size += len(text[-1])
        if size > 24_000_000:  # enough text for a 50k vocabulary
            break
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=["[PAD]", "[MASK]", "[EOS]"], show_progress=False,
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(text, trainer)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]",
                                                mask_token="[MASK]", eos_token="[EOS]")
    size = len(fast)
    torch.manual_seed(seed)
    real = [i for i in range(size) if i != 1]
    cfg = TransformerConfig(vocab_size=size, mask_id=1, max_length=128, d_model=64,
                            n_layers=2, n_heads=4, d_ff=128, real_token_ids=real)
    model = MDMTransformer(cfg).eval()
    model.tokenizer, model.eos_ids, model.pad_id = fast, (2,), 0
    return model


def compile_times(model, specs) -> list[dict]:
    rows = []
    for name, spec in specs:
        compiling._CACHE.clear()
        t0 = time.perf_counter()
        x = torch.full((1, 64), model.mask_id)
        from unmask.constraints.dfa import DFAConstraint

        con = DFAConstraint(spec)
        con.prepare(model, x)
        rows.append({"language": name, "compile_s": time.perf_counter() - t0,
                     "states": con.delta.shape[0], "classes": con.delta.shape[1]})
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--prompts", type=int, default=20)
    p.add_argument("--vocab", type=int, default=50000)
    p.add_argument("--batches", type=int, nargs="+", default=[1, 64])
    p.add_argument("--subword-batches", type=int, nargs="+", default=[1, 16],
                   help="batches of the subword model (its logits take B x 64 x vocab floats)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    text = load_model("text", task="text")
    result = {"quality": quality(text, args.prompts)}
    print("part 1: shipped text model, eb:gamma=0.1, 32 tokens in blocks of 8")
    print(f"{'task':6} {'constr.':8} {'valid %':>8} {'acc. %':>7} {'passes':>7} {'cut':>5} "
          f"{'wall s':>7}")
    for r in result["quality"]:
        print(f"{r['task']:6} {str(r['constrained']):8} {r['valid_pct']:8.1f} "
              f"{r['accuracy_pct']:7.1f} {r['passes']:7.1f} {r['cut_passes']:5.2f} "
              f"{r['wall_s']:7.2f}")
    t0 = time.perf_counter()
    sub = subword_model(args.vocab)
    print(f"subword model: BPE of {len(sub.tokenizer)} tokens trained in "
          f"{time.perf_counter() - t0:.1f} s")
    arith, _ = tasks(8)
    cost = []
    for name, model in (("text", text), ("subword", sub)):
        ids = [model.tokenizer(p)["input_ids"][:24] for p, _ in arith]
        for b in (args.batches if name == "text" else args.subword_batches):
            cost.append({"model": name, "vocab": model.vocab_size,
                         **pass_cost(model, ids, JSON, b)})
    result["cost"] = cost
    print("part 2: ms per pass, confidence, 32 generated tokens, JSON schema constraint")
    print(f"{'model':8} {'vocab':>6} {'batch':>5} {'S':>4} {'C':>5} {'free':>8} "
          f"{'constr.':>8} {'ratio':>6}")
    for r in cost:
        print(f"{r['model']:8} {r['vocab']:6d} {r['batch']:5d} {r['states']:4d} "
              f"{r['classes']:5d} {r['ms_pass_free']:8.2f} {r['ms_pass_constrained']:8.2f} "
              f"{r['ratio']:6.2f}")
    specs = [("json schema (1 int)", JSON), ("choice yes/no", LABEL),
             ("regex [0-9]{3}-[0-9]{4}", constraints.regex("[0-9]{3}-[0-9]{4}")),
             ("json_object (depth 2)", constraints.json_object(2))]
    result["compile"] = [{"model": n, **r} for n, m in (("text", text), ("subword", sub))
                         for r in compile_times(m, specs)]
    print("part 3: compile time (cold) per language and tokenizer")
    for r in result["compile"]:
        print(f"{r['model']:8} {r['language']:26} {r['compile_s']:7.2f} s  "
              f"S={r['states']} C={r['classes']}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
