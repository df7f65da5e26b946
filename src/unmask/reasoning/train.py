"""Training the text MDM on the reasoning tasks.

The model is a ``transformers`` ``BertForMaskedLM`` over the character tokenizer, so the
trained folder is an ordinary masked-LM checkpoint that :func:`unmask.models.auto.load_model`,
``unmask generate`` and lm-eval read like any other. A row is ``[CLS] prompt [SEP]`` then the
task's ``gen_length`` answer positions (the answer, then ``[EOS]`` to the end), left-padded
with ``[PAD]`` (out of attention, positions counted from the first real token: the layout of
:func:`unmask.generate.generate`). Only the answer positions are masked, each with a
probability t ~ U(0, 1] drawn per row (the MDM objective), at least one per row; the loss is
the cross-entropy over the masked positions.

A step's batch holds one task (rows of similar length; no compute on long padding), the task
drawn by the mixture weights; batches are a pure function of (seed, step).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from unmask.errors import require
from unmask.models.hf import HFMaskedModel
from unmask.reasoning.bench import SELECT_SEED, solve
from unmask.reasoning.tasks import TASKS, Item, get_tasks
from unmask.reasoning.tokenizer import char_tokenizer
from unmask.training.loop import TrainConfig, adamw, fit
from unmask.training.mdm import mask_batch
from unmask.validation import is_int

#: training problems of the k-th task come from generator seed TRAIN_SEED + k (problem i of
#: a reasoning-gym generator at seed s is drawn from s + i, so the pools cover item seeds
#: [TRAIN_SEED, TRAIN_SEED + pool + 5)); evaluation lies below SELECT_SEED
TRAIN_SEED = 1_000_000
#: the held-out problems the training run selects its weights on start at SELECT_SEED


@dataclass
class TextModelConfig:
    """The architecture (a BERT encoder; d = hidden_size)."""

    hidden_size: int = 192
    layers: int = 6
    heads: int = 6
    ff_size: int = 768
    max_length: int = 640

    def __post_init__(self):
        for name in ("hidden_size", "layers", "heads", "ff_size", "max_length"):
            v = getattr(self, name)
            require(is_int(v) and v >= 1, f"{name}: must be an integer >= 1, got {v!r}")
        require(self.hidden_size % self.heads == 0,
                f"heads: {self.heads} does not divide hidden_size {self.hidden_size}")


@dataclass
class ReasoningData:
    """What the batches are drawn from: ``pool`` problems per task (seed TRAIN_SEED + index in
    TASKS), mixed by ``weights`` (same order as ``tasks``)."""

    tasks: tuple[str, ...] = tuple(TASKS)
    weights: tuple[float, ...] = (0.25, 0.19, 0.27, 0.27, 0.02)
    pool: int = 50_000
    #: share of basic_arithmetic prompts phrased 'What is E?' instead of 'Calculate E.'
    what_is_share: float = 0.5

    def __post_init__(self):
        self.tasks, self.weights = tuple(self.tasks), tuple(float(w) for w in self.weights)
        get_tasks(self.tasks)
        require(len(self.weights) == len(self.tasks) and all(w > 0 for w in self.weights),
                "weights: one positive weight per task")
        require(self.pool >= 1, f"pool: must be >= 1, got {self.pool}")


def text_mdm(tokenizer, config: TextModelConfig | None = None):
    """A freshly initialised ``BertForMaskedLM`` for ``tokenizer`` (no dropout)."""
    from transformers import BertConfig, BertForMaskedLM

    c = config or TextModelConfig()
    return BertForMaskedLM(BertConfig(
        vocab_size=len(tokenizer), hidden_size=c.hidden_size, num_hidden_layers=c.layers,
        num_attention_heads=c.heads, intermediate_size=c.ff_size,
        max_position_embeddings=c.max_length, type_vocab_size=1, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id, mask_token_id=tokenizer.mask_token_id))


def _training_prompt(item: Item, index: int, what_is_share: float) -> str:
    if item.task == "basic_arithmetic" and (index * 0.618034) % 1.0 < what_is_share:
        return f"What is {item.entry['metadata']['expression'].strip()}?"
    return item.prompt


@dataclass
class EncodedTask:
    """One task's pool as token ids: prompts (ragged) and answers (P, gen_length)."""

    name: str
    prompts: list[np.ndarray]
    answers: np.ndarray = field(repr=False)


def encode_pool(tokenizer, data: ReasoningData, max_length: int, log=print
                ) -> list[EncodedTask]:
    """The training pool of every task, tokenised; problems whose answer does not fit
    ``gen_length - 1`` characters, or whose row would exceed ``max_length``, are left out."""
    out = []
    for k, name in enumerate(TASKS):
        if name not in data.tasks:
            continue
        task = TASKS[name]
        items = task.items(data.pool, TRAIN_SEED + k)
        prompts = [_training_prompt(it, i, data.what_is_share) for i, it in enumerate(items)]
        answers = tokenizer([it.answer for it in items], add_special_tokens=False)["input_ids"]
        ids = tokenizer(prompts)["input_ids"]
        keep = [i for i, a in enumerate(answers) if len(a) < task.gen_length
                and len(ids[i]) + task.gen_length <= max_length]
        ids = [ids[i] for i in keep]
        ans = np.full((len(keep), task.gen_length), tokenizer.eos_token_id, dtype=np.int64)
        for r, i in enumerate(keep):
            ans[r, :len(answers[i])] = answers[i]
        out.append(EncodedTask(name, [np.asarray(p, dtype=np.int64) for p in ids], ans))
        log(f"pool: {name}: {len(keep)} problems")
    return out


@dataclass
class TextBatch:
    """input_ids, targets, loss_mask, attention_mask, position_ids: each (B, N); task: the
    task every row is a problem of."""

    task: str
    input_ids: torch.Tensor
    targets: torch.Tensor
    loss_mask: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor


def training_batch(pool: list[EncodedTask], weights, step: int, batch_size: int, *, pad_id: int,
                   mask_id: int, seed: int = 0) -> TextBatch:
    """One task's rows, left-padded, answer positions masked with t ~ U(0, 1] per row."""
    rng = np.random.default_rng([seed, step])
    w = np.asarray(weights, dtype=np.float64)
    task = pool[int(rng.choice(len(pool), p=w / w.sum()))]
    rows = rng.integers(0, len(task.answers), batch_size)
    prompts = [task.prompts[r] for r in rows]
    answers = task.answers[rows]  # (B, G)
    g = answers.shape[1]
    width = max(len(p) for p in prompts)
    ids = np.full((batch_size, width + g), pad_id, dtype=np.int64)
    for b, p in enumerate(prompts):
        ids[b, width - len(p):width] = p
    ids[:, width:] = answers
    ratio = 1.0 - rng.uniform(0.0, 1.0, (batch_size, 1))  # in (0, 1]
    draw = np.pad(rng.uniform(0.0, 1.0, (batch_size, g)), ((0, 0), (width, 0)))
    answer = np.broadcast_to(np.arange(width + g)[None, :] >= width, draw.shape)
    targets = torch.from_numpy(ids)
    inputs, loss_mask = mask_batch(targets, ratio, draw, mask_id, answer)
    attention = (targets != pad_id).long()
    return TextBatch(task.name, inputs, targets, loss_mask, attention,
                     (attention.cumsum(1) - 1).clamp(min=0))


def masked_loss(hf_model, batch: TextBatch) -> torch.Tensor:
    """Mean cross-entropy (nats) of the masked answer positions."""
    logits = hf_model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                      position_ids=batch.position_ids).logits
    return F.cross_entropy(logits[batch.loss_mask].float(), batch.targets[batch.loss_mask])


def selection_accuracy(hf_model, tokenizer, n: int = 32, seed: int = SELECT_SEED) -> dict:
    """Sequential confidence decoding of ``n`` held-out problems per task: accuracy per task
    and their mean ('accuracy', the selection metric)."""
    model = HFMaskedModel(hf_model, tokenizer)
    record = {}
    for task in TASKS.values():
        items = task.items(n, seed)
        record[task.name] = float(np.mean([r.correct for r in solve(model, task, items,
                                                                    "confidence")]))
    record["accuracy"] = float(np.mean([record[t] for t in TASKS]))
    return record


def train_text_mdm(out: str | Path, cfg: TrainConfig, *,
                   model_config: TextModelConfig | None = None,
                   data: ReasoningData | None = None, eval_n: int = 32, resume: bool = False,
                   override: bool = False, overwrite: bool = False, log=print
                   ) -> list[dict]:
    """Train the text MDM with :func:`unmask.training.loop.fit` as ``cfg`` says (on the CPU);
    OUT/best holds the weights (and tokenizer) with the best held-out accuracy. Returns the
    evaluation history."""
    require(cfg.device == "cpu", f"device: the text MDM trains on the CPU, got {cfg.device!r}")
    out = Path(out)
    model_config, data = model_config or TextModelConfig(), data or ReasoningData()
    tokenizer = char_tokenizer(model_config.max_length)
    torch.manual_seed(cfg.seed)
    hf_model = text_mdm(tokenizer, model_config)
    log(f"model: {sum(p.numel() for p in hf_model.parameters()):,} parameters")
    pool = encode_pool(tokenizer, data, model_config.max_length, log)
    opt = adamw(hf_model, cfg.loop.lr, cfg.weight_decay, betas=(0.9, 0.98))

    def step(i: int) -> torch.Tensor:
        hf_model.train()
        batch = training_batch(pool, data.weights, i, cfg.loop.batch_size,
                               pad_id=tokenizer.pad_token_id, mask_id=tokenizer.mask_token_id,
                               seed=cfg.seed)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg.bf16):
            return masked_loss(hf_model, batch)

    def evaluate(m) -> dict:
        m.eval()
        with torch.inference_mode():
            return selection_accuracy(m, tokenizer, eval_n)

    def save_best(record: dict, meta: dict) -> None:
        hf_model.save_pretrained(out / "best")
        tokenizer.save_pretrained(out / "best")

    return fit(step, evaluate, cfg.loop, out, model=hf_model, optimizer=opt,
               save_best=save_best, resume=resume, override=override, overwrite=overwrite,
               identity={"model_config": model_config},
               settings={"data": asdict(data), "train_config": cfg}, log=log).history
