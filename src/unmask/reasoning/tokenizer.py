"""The character tokenizer of the shipped text MDM: one token per printable ASCII character
or newline, plus BERT's special tokens and an end-of-sequence token, as a
``transformers.PreTrainedTokenizerFast`` (saved and loaded as tokenizer.json, offline)."""

from __future__ import annotations

import string

from unmask.models.characters import character_tokenizer

SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[EOS]")
CHARACTERS = tuple("\n" + "".join(c for c in string.printable if c.isprintable()))


def char_tokenizer(model_max_length: int = 512):
    """``[CLS] text [SEP]`` with one id per character; unknown characters map to ``[UNK]``
    (:func:`unmask.models.characters.character_tokenizer` over :data:`SPECIAL` and
    :data:`CHARACTERS`)."""
    return character_tokenizer(SPECIAL + CHARACTERS, model_max_length, eos_token="[EOS]",
                               padding_side="left")
