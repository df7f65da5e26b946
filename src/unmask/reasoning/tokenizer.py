"""The character tokenizer of the shipped text MDM: one token per printable ASCII character
or newline, plus BERT's special tokens and an end-of-sequence token, as a
``transformers.PreTrainedTokenizerFast`` (saved and loaded as tokenizer.json, offline)."""

from __future__ import annotations

import string

SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[EOS]")
CHARACTERS = tuple("\n" + "".join(c for c in string.printable if c.isprintable()))


def char_tokenizer(model_max_length: int = 512):
    """``[CLS] text [SEP]`` with one id per character; unknown characters map to ``[UNK]``."""
    from tokenizers import Tokenizer, decoders, models, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIAL + CHARACTERS)}
    # BPE without merges splits the whole text into single characters, spaces and newlines
    # included (no pre-tokenizer drops them); Fuse joins them back without separators.
    core = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="[UNK]"))
    core.decoder = decoders.Fuse()
    core.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    return PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]", eos_token="[EOS]",
        model_max_length=model_max_length, padding_side="left")
