"""The Info-Gain paper's GSM8K comparison (arXiv 2602.18176, Table 1 setting) through the
``unmask`` lm-eval model type, on a local LLaDA-8B-Instruct or Dream-7B-Instruct folder and a
GPU: confidence, margin, entropy, EB, Fast-dLLM threshold and Info-Gain, 0-shot, greedy,
gen_length 256, block 32, one token per step for the count rules (steps 256).

    python scripts/gsm8k_gpu.py --model /models/LLaDA-8B-Instruct \\
        --data gsm8k_test.jsonl [--limit 200] [--batch-size 8] [--out runs/gsm8k]

``--data`` is GSM8K's test split as JSONL (``question``, ``answer`` with ``#### N``; nothing
is downloaded). Prints and writes (``--out``/results.json, results.md) per sampler: accuracy
(lm-eval's GSM8K flexible-extract exact match), mean NFE, tokens per forward
(gen_length / NFE) and wall seconds. ``--dry-run`` runs the same path on the CPU with 2
questions and gen_length 8, to check a folder and the set-up before renting a GPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

#: the paper's comparison: (label, sampler spec with ';' between parameters, count rule)
SAMPLERS = [
    ("confidence", "confidence", True),
    ("margin", "margin", True),
    ("entropy", "entropy", True),
    ("eb", "eb:gamma=0.1", False),
    ("threshold", "threshold:tau=0.9", False),
    ("info-gain", "info-gain:n_candidates=8;tau_pos=0.2;bypass=0.8;bypass_rule=block;"
                   "dedupe=positions;draw=gumbel", True),
]

TASK_YAML = """task: unmask_gsm8k_local
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{question}}}}"
doc_to_target: "{{{{answer.split('####')[-1].strip()}}}}"
generation_kwargs:
  until: ["Question:"]
  do_sample: false
filter_list:
  - name: flexible-extract
    filter:
      - function: regex
        group_select: -1
        regex_pattern: "(-?[$0-9.,]{{2,}})|(-?[0-9]+)"
      - function: take_first
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: false
    regexes_to_ignore: [",", "\\\\$", "(?s).*#### ", "\\\\.$"]
"""


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="local checkpoint folder (its own code)")
    ap.add_argument("--data", required=True, help="GSM8K test split, JSONL")
    ap.add_argument("--out", default="runs/gsm8k")
    ap.add_argument("--limit", type=int, default=None, help="first N questions (all)")
    ap.add_argument("--samplers", nargs="+", default=[s[0] for s in SAMPLERS],
                    choices=[s[0] for s in SAMPLERS])
    ap.add_argument("--gen-length", type=int, default=256)
    ap.add_argument("--block-length", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--no-chat", action="store_true",
                    help="plain prompts (a base model); default: the tokenizer's chat template")
    ap.add_argument("--dry-run", action="store_true",
                    help="CPU, 2 questions, gen_length 8, block 4, float32")
    args = ap.parse_args(argv)
    if args.dry_run:
        args.device, args.dtype, args.limit = "cpu", "float32", 2
        args.gen_length, args.block_length = 8, 4
    return args


def run_sampler(args, label: str, spec: str, counts: bool, task_dir: Path) -> dict:
    """One sampler over the task: accuracy, NFE, tokens per forward, wall."""
    from lm_eval import simple_evaluate
    from lm_eval.api.registry import get_model
    from lm_eval.tasks import TaskManager

    import unmask.lm_eval_model  # noqa: F401 - registers the model type

    lm = get_model("unmask")(
        pretrained=args.model, sampler=spec, gen_length=args.gen_length,
        block_length=args.block_length, steps=args.gen_length if counts else None,
        chat_template=not args.no_chat, batch_size=args.batch_size, trust_remote_code=True,
        dtype=args.dtype, device=args.device)
    t0 = time.perf_counter()
    out = simple_evaluate(model=lm, tasks=["unmask_gsm8k_local"], limit=args.limit,
                          num_fewshot=0, task_manager=TaskManager(include_path=str(task_dir)))
    wall = time.perf_counter() - t0
    nfe = statistics.fmean(lm.nfe) if lm.nfe else float("nan")
    metrics = out["results"]["unmask_gsm8k_local"]
    return {"sampler": label, "spec": spec, "questions": len(lm.nfe),
            "accuracy": metrics["exact_match,flexible-extract"], "nfe": nfe,
            "tokens_per_forward": args.gen_length / nfe, "wall_s": wall}


def main(argv=None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data = Path(args.data).resolve()
    if not data.is_file():
        print(f"error: --data: {data} is not a file", file=sys.stderr)
        return 2
    (out / "gsm8k_local.yaml").write_text(TASK_YAML.format(data=data))
    from unmask.errors import UnmaskError

    rows = []
    for label, spec, counts in SAMPLERS:
        if label in args.samplers:
            try:
                rows.append(run_sampler(args, label, spec, counts, out))
            except UnmaskError as e:
                print(f"error: {e}", file=sys.stderr)
                return 2
            print(json.dumps(rows[-1]), flush=True)
    table = ["| sampler | accuracy | NFE | tokens/forward | wall s |", "|---|---|---|---|---|"]
    table += [f"| {r['sampler']} | {r['accuracy']:.3f} | {r['nfe']:.1f} | "
              f"{r['tokens_per_forward']:.2f} | {r['wall_s']:.0f} |" for r in rows]
    (out / "results.json").write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))
    (out / "results.md").write_text("\n".join(table) + "\n")
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
