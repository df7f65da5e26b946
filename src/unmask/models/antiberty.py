"""AntiBERTy (Ruffolo et al., arXiv:2112.07782), a 26M-parameter BERT masked LM trained on
558M natural antibody sequences, as the model name ``antiberty``.

The weights come from the ``antiberty==0.1.3`` wheel (``pip install 'unmask[antibody]'``;
MIT licence), which ships them as a torch pickle. The first use converts them once into a
safetensors ``BertForMaskedLM`` folder in the user's cache (:func:`cache_dir`): the pickle's
sha256 is checked against the one the 0.1.3 wheel ships, it is read with
``torch.load(weights_only=True)`` (tensors only, no code), the three classifier heads of
AntiBERTy's pre-training (species, chain, graft) are dropped, and the folder is written under
a temporary name and renamed into place, so an interrupted conversion leaves nothing that
loads. From then on it loads as any Hugging Face masked LM
(:class:`~unmask.models.hf.HFMaskedModel`).

Its tokenizer reads one residue per character: sequences are plain residue strings
(``EVQLVESGG...``, the 20 standard amino acids in upper case), written ``[CLS] residues
[SEP]`` as in AntiBERTy's training; the mask token is ``[MASK]``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

from unmask.errors import UnmaskError, require
from unmask.io import file_sha256
from unmask.models.files import read_json_object
from unmask.models.hf import _import_transformers

NAME = "antiberty"
#: the wheel whose weights are converted
WHEEL_VERSION = "0.1.3"
#: sha256 of antiberty/trained_models/AntiBERTy_md_smooth/pytorch_model.bin in that wheel
WEIGHTS_SHA256 = "f1ae33eac8cc8784a7d4be5a600141d2fa7bc7d8d5b3f5324d64a6a63bd0f137"
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
    use."""
    folder = cache_dir() / f"{NAME}-{WHEEL_VERSION}-{WEIGHTS_SHA256[:12]}"
    if (folder / "config.json").is_file():
        return folder
    source = wheel_files() if source is None else Path(source)
    weights = source / "AntiBERTy_md_smooth" / "pytorch_model.bin"
    require(weights.is_file(), f"model: {weights} is missing; reinstall antiberty=="
                               f"{WHEEL_VERSION} (later releases ship no weights)")
    digest = file_sha256(weights)
    require(digest == WEIGHTS_SHA256,
            f"model: {weights} has sha256 {digest[:16]}..., not antiberty=={WHEEL_VERSION}'s "
            f"{WEIGHTS_SHA256[:16]}...; reinstall antiberty=={WHEEL_VERSION}")
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        _write_folder(source, weights, tmp)
        try:
            tmp.rename(folder)
        except OSError:  # another process converted it meanwhile
            if not (folder / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _write_folder(source: Path, weights: Path, out: Path) -> None:
    """Write the safetensors model, its config and the residue tokenizer into ``out``."""
    import torch

    tr = _import_transformers()  # one line when missing; no progress bars

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
    ``[CLS] residues [SEP]``; a character outside it is ``[UNK]``."""
    from tokenizers import Tokenizer, decoders, models, processors
    from transformers import PreTrainedTokenizerFast

    ids = {tok: i for i, tok in enumerate(vocab)}
    # BPE without merges splits a string into single characters; Fuse joins them back
    core = Tokenizer(models.BPE(vocab=ids, merges=[], unk_token="[UNK]"))
    core.decoder = decoders.Fuse()
    core.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])])
    return PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]", model_max_length=model_max_length)


__all__ = ["CACHE_ENV", "NAME", "WEIGHTS_SHA256", "antiberty_folder", "cache_dir",
           "residue_tokenizer"]
