"""Models shipped inside the package (safetensors + JSON config), loaded with no download.

Each shipped model lives in a folder here: ``sudoku/`` (the Sudoku MDM),
``sudoku_mi_estimator/`` (its MI estimator), ``arithmetic/``, ``protein/``.
"""

from __future__ import annotations

from pathlib import Path

from unmask.errors import UnmaskError

PRETRAINED_DIR = Path(__file__).parent
DEFAULT_MODEL = "sudoku"


def pretrained_path(name: str) -> Path:
    """Folder of the shipped model ``name``."""
    path = PRETRAINED_DIR / name
    if not (path / "config.json").is_file():
        shipped = sorted(p.name for p in PRETRAINED_DIR.iterdir()
                         if (p / "config.json").is_file())
        raise UnmaskError(f"model: {name!r} is neither a model folder nor a shipped model "
                          f"(shipped: {', '.join(shipped) or 'none'})")
    return path


def model_folder(name_or_path: str | Path | None, default: str) -> Path:
    """The folder of a model given as a folder or a shipped name (``default`` when None)."""
    path = Path(name_or_path or default)
    return path if path.is_dir() else pretrained_path(str(name_or_path or default))


def load_model(name_or_path: str | Path | None = None):
    """Load a model by shipped name (default: the Sudoku MDM) or from a folder. A protein
    model (its config's task is 'protein', or an ESM checkpoint) loads through
    :func:`unmask.protein.model.load_protein_model`, so it reads PAD as given context."""
    from unmask.models.base import read_model_config
    from unmask.models.transformer import MDMTransformer

    path = model_folder(name_or_path, DEFAULT_MODEL)
    meta = read_model_config(path)
    if meta.get("model_type") == "esm" or (meta.get("config") or {}).get("task") == "protein":
        from unmask.protein.model import load_protein_model

        return load_protein_model(path)
    model = MDMTransformer.from_pretrained(path)
    model.source = str(path)
    return model


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
