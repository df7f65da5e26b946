"""One tokenizer builder for character-level models: one id per character of a vocabulary,
``[CLS] text [SEP]``, as a ``transformers.PreTrainedTokenizerFast`` (saved and loaded as
tokenizer.json, offline). The shipped text MDM's (:mod:`unmask.reasoning.tokenizer`) and the
converted AntiBERTy's (:func:`unmask.models.antiberty.residue_tokenizer`) are this builder
over their vocabularies."""

from __future__ import annotations

from collections.abc import Sequence


def character_tokenizer(vocab: Sequence[str], model_max_length: int, **options):
    """One id per entry of ``vocab`` (BERT's special tokens ``[PAD] [UNK] [CLS] [SEP] [MASK]``
    among them, then single characters), ``[CLS] text [SEP]``; a character outside ``vocab``
    is ``[UNK]``. ``options``: further ``PreTrainedTokenizerFast`` settings (``eos_token``,
    ``padding_side``)."""
    from tokenizers import Tokenizer, decoders, models, processors
    from transformers import PreTrainedTokenizerFast

    ids = {tok: i for i, tok in enumerate(vocab)}
    # BPE without merges splits the whole text into single characters, spaces and newlines
    # included (no pre-tokenizer drops them); Fuse joins them back without separators
    core = Tokenizer(models.BPE(vocab=ids, merges=[], unk_token="[UNK]"))
    core.decoder = decoders.Fuse()
    core.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])])
    return PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]", model_max_length=model_max_length, **options)
