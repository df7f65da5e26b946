"""Proteins: FASTA reading, pyhmmer's bundled proteome split by near-duplicate groups,
protein tokens with a given length (PAD after it), composition metrics, the protein MDM and
its benchmark."""

from unmask.lazy import lazy_exports

#: public name -> the submodule defining it (imported when the name is first read)
_EXPORTS = {
    "AMINO_ACIDS": "tokens",
    "MASK_ID": "tokens",
    "MAX_LENGTH": "tokens",
    "PAD_ID": "tokens",
    "VOCAB_SIZE": "tokens",
    "decode_tokens": "tokens",
    "encode": "tokens",
    "generation_inputs": "tokens",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = ["AMINO_ACIDS", "MASK_ID", "MAX_LENGTH", "PAD_ID", "VOCAB_SIZE", "decode_tokens",
           "encode", "generation_inputs"]
