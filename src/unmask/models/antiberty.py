"""AntiBERTy (Ruffolo et al., arXiv:2112.07782), a 26M-parameter BERT masked LM trained on
558M natural antibody sequences, as the model name ``antiberty``.

The weights come from the ``antiberty==0.1.3`` wheel (``pip install 'unmask[antibody]'``;
MIT licence), which ships them as a torch pickle. The first use converts them once into a
safetensors ``BertForMaskedLM`` folder in the user's cache (:func:`cache_dir`): the pickle's
sha256 is checked against the one the 0.1.3 wheel ships, it is read with
``torch.load(weights_only=True)`` (tensors only, no code), the three classifier heads of
AntiBERTy's pre-training (species, chain, graft) are dropped, and the folder is written under
a temporary name and renamed into place, so an interrupted conversion leaves nothing that
loads. The conversion writes last a manifest (:data:`MANIFEST`: the sha256 of every file in
the folder); every load checks the folder against it, and a folder that differs (a changed,
missing or added file) is converted again from the wheel, or refused in one line when the
wheel is not installed. From then on it loads as any Hugging Face masked LM
(:class:`~unmask.models.hf.HFMaskedModel`), never with remote code.

Its tokenizer reads one residue per character: sequences are plain residue strings
(``EVQLVESGG...``, the 20 standard amino acids in upper case), written ``[CLS] residues
[SEP]`` as in AntiBERTy's training; the mask token is ``[MASK]``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

from unmask.errors import UnmaskError, require
from unmask.io import file_sha256
from unmask.models.characters import character_tokenizer
from unmask.models.files import read_json_object
from unmask.models.hf import import_transformers

NAME = "antiberty"
#: the wheel whose weights are converted
WHEEL_VERSION = "0.1.3"
#: sha256 of antiberty/trained_models/AntiBERTy_md_smooth/pytorch_model.bin in that wheel
WEIGHTS_SHA256 = "f1ae33eac8cc8784a7d4be5a600141d2fa7bc7d8d5b3f5324d64a6a63bd0f137"
#: the file, written last, that lists the sha256 of every other file of the converted folder
MANIFEST = "unmask-manifest.json"
MANIFEST_FORMAT = "unmask-converted/1"
#: environment variable naming the cache folder (default: $XDG_CACHE_HOME/unmask or
#: ~/.cache/unmask)
CACHE_ENV = "UNMASK_CACHE"
#: the state-dict prefixes of BertForMaskedLM; the rest (cls.species, cls.chain, cls.graft)
#: are AntiBERTy's classifier heads
_KEEP = ("bert.embeddings.", "bert.encoder.", "cls.predictions.")
_CONFIG_KEYS = ("attention_probs_dropout_prob", "hidden_act", "hidden_dropout_prob",
                "hidden_size", "initializer_range", "intermediate_size", "layer_norm_eps",
                "max_position_embeddings", "num_attention_heads", "num_hidden_layers",
                "pad_token_id", "position_embedding_type", "type_vocab_size", "vocab_size")


def cache_dir() -> Path:
    """The user's cache folder for converted models: ``$UNMASK_CACHE``, else
    ``$XDG_CACHE_HOME/unmask``, else ``~/.cache/unmask``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "unmask"


def wheel_installed() -> bool:
    return importlib.util.find_spec(NAME) is not None


def wheel_files() -> Path:
    """The installed wheel's ``antiberty/trained_models`` folder (nothing of it is imported)."""
    spec = importlib.util.find_spec(NAME)
    require(spec is not None and spec.submodule_search_locations,
            f"model: {NAME!r} needs the antiberty package; pip install 'unmask[antibody]' "
            f"(antiberty=={WHEEL_VERSION})")
    return Path(list(spec.submodule_search_locations)[0]) / "trained_models"


def antiberty_folder(source: Path | None = None) -> Path:
    """The converted ``BertForMaskedLM`` folder in :func:`cache_dir`, converting the wheel's
    weights (``source``: its ``trained_models`` folder, default the installed one) on first
    use, and again whenever the folder does not match its manifest (:func:`folder_problem`)."""
    folder = cache_dir() / f"{NAME}-{WHEEL_VERSION}-{WEIGHTS_SHA256[:12]}"
    problem = folder_problem(folder) if folder.exists() else None
    if folder.exists() and problem is None:
        return folder
    weights = _checked_weights(source, folder, problem)
    folder.parent.mkdir(parents=True, exist_ok=True)
    if folder.exists():  # a converted folder that is not what was converted: set aside
        _discard(folder)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        _write_folder(weights.parent.parent, weights, tmp)
        write_manifest(tmp)
        try:
            tmp.rename(folder)
        except OSError:  # another process converted it meanwhile
            if folder_problem(folder) is not None:
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _checked_weights(source: Path | None, folder: Path, problem: str | None) -> Path:
    """The wheel's weights file, its sha256 checked; one line when it cannot be used (naming
    ``problem``, what is wrong with the converted ``folder``, when there is one)."""
    why = (f"the converted folder {folder} {problem}, and converting it again needs "
           if problem else "")
    if source is None:
        require(wheel_installed(),
                f"model: {why or f'{NAME!r} needs '}the antiberty package; pip install "
                f"'unmask[antibody]' (antiberty=={WHEEL_VERSION})")
        source = wheel_files()
    weights = Path(source) / "AntiBERTy_md_smooth" / "pytorch_model.bin"
    require(weights.is_file(), f"model: {why}{weights}{', which' if why else ''} is missing; "
                               f"reinstall antiberty=={WHEEL_VERSION} (later releases ship no "
                               "weights)")
    digest = file_sha256(weights)
    require(digest == WEIGHTS_SHA256,
            f"model: {weights} has sha256 {digest[:16]}..., not antiberty=={WHEEL_VERSION}'s "
            f"{WEIGHTS_SHA256[:16]}...; reinstall antiberty=={WHEEL_VERSION}")
    return weights


def _discard(folder: Path) -> None:
    """Remove the converted ``folder`` (renamed aside first, so no reader sees half of it)."""
    aside = Path(tempfile.mkdtemp(prefix=f".{folder.name}.stale.", dir=folder.parent))
    try:
        folder.rename(aside / "old")
    except FileNotFoundError:  # another process set it aside meanwhile
        pass
    shutil.rmtree(aside, ignore_errors=True)


def _folder_files(folder: Path) -> dict[str, Path]:
    """Every entry of ``folder`` below it but the manifest, by its relative path."""
    return {str(p.relative_to(folder)): p for p in sorted(folder.rglob("*"))
            if p.name != MANIFEST or p.parent != folder}


def write_manifest(folder: Path) -> None:
    """Write :data:`MANIFEST` into ``folder``: the sha256 of every file in it (call last)."""
    files = {name: file_sha256(p) for name, p in _folder_files(folder).items()}
    manifest = {"format": MANIFEST_FORMAT, "weights_sha256": WEIGHTS_SHA256, "files": files}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def folder_problem(folder: Path) -> str | None:
    """What makes the converted ``folder`` differ from what was converted (None: nothing):
    no manifest, or a file missing, added, not a plain file, or not of its sha256."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"has no readable {MANIFEST}"
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if (not isinstance(files, dict) or manifest.get("format") != MANIFEST_FORMAT
            or manifest.get("weights_sha256") != WEIGHTS_SHA256):
        return f"has a {MANIFEST} of another format or wheel"
    present = _folder_files(folder)
    for name in sorted(set(files) | set(present)):
        if name not in present:
            return f"lacks {name}"
        if name not in files:
            return f"holds {name}, which the conversion did not write"
        path = present[name]
        if path.is_symlink() or not path.is_file():
            return f"holds {name}, which is not a plain file"
        if file_sha256(path) != files[name]:
            return f"holds a changed {name} (not its sha256 in {MANIFEST})"
    return None


def _write_folder(source: Path, weights: Path, out: Path) -> None:
    """Write the safetensors model, its config and the residue tokenizer into ``out``."""
    import torch

    tr = import_transformers()  # one line when missing; no progress bars

    meta = read_json_object(source / "AntiBERTy_md_smooth" / "config.json")
    vocab = (source / "vocab.txt").read_text().split()
    config = tr.BertConfig(**{k: meta[k] for k in _CONFIG_KEYS if k in meta},
                        mask_token_id=vocab.index("[MASK]"), tie_word_embeddings=True,
                        architectures=["BertForMaskedLM"])
    state = torch.load(weights, map_location="cpu", weights_only=True)
    state = {k: v for k, v in state.items() if k.startswith(_KEEP)
             and k != "bert.embeddings.position_ids"}
    model = tr.BertForMaskedLM(config)
    own = model.state_dict()
    missing = sorted(set(own) - set(state))
    unknown = sorted(set(state) - set(own))
    if missing or unknown:
        raise UnmaskError(f"model: {weights} does not hold BertForMaskedLM's weights "
                          f"({'lacks ' + missing[0] if missing else 'has ' + unknown[0]})")
    model.load_state_dict(state)
    model.save_pretrained(str(out), safe_serialization=True)
    residue_tokenizer(vocab, config.max_position_embeddings).save_pretrained(str(out))


def residue_tokenizer(vocab: list[str], model_max_length: int):
    """One id per character over ``vocab`` (AntiBERTy's: BERT's specials, then the residues),
    ``[CLS] residues [SEP]``; a character outside it is ``[UNK]``
    (:func:`unmask.models.characters.character_tokenizer`)."""
    return character_tokenizer(vocab, model_max_length)


__all__ = ["CACHE_ENV", "MANIFEST", "NAME", "WEIGHTS_SHA256", "antiberty_folder", "cache_dir",
           "folder_problem", "residue_tokenizer"]
