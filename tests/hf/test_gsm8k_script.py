"""scripts/gsm8k_gpu.py (the Info-Gain paper's GSM8K comparison through the lm-eval model
type) in its --dry-run form, on a tiny random LLaDA built from LLaDA's own code."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from dllm_models import write_llada

pytest.importorskip("lm_eval")
ROOT = Path(__file__).resolve().parents[2]


def _run(*argv):
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "PYTHONPATH": str(ROOT / "src"),
           "TORCHDYNAMO_DISABLE": "1"}
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "gsm8k_gpu.py"), *argv],
                          env=env, capture_output=True, text=True, timeout=600)


def test_dry_run_reports_every_column(tmp_path):
    model = write_llada(tmp_path / "llada")
    data = tmp_path / "gsm8k.jsonl"
    data.write_text("".join(json.dumps({"question": q, "answer": f"w5 w6 #### {a}"}) + "\n"
                            for q, a in [("w5 w6", 3), ("w7 w8 w9", 12), ("w10", 1)]))
    run = _run("--model", str(model), "--data", str(data), "--out", str(tmp_path / "out"),
               "--dry-run", "--samplers", "confidence", "info-gain")
    assert run.returncode == 0, run.stderr[-3000:]
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["rows"]
    assert [r["sampler"] for r in rows] == ["confidence", "info-gain"]
    for r in rows:
        assert r["questions"] == 2 and 0.0 <= r["accuracy"] <= 1.0 and r["wall_s"] > 0
        assert r["tokens_per_forward"] == pytest.approx(8 / r["nfe"])
    assert rows[0]["nfe"] == 8  # confidence: one token per step, steps = gen_length
    table = (tmp_path / "out" / "results.md").read_text().splitlines()
    assert table[0].startswith("| sampler | accuracy | NFE") and len(table) == 4


def test_missing_data_is_one_line(tmp_path):
    run = _run("--model", str(tmp_path), "--data", str(tmp_path / "absent.jsonl"),
               "--out", str(tmp_path / "out"), "--dry-run")
    assert run.returncode == 2 and run.stderr.strip().startswith("error: --data:")
    assert len(run.stderr.strip().splitlines()) == 1
