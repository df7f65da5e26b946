"""Copy a reasoning training run's weights into the package as the shipped 'text' model: bf16
weights, the tokenizer, generation_config.json (max_new_tokens) and the training record.

    python experiments/text_reasoning/ship.py runs/reasoning          # OUT/best
    python experiments/text_reasoning/ship.py runs/reasoning --last   # the last checkpoint
"""

import json
import sys
from pathlib import Path

import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer

run = Path(sys.argv[1])
dest = Path(__file__).resolve().parents[2] / "src/unmask/pretrained/text"
model = AutoModelForMaskedLM.from_pretrained(run / "best", local_files_only=True)
tokenizer = AutoTokenizer.from_pretrained(run / "best", local_files_only=True)
history = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
if "--last" in sys.argv:
    state = torch.load(run / "checkpoint.pt", map_location="cpu", weights_only=True)
    model.load_state_dict(state["model"])
    best = {"step": state["step"], "accuracy": history[-1].get("accuracy", float("nan")),
            "last_evaluation": history[-1]}
else:
    best = max((r for r in history if "accuracy" in r and not r.get("baseline")),
               key=lambda r: r["accuracy"])
model.to(torch.bfloat16).save_pretrained(dest)
tokenizer.save_pretrained(dest)
(dest / "generation_config.json").write_text(json.dumps({"max_new_tokens": 8}, indent=2) + "\n")
(dest / "training.json").write_text(json.dumps({"selected": best, "run": str(run)}, indent=2)
                                    + "\n")
print(f"shipped step {best['step']} (accuracy {best['accuracy']:.3f}) to {dest}")
