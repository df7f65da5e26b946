"""Models shipped inside the package (safetensors + JSON config) and the rule that turns a
``--model`` argument into a folder. Loading is :func:`unmask.models.auto.load_model`.

Each shipped model lives in a folder here: ``sudoku/`` (the Sudoku MDM),
``sudoku_mi_estimator/`` (its MI estimator), ``arithmetic/``, ``protein/``, ...

Resolution rule (:func:`resolve_model_path`): a *path* is anything that contains a path
separator, starts with ``.`` or ``~``, is absolute, or is given as a :class:`pathlib.Path`;
it names that folder and nothing else. A *bare name* (``sudoku``) names the shipped asset of
that name, even when a folder of the same name exists in the working directory (write
``./sudoku`` for that folder); a bare name that is not shipped falls back to a folder of that
name in the working directory.
"""

from __future__ import annotations

import os
from pathlib import Path

from unmask.errors import UnmaskError
from unmask.tasks import task_family

PRETRAINED_DIR = Path(__file__).parent
DEFAULT_MODEL = "sudoku"
#: the frozen heads shipped here, by kind (``MIEstimator.KIND``, ``Corrector.KIND``): the task
#: of the model each was trained on, or that shipped or converted model's name -> its folder
SHIPPED_HEADS = {
    "estimator": {"sudoku": "sudoku_mi_estimator", "protein": "protein_mi_estimator",
                  "antiberty": "antiberty_mi_estimator", "text": "text_mi_estimator"},
    "corrector": {"sudoku": "sudoku_corrector"},
}


def shipped_head(kind: str, model: object = None) -> str:
    """The name of the shipped head of ``kind`` for ``model``: the one of the task it records
    (:func:`unmask.tasks.task_family`), else the default model's (a head checks, when
    loaded with a model, that it was trained on it)."""
    heads = SHIPPED_HEADS[kind]
    return heads.get(task_family(getattr(model, "task", None)), heads.get(DEFAULT_MODEL, ""))


def shipped_names() -> list[str]:
    """The names of the shipped models (folders here with a config.json)."""
    return sorted(p.name for p in PRETRAINED_DIR.iterdir() if (p / "config.json").is_file())


def pretrained_path(name: str) -> Path:
    """Folder of the shipped model ``name``."""
    path = PRETRAINED_DIR / name
    if not name or "/" in name or "\\" in name or name.startswith(".") or not (
            path / "config.json").is_file():
        raise UnmaskError(f"model: {name!r} is neither a model folder nor a shipped model "
                          f"(shipped: {', '.join(shipped_names()) or 'none'})")
    return path


def is_path_like(name_or_path: str | os.PathLike) -> bool:
    """True when ``name_or_path`` is written as a path (see the module's resolution rule)."""
    if isinstance(name_or_path, os.PathLike):
        return True
    text = str(name_or_path)
    return (os.sep in text or "/" in text or (os.altsep or "/") in text
            or text.startswith((".", "~")) or os.path.isabs(text))


def resolve_model_path(name_or_path: str | os.PathLike | None, default: str = DEFAULT_MODEL
                       ) -> Path:
    """The folder ``name_or_path`` names (``default``, a shipped name, when None).

    Returns: the folder; :class:`UnmaskError` when a path is not a folder or a bare name is
    neither shipped nor a folder here.
    """
    if name_or_path is None:
        return pretrained_path(default)
    if isinstance(name_or_path, str) and not name_or_path.strip():
        raise UnmaskError(f"model: an empty name; give a shipped name ({default!r}, ...) or a "
                          "folder, or leave it out for the default")
    if is_path_like(name_or_path):
        path = Path(name_or_path).expanduser()
        if not path.is_dir():
            raise UnmaskError(f"model: {str(name_or_path)!r} is not a folder")
        return path
    name = str(name_or_path)
    if (PRETRAINED_DIR / name / "config.json").is_file():
        return PRETRAINED_DIR / name
    if Path(name).is_dir():
        return Path(name)
    return pretrained_path(name)


def model_folder(name_or_path: str | os.PathLike | None, default: str) -> Path:
    """Alias of :func:`resolve_model_path` (older name)."""
    return resolve_model_path(name_or_path, default)


def describe_source(path: str | Path) -> str:
    """How to name a model's source in tables and JSON: ``shipped 'NAME'`` for a shipped
    model (not this machine's install path), else the folder as given."""
    path = Path(path)
    try:
        if path.resolve().parent == PRETRAINED_DIR.resolve():
            return f"shipped '{path.name}'"
    except OSError:
        pass
    return str(path)

