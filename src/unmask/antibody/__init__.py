"""Antibodies: real heavy chains (the germline V genes that the ``anarci`` package ships,
with a fixed held-out split and IMGT regions), the three decoding settings (CDR infilling,
high-ratio random masking, unconditional generation) as :func:`unmask.infill` templates with
their truth, and the metrics of filled sequences.

    from unmask import infill
    from unmask.antibody import load_heavy_chains, cdr_infilling, residue_recovery
    cases = cdr_infilling(load_heavy_chains("held_out"))
    filled = infill("antiberty", [c.template for c in cases], sampler="eb:gamma=0.1")
    residue_recovery([g.text for g in filled], cases).mean()
"""

from unmask.antibody.data import (
    CDRS,
    HELD_OUT_FRACTION,
    REGIONS,
    SOURCE,
    SPECIES,
    HeavyChain,
    load_heavy_chains,
    split_of,
    training_corpus,
)
from unmask.antibody.metrics import (
    composition_jsd,
    mean_pairwise_identity,
    pseudo_perplexity,
    residue_recovery,
)
from unmask.antibody.settings import (
    InfillCase,
    cdr_infilling,
    length_distribution,
    make_template,
    random_masking,
    unconditional,
)

__all__ = ["CDRS", "HELD_OUT_FRACTION", "REGIONS", "SOURCE", "SPECIES", "HeavyChain",
           "InfillCase", "cdr_infilling", "composition_jsd", "length_distribution",
           "load_heavy_chains", "make_template", "mean_pairwise_identity",
           "pseudo_perplexity", "random_masking", "residue_recovery", "split_of",
           "training_corpus", "unconditional"]
