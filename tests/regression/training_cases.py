"""Short training runs of every trainer, pinned: the weights each run ends with.

Each case trains a tiny model for a few dozen steps on one thread with a fixed seed, through
the command line where the trainer has a command (so the flags -> configuration path is
pinned too), and returns the final weights' digest: the sha256 of their bytes (exact, for a
machine comparing itself before and after a change) and per-tensor float sums (checked
within a tolerance, since float reductions differ between CPU kernel sets).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

import torch

from unmask.cli import main

TINY_MDM = json.dumps({"d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32})


def digest(state: dict[str, torch.Tensor]) -> dict:
    """sha256 of the tensors' bytes (name order) and each tensor's float64 sum and abs sum."""
    h = hashlib.sha256()
    sums = {}
    for name in sorted(state):
        t = state[name].detach().cpu().contiguous()
        h.update(name.encode())
        h.update(t.numpy().tobytes())
        d = t.double()
        sums[name] = [round(float(d.sum()), 9), round(float(d.abs().sum()), 9)]
    return {"sha256": h.hexdigest(), "sums": sums}


def _checkpoint_weights(out: Path, key: str = "model") -> dict:
    state = torch.load(out / "checkpoint.pt", map_location="cpu", weights_only=True)
    return {**digest(state[key]), "step": state["step"]}


def _cli(argv: list[str]) -> None:
    code = main(argv)
    assert code == 0, (argv, code)


def _mdm_flags(out: Path, steps: int = 30) -> list[str]:
    return ["--out", str(out), "--steps", str(steps), "--batch-size", "8", "--warmup", "3",
            "--eval-every", "15", "--threads", "1", "--seed", "1", "--model-config", TINY_MDM]


def sudoku(tmp: Path) -> dict:
    _cli(["sudoku", "train", *_mdm_flags(tmp / "run"), "--pool", "64", "--eval-puzzles", "2"])
    return _checkpoint_weights(tmp / "run")


def sudoku_no_bf16(tmp: Path) -> dict:
    _cli(["sudoku", "train", *_mdm_flags(tmp / "run"), "--pool", "64", "--eval-puzzles", "2",
          "--no-bf16", "--lr", "3e-3"])
    return _checkpoint_weights(tmp / "run")


def arithmetic(tmp: Path) -> dict:
    _cli(["arithmetic", "train", *_mdm_flags(tmp / "run"), "--eval-prompts", "4", "--no-bf16"])
    return _checkpoint_weights(tmp / "run")


def protein(tmp: Path) -> dict:
    _cli(["protein", "train", *_mdm_flags(tmp / "run"), "--eval-size", "16", "--no-bf16"])
    return _checkpoint_weights(tmp / "run")


def image(tmp: Path) -> dict:
    _cli(["image", "train", *_mdm_flags(tmp / "run"), "--no-bf16"])
    return _checkpoint_weights(tmp / "run")


def _tiny_sudoku_model(path: Path) -> Path:
    from unmask.models.transformer import MDMTransformer
    from unmask.sudoku.train import sudoku_model_config

    torch.manual_seed(0)
    MDMTransformer(sudoku_model_config(**json.loads(TINY_MDM))).save_pretrained(path)
    return path


def corrector(tmp: Path) -> dict:
    model = _tiny_sudoku_model(tmp / "model")
    _cli(["corrector", "train", "--model", str(model), "--out", str(tmp / "run"), "--puzzles",
          "20", "--epochs", "3", "--held-out", "0.2", "--samplers", "topk:k=9",
          "--batch-size", "16", "--threads", "1", "--seed", "1"])
    return _checkpoint_weights(tmp / "run")


def mi_estimator(tmp: Path) -> dict:
    from unmask.mi.labels import write_labels
    from unmask.models.transformer import MDMTransformer

    model = MDMTransformer.from_pretrained(_tiny_sudoku_model(tmp / "model"))
    write_labels(model, tmp / "labels", contexts=16, shard_size=8, eps=1e-3)
    _cli(["mi", "train", "--model", str(tmp / "model"), "--labels", str(tmp / "labels"),
          "--out", str(tmp / "run"), "--epochs", "4", "--batch-size", "4", "--held-out", "0.25",
          "--d", "16", "--pair-rank", "4", "--threads", "1", "--seed", "1"])
    return _checkpoint_weights(tmp / "run", "estimator")


def reasoning(tmp: Path) -> dict:
    from unmask.reasoning.train import ReasoningData, TextModelConfig, train_text_mdm
    from unmask.training.loop import LoopConfig, TrainConfig

    loop = LoopConfig(total_steps=20, lr=1e-3, min_lr=5e-5, warmup_steps=3, eval_every=10,
                      metric="accuracy", higher_is_better=True, max_time_s=7200.0,
                      decay_by_time=True, grad_clip=1.0, batch_size=4)
    data = ReasoningData(tasks=("chain_sum", "basic_arithmetic"), weights=(1.0, 1.0), pool=16)
    train_text_mdm(tmp / "run", TrainConfig(loop=loop, seed=1, bf16=False), data=data, eval_n=1,
                   model_config=TextModelConfig(hidden_size=16, layers=1, heads=2, ff_size=32),
                   log=lambda s: None)
    return _checkpoint_weights(tmp / "run")


def digit_classifier(tmp: Path) -> dict:
    from unmask.image.classifier import train_classifier
    from unmask.image.data import load_digits_split

    train_part, _ = load_digits_split()
    model = train_classifier(train_part.images()[:200], train_part.labels[:200], tmp / "run",
                             epochs=3, seed=1, log=lambda s: None)
    return digest(model.state_dict())


CASES = {f.__name__: f for f in (sudoku, sudoku_no_bf16, arithmetic, protein, image, corrector,
                                 mi_estimator, reasoning, digit_classifier)}


def run_case(name: str) -> dict:
    """The digest of case ``name``'s final weights (trained on one thread)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            return CASES[name](Path(tmp))
    finally:
        torch.set_num_threads(before)
