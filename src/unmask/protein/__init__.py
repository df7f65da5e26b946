"""Proteins: FASTA reading, pyhmmer's bundled proteome split by near-duplicate groups,
protein tokens with a given length (PAD after it), composition metrics, the protein MDM and
its benchmark."""

from unmask.protein.tokens import (
    AMINO_ACIDS,
    MASK_ID,
    MAX_LENGTH,
    PAD_ID,
    VOCAB_SIZE,
    decode_tokens,
    encode,
    generation_inputs,
)

__all__ = ["AMINO_ACIDS", "MASK_ID", "MAX_LENGTH", "PAD_ID", "VOCAB_SIZE", "decode_tokens",
           "encode", "generation_inputs"]
