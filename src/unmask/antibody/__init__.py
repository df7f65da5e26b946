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

from unmask.lazy import lazy_exports

#: public name -> the submodule defining it (imported when the name is first read)
_EXPORTS = {
    "CDRS": "data",
    "HELD_OUT_FRACTION": "data",
    "REGIONS": "data",
    "SOURCE": "data",
    "SPECIES": "data",
    "HeavyChain": "data",
    "load_heavy_chains": "data",
    "split_of": "data",
    "training_corpus": "data",
    "composition_jsd": "metrics",
    "mean_pairwise_identity": "metrics",
    "pseudo_perplexity": "metrics",
    "residue_recovery": "metrics",
    "InfillCase": "settings",
    "cdr_infilling": "settings",
    "length_distribution": "settings",
    "make_template": "settings",
    "random_masking": "settings",
    "unconditional": "settings",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = ["CDRS", "HELD_OUT_FRACTION", "HeavyChain", "InfillCase", "REGIONS", "SOURCE", "SPECIES",
           "cdr_infilling", "composition_jsd", "length_distribution", "load_heavy_chains",
           "make_template", "mean_pairwise_identity", "pseudo_perplexity", "random_masking",
           "residue_recovery", "split_of", "training_corpus", "unconditional"]
