"""One loader for every model folder, keyed by the kind its ``config.json`` names.

=====================  ==============================================  =========
config.json            class                                           task
=====================  ==============================================  =========
``mdm-transformer``    :class:`~unmask.models.transformer.MDMTransformer`  config's
  ... task 'protein'   :class:`~unmask.protein.model.ProteinMDM`      protein
``esm`` / ``esmc``     :class:`~unmask.models.esm.EsmMaskedModel`     protein
any other             :class:`~unmask.models.hf.HFMaskedModel`        text
``transformers`` one
=====================  ==============================================  =========

Where the folder comes from: :func:`unmask.pretrained.resolve_model_path` (a bare shipped
name is the shipped asset; a path is a path), except for the names of :data:`CONVERTED`:
models that an installed package ships in another format, converted once into the user's
cache (``antiberty``: :mod:`unmask.models.antiberty`).
"""

from __future__ import annotations

import importlib
import os

from unmask.devices import check_device
from unmask.errors import UnmaskError
from unmask.models.antiberty import antiberty_folder
from unmask.models.base import MaskedModel
from unmask.models.files import read_json_object
from unmask.models.hf import HFMaskedModel
from unmask.models.transformer import MDMTransformer
from unmask.pretrained import DEFAULT_MODEL, resolve_model_path, shipped_names
from unmask.tasks import task_family

#: options for transformers folders (see HFMaskedModel.from_pretrained)
HF_OPTIONS = {"dtype", "device", "trust_remote_code", "hidden_layer", "mask_id"}
#: config kinds whose models a task package loads -> (its module, the function ``f(path,
#: meta)`` that loads and checks one; meta: the config.json read here), imported on use: the
#: model layer depends on no task (ESM checkpoints speak the protein task's residues)
TASK_MODELS = {"protein": ("unmask.protein.model", "load_folder"),
               "esm": ("unmask.protein.model", "load_esm_folder")}
#: config kinds that are not decodable models, and what they are
NOT_MODELS = {"mi-estimator": "an MI estimator", "corrector": "a corrector"}
#: model names whose folder is converted from an installed package -> that folder's maker
CONVERTED = {"antiberty": antiberty_folder}


def model_kind(meta: dict) -> str:
    """The loader key of a parsed config.json: 'mdm-transformer', 'protein', 'esm', 'hf'."""
    kind = meta.get("model_type")
    if kind == "mdm-transformer":
        cfg = meta.get("config")
        return "protein" if isinstance(cfg, dict) and cfg.get("task") == "protein" else kind
    if kind in ("esm", "esmc"):
        return "esm"
    if kind in NOT_MODELS:
        return kind
    if isinstance(kind, str) or "auto_map" in meta or "architectures" in meta:
        return "hf"
    return ""


def check_task(model: MaskedModel, task: str | None, source: str = "", *,
               required: bool = False) -> None:
    """Raise :class:`UnmaskError` when ``model`` records a task other than ``task`` (None:
    no check). A model that records no task passes, unless ``required`` (a command whose
    inputs mean something only to models of ``task``)."""
    if task is None:
        return
    have = task_family(getattr(model, "task", "") or "")
    if (have or required) and have != task:
        where = f" {source}" if source else ""
        raise UnmaskError(f"model:{where} is a {have or 'task-less'} model, not a {task} model")


def load_model(name_or_path: str | os.PathLike | None = None, *, task: str | None = None,
               **hf_options) -> MaskedModel:
    """Load a model by shipped name or from a folder.

    Args:
        name_or_path: a shipped name (``sudoku``, ``protein``, ``arithmetic``), a converted
            one (``antiberty``, :data:`CONVERTED`), or a folder (see
            :func:`unmask.pretrained.resolve_model_path`); None = the shipped model of
            ``task`` (or ``sudoku``).
        task: refuse a model whose config records another task ('sudoku', 'protein',
            'arithmetic', 'text'), with one line.
        hf_options: for a ``transformers`` folder, passed to
            :meth:`unmask.models.hf.HFMaskedModel.from_pretrained` (``dtype``, ``device``,
            ``trust_remote_code``, ``hidden_layer``).
    Returns:
        the model, in eval mode, with ``source`` (its folder) and ``task`` set.
    """
    unknown = sorted(set(hf_options) - HF_OPTIONS)
    if unknown:
        raise UnmaskError(f"load_model: unknown option {unknown[0]!r}; accepted: "
                          f"{', '.join(sorted(HF_OPTIONS))}")
    if hf_options.get("device") is not None:
        hf_options["device"] = check_device(hf_options["device"])
    default = task if task in shipped_names() else DEFAULT_MODEL
    if isinstance(name_or_path, str) and name_or_path in CONVERTED:
        path = CONVERTED[name_or_path]()  # checked against its manifest
        hf_options["trust_remote_code"] = False  # what unmask converted holds no code
    else:
        path = resolve_model_path(name_or_path, default)
    meta = read_json_object(path / "config.json")
    if name_or_path in CONVERTED and "auto_map" in meta:
        raise UnmaskError(f"model: {path} holds a config with modelling code (auto_map), "
                          f"which no folder unmask converts has; delete {path} to convert it "
                          "again")
    kind = model_kind(meta)
    if kind in NOT_MODELS:
        raise UnmaskError(f"model: {path} is {NOT_MODELS[kind]}, not a model")
    if kind == "mdm-transformer":
        model = MDMTransformer.from_pretrained(path, meta=meta)
    elif kind in TASK_MODELS:
        module, loader = TASK_MODELS[kind]
        model = getattr(importlib.import_module(module), loader)(path, meta)
    elif kind == "hf":
        model = HFMaskedModel.from_pretrained(path, meta=meta, **hf_options)
    else:
        raise UnmaskError(f"model: {path / 'config.json'} names no model kind "
                          "(no 'model_type')")
    model.source = str(path)
    check_task(model, task, str(name_or_path if name_or_path is not None else path))
    if kind != "hf":
        device = hf_options.pop("device", None)
        extra = sorted(k for k, v in hf_options.items() if v not in (None, False, -1))
        if extra:
            raise UnmaskError(f"model: {path} is not a transformers folder; "
                              f"{', '.join(extra)} apply only to those")
        if device is not None:
            model = model.to(device)
    return model.eval()




__all__ = ["check_task", "load_model", "model_kind", "task_family"]
