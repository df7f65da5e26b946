"""A small CNN classifier of 8x8 digits: its softmax and penultimate features are what the
image metrics (FID, IS-style score, class accuracy) are computed on."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

from unmask.errors import UnmaskError, require
from unmask.io import atomic_path, atomic_write_text, parse_json
from unmask.training.loop import LoopConfig, TrainConfig, fit
from unmask.validation import is_int

MODEL_TYPE = "digit-classifier"


@dataclass
class ClassifierConfig:
    """channels: feature maps of the two 3x3 convolutions; features: width of the penultimate
    layer (the FID features); n_classes: outputs."""

    channels: int = 32
    features: int = 64
    n_classes: int = 10

    def __post_init__(self):
        for name in ("channels", "features", "n_classes"):
            value = getattr(self, name)
            require(is_int(value) and value >= 1,
                    f"{name}: must be an integer >= 1, got {value!r}")


class DigitClassifier(nn.Module):
    """images (B, 8, 8) in [0, 1] -> (logits (B, C), features (B, F))."""

    def __init__(self, config: ClassifierConfig | None = None):
        super().__init__()
        self.config = config = config or ClassifierConfig()
        c = config.channels
        self.conv1 = nn.Conv2d(1, c, 3, padding=1)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1)
        self.fc = nn.Linear(c * 16, config.features)
        self.out = nn.Linear(config.features, config.n_classes)
        self.metadata: dict = {}

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = images.float().reshape(-1, 1, 8, 8)
        x = F.relu(self.conv2(F.relu(self.conv1(x))))
        x = F.max_pool2d(x, 2).flatten(1)
        feats = F.relu(self.fc(x))
        return self.out(feats), feats

    @torch.inference_mode()
    def embed(self, images: torch.Tensor, batch_size: int = 4096
              ) -> tuple[torch.Tensor, torch.Tensor]:
        """(features (B, F) float64, class probabilities (B, C) float64) of ``images``."""
        self.eval()
        feats, probs = [], []
        for i in range(0, len(images), batch_size):
            logits, f = self(images[i:i + batch_size])
            feats.append(f.double())
            probs.append(logits.double().softmax(-1))
        return torch.cat(feats), torch.cat(probs)

    def save_pretrained(self, directory: str | Path, extra: dict | None = None) -> None:
        """Write ``config.json`` and ``classifier.safetensors`` atomically into ``directory``."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().contiguous().cpu() for k, v in self.state_dict().items()}
        with atomic_path(directory / "classifier.safetensors") as tmp:
            save_file(state, str(tmp))
        meta = {"model_type": MODEL_TYPE, "config": asdict(self.config), **(extra or {})}
        atomic_write_text(directory / "config.json", json.dumps(meta, indent=2) + "\n")

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> DigitClassifier:
        directory = Path(directory)
        cfg_path, weights = directory / "config.json", directory / "classifier.safetensors"
        if not cfg_path.is_file() or not weights.is_file():
            raise UnmaskError(f"classifier: {directory} has no config.json + "
                              "classifier.safetensors")
        try:
            meta = parse_json(cfg_path.read_text())
        except json.JSONDecodeError as e:
            raise UnmaskError(f"classifier: {cfg_path} is not valid JSON ({e.msg})") from None
        if not isinstance(meta, dict) or meta.get("model_type") != MODEL_TYPE:
            raise UnmaskError(f"classifier: {cfg_path} is not a {MODEL_TYPE} config")
        model = cls(ClassifierConfig(**meta["config"]))
        model.load_state_dict(load_file(str(weights)))
        model.metadata = {k: v for k, v in meta.items() if k != "config"}
        return model.eval()


def shift_images(images: torch.Tensor, rng: np.random.Generator, max_shift: int = 1
                 ) -> torch.Tensor:
    """(B, 8, 8) images each moved by up to ``max_shift`` pixels along both axes, zero-filled
    (the training augmentation)."""
    b = len(images)
    pad = F.pad(images, (max_shift,) * 4)
    dy = torch.from_numpy(rng.integers(0, 2 * max_shift + 1, b))
    dx = torch.from_numpy(rng.integers(0, 2 * max_shift + 1, b))
    rows = (dy[:, None] + torch.arange(8))[:, :, None].expand(b, 8, 8)
    cols = (dx[:, None] + torch.arange(8))[:, None, :].expand(b, 8, 8)
    return pad[torch.arange(b)[:, None, None], rows, cols]


class ShiftedBatches:
    """The training batches of the classifier: each epoch a permutation of the images, and in
    each batch half the images (by a coin per image) shifted by :func:`shift_images`, all
    drawn from one generator seeded with ``seed``. ``batches(i)`` is step i's (images (B, 8, 8),
    labels (B,)), a pure function of i: a step asked out of order (a resumed run) replays the
    generator's draws from the start."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, batch_size: int, seed: int):
        self.images, self.labels, self.batch_size, self.seed = images, labels, batch_size, seed
        self.steps_per_epoch = math.ceil(len(images) / batch_size)
        self._restart()

    def _restart(self) -> None:
        self.rng, self.next, self.order = np.random.default_rng(self.seed), 0, None

    def _draw(self) -> tuple[torch.Tensor, torch.Tensor]:
        k = self.next % self.steps_per_epoch
        if k == 0:
            self.order = torch.from_numpy(self.rng.permutation(len(self.images)))
        idx = self.order[k * self.batch_size:(k + 1) * self.batch_size]
        x = self.images[idx].float()
        # half the batch shifted: the classifier must not depend on exact placement,
        # but centred digits (what the data and the model produce) stay the common case
        moved = torch.from_numpy(self.rng.uniform(size=len(idx)) < 0.5)
        self.next += 1
        return torch.where(moved[:, None, None], shift_images(x, self.rng), x), self.labels[idx]

    def __call__(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        if step < self.next:
            self._restart()
        while self.next < step:
            self._draw()
        return self._draw()


def train_classifier(images: torch.Tensor, labels: torch.Tensor, out_dir: str | Path, *,
                     epochs: int = 60, batch_size: int = 64, lr: float = 3e-3, seed: int = 0,
                     config: ClassifierConfig | None = None, resume: bool = False,
                     override: bool = False, overwrite: bool = False,
                     log: Callable[[str], None] = print) -> DigitClassifier:
    """Fit a :class:`DigitClassifier` on ``images`` (M, 8, 8) in [0, 1] and ``labels`` (M,)
    with :func:`unmask.training.loop.fit` (checkpoint and history in ``out_dir``, one line per
    epoch; ``resume`` continues it): AdamW, a cosine learning rate from ``lr`` to 0, +-1
    pixel shifts as augmentation (:class:`ShiftedBatches`). Returns the final weights."""
    require(len(images) == len(labels) and len(images) >= 1,
            "images, labels: need the same number (>= 1) of each")
    require(epochs >= 1, f"epochs: must be >= 1, got {epochs}")
    batches = ShiftedBatches(images, labels, batch_size, seed)
    per_epoch = batches.steps_per_epoch
    cfg = TrainConfig(loop=LoopConfig(total_steps=epochs * per_epoch, lr=lr,
                                      eval_every=per_epoch, batch_size=batch_size,
                                      steps_per_epoch=per_epoch),
                      weight_decay=1e-3, bf16=False, seed=seed)
    torch.manual_seed(seed)
    model = DigitClassifier(config)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=cfg.weight_decay)

    def step(i: int) -> torch.Tensor:
        x, y = batches(i)
        return F.cross_entropy(model(x)[0], y)

    fit(step, None, cfg.loop, out_dir, model=model, optimizer=opt, resume=resume,
        override=override, overwrite=overwrite,
        identity={"classifier_config": model.config},
        settings={"train_config": cfg, "data": {"images": len(images)}}, log=log)
    return model.eval()
