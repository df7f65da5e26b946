"""Proteins: FASTA reading, pyhmmer's bundled proteome split by near-duplicate groups,
protein tokens with a given length (PAD after it), composition metrics, the protein MDM and
its benchmark. The package imports nothing itself: its modules are imported by name
(``unmask.protein.tokens`` for the residue encoding)."""
