"""The antibody bench as the command line reads it: its flags, defaults and
labels (:class:`AntibodyBenchTask`); :mod:`unmask.antibody.bench` runs it. This module imports
neither torch nor numpy, so that ``unmask antibody bench --help`` does not."""

from __future__ import annotations

from unmask.bench.contract import BenchTask

#: the settings, in table order: name -> what the table title says
SETTINGS = {"cdr": "CDR1, CDR2 and the start of CDR3 masked, the framework given",
            "random": "60-90% of the residues masked at random",
            "unconditional": "every residue masked, natural lengths"}

#: greedy orders, fixed-count and adaptive parallel rules, the attention- and MI-guided ones
#: (mi-guided with AntiBERTy's shipped estimator: give another with --samplers for another
#: model)
DEFAULT_SPECS = [
    "confidence", "entropy", "margin", "topk:k=4", "eb:gamma=1.0", "threshold:tau=0.9",
    "dus", "dapd", "demask", "info-gain", "mi-guided:estimator=antiberty_mi_estimator",
    "mi-oracle:gamma=1.0,free_max=true,stop_at_first_miss=true",
]


class AntibodyBenchTask(BenchTask):
    """Every sampler on antibody heavy chains in three settings: recovery (generation:
    1 - composition JSD) against forward passes."""

    name = "antibody"

    default_specs = DEFAULT_SPECS

    default_model = "antiberty"

    model_help = ("a protein model: shipped or converted name (default antiberty) or folder "
                  "(ESM, our protein MDM)")

    default_limit = 20

    min_limit = 2

    items = "held-out chains per setting (generation: sequences)"

    accuracy_label = "residue recovery % (generation: 100 × (1 − JSD))"

    columns = [("sampler", "label", ""), ("recovery %", "recovery_pct", ".1f"),
               ("vs seq (pts)", "vs_sequential", ""),
               ("PPL", "pseudo_perplexity", ".2f"), ("identity", "identity", ".3f"),
               ("JSD", "jsd_heldout", ".4f"), ("NFE", "nfe", ".1f"),
               ("tok/pass", "tokens_per_pass", ".2f"), ("seqs", "sequences", ".1f"),
               ("wall s", "wall_s", ".1f")]

    def add_arguments(self, p, types) -> None:
        p.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS),
                       metavar="SETTING", help=f"of {', '.join(SETTINGS)} (default all)")
        p.add_argument("--batch-size", type=types.positive_int, default=None,
                       help="sequences per decode call (default: all at once)")
        p.add_argument("--no-perplexity", action="store_true",
                       help="leave out the pseudo-perplexity (one pass per residue)")
        p.add_argument("--oracle-limit", type=types.positive_int, default=4, metavar="N",
                       help="mi-oracle (ground-truth MI by probing, every pass) decodes the "
                            "first N cases of a setting only (default 4); its recovery is "
                            "compared with sequential's on those")

    def check(self, args) -> None:
        """A setting named twice is run once (its rows would be doubled)."""
        args.settings = list(dict.fromkeys(args.settings))


#: what ``unmask antibody bench`` builds its flags from, before importing the bench
DECLARED = AntibodyBenchTask()
