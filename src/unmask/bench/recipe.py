"""How a worker loads a model: one picklable recipe for every engine job (bench sweeps,
MI label sets), so that a Ray worker loads the model once, by shipped name or by a path it
can read, and never receives a pickled model."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from unmask.corrector import load_corrector
from unmask.hooks import Hook, corrector_hooks
from unmask.mi.labels import get_task
from unmask.models.auto import load_model
from unmask.models.base import MaskedModel
from unmask.parallel.workers import worker_path


@dataclass(frozen=True)
class CorrectorRecipe:
    """How a worker loads the corrector and builds its hooks
    (:func:`unmask.hooks.corrector_hooks`); ``source`` None: the shipped corrector."""

    source: str | None = None
    threshold: float = 0.3
    max_remasks: int = 2
    ban_remasked: bool = False

    def hooks(self, model: MaskedModel) -> tuple[Hook, ...]:
        return corrector_hooks(load_corrector(self.source, model=model),
                               threshold=self.threshold, max_remasks=self.max_remasks,
                               ban_remasked=self.ban_remasked)


@dataclass(frozen=True)
class ModelRecipe:
    """How a worker loads a model: picklable, by shipped name or by a path that every worker
    reads (a relative path is made absolute where the recipe is made).

    Args:
        name_or_path: shipped name or folder (None: ``task``'s shipped model).
        task: passed to :func:`unmask.models.auto.load_model` (refuses another task's model).
        device: cpu or cuda (under Ray, the worker's own GPU).
        bf16: the model's ``autocast_bf16`` (None: as loaded).
        corrector: the corrector of bench entries marked ``corrected`` (None: no such entry).
        loader: a module-level function ``loader(name_or_path) -> MaskedModel`` that loads
            the model in place of :func:`~unmask.models.auto.load_model` (a model class that
            function does not build, such as the digits MDM, or a task's own checks);
            pickled by reference. With ``trust_remote_code`` it is also passed
            ``trust_remote_code=True``.
        trust_remote_code: let a transformers folder run the modelling code it holds.

    Calling the recipe loads the model (an engine ``setup``); :meth:`load` adds the
    corrector's hooks.
    """

    name_or_path: str | None = None
    task: str | None = None
    device: str = "cpu"
    bf16: bool | None = None
    corrector: CorrectorRecipe | None = None
    loader: Callable[..., MaskedModel] | None = None
    trust_remote_code: bool = False

    def __post_init__(self):
        object.__setattr__(self, "name_or_path", worker_path(self.name_or_path))
        if self.corrector is not None:
            object.__setattr__(self, "corrector", dataclasses.replace(
                self.corrector, source=worker_path(self.corrector.source)))

    def __call__(self) -> MaskedModel:
        trust = {"trust_remote_code": True} if self.trust_remote_code else {}
        model = (load_model(self.name_or_path, task=self.task, **trust) if self.loader is None
                 else self.loader(self.name_or_path, **trust)).to(self.device)
        if self.bf16 is not None:
            model.autocast_bf16 = bool(self.bf16)
        return model

    def load(self) -> tuple[MaskedModel, tuple[Hook, ...]]:
        """(the model, the corrector's hooks: none without a corrector)."""
        model = self()
        return model, (() if self.corrector is None else self.corrector.hooks(model))


def model_recipe(task: str, name_or_path: str | None = None, device: str = "cpu",
                 bf16: bool = False, trust_remote_code: bool = False) -> ModelRecipe:
    """The :class:`ModelRecipe` loading the model of the MI context task ``task``
    (:func:`unmask.mi.labels.get_task`: its own loader and checks) where it runs (a Ray
    worker, say): ``name_or_path`` a shipped name or a folder every worker can read (None:
    the task's shipped model)."""
    return ModelRecipe(name_or_path, task=task, device=device, bf16=bool(bf16),
                       loader=get_task(task).load_model, trust_remote_code=trust_remote_code)
