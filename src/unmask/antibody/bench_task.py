"""The antibody bench as the command line reads it: its options (:class:`AntibodyBench`),
defaults and labels (:class:`AntibodyBenchTask`); :mod:`unmask.antibody.bench` runs it. This
module imports neither torch nor numpy, so that ``unmask antibody bench --help`` does not."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from unmask.bench.contract import BenchOptions, BenchTask
from unmask.errors import UnmaskError

#: the settings, in table order: name -> what the table title says
SETTINGS = {"cdr": "CDR1, CDR2 and the start of CDR3 masked, the framework given",
            "random": "60-90% of the residues masked at random",
            "unconditional": "every residue masked, natural V-gene lengths",
            "heavy": "every residue masked, full heavy-chain lengths (118-125)"}
#: the settings run when none are named (every model's rows fit them)
DEFAULT_SETTINGS = ("cdr", "random", "unconditional")
#: settings that generate from nothing (no truth): scored by chain type and composition
GENERATION = ("unconditional", "heavy")

#: greedy orders, fixed-count and adaptive parallel rules, the attention- and MI-guided ones
#: (mi-guided with AntiBERTy's shipped estimator: give another with --samplers for another
#: model)
DEFAULT_SPECS = [
    "confidence", "entropy", "margin", "topk:k=4", "eb:gamma=1.0", "threshold:tau=0.9",
    "dus", "dapd", "demask", "info-gain", "mi-guided:estimator=antiberty_mi_estimator",
    "mi-oracle:gamma=1.0,free_max=true,stop_at_first_miss=true",
]


@dataclass(frozen=True, kw_only=True)
class AntibodyBench(BenchOptions):
    """What an antibody bench run is asked for (``unmask antibody bench``'s flags): the shared
    options (``limit``: held-out chains per setting, generation: sequences; at least 2) and

    Attributes:
        settings: of :data:`SETTINGS` (heavy needs a model of 127+ positions, such as
            AntiBERTy); one named twice is run once.
        batch_size: sequences per decode call (None: all at once).
        no_perplexity: leave out the pseudo-perplexity (one pass per residue).
        oracle_limit: mi-oracle (ground-truth MI by probing, every pass) decodes the first
            this many cases of a setting only.
    """

    task: ClassVar[str] = "antibody"

    model: str | None = "antiberty"
    limit: int | None = 20
    settings: tuple[str, ...] = DEFAULT_SETTINGS
    batch_size: int | None = None
    no_perplexity: bool = False
    oracle_limit: int = 4


class AntibodyBenchTask(BenchTask):
    """Every sampler on antibody heavy chains in three settings: recovery (generation:
    1 - composition JSD) against forward passes."""

    name = "antibody"

    options = AntibodyBench

    default_specs = DEFAULT_SPECS

    model_help = ("a protein model: shipped or converted name (default antiberty) or folder "
                  "(ESM, our protein MDM)")

    min_limit = 2

    items = "held-out chains per setting (generation: sequences)"

    accuracy_label = "residue recovery % (generation: 100 × (1 − JSD))"

    columns = [("sampler", "label", ""), ("recovery %", "recovery_pct", ".1f"),
               ("vs seq (pts)", "vs_sequential", ""),
               ("PPL", "pseudo_perplexity", ".2f"), ("identity", "identity", ".3f"),
               ("JSD", "jsd_heldout", ".4f"), ("NFE", "nfe", ".1f"),
               ("tok/pass", "tokens_per_pass", ".2f"), ("seqs", "sequences", ".1f"),
               ("wall s", "wall_s", ".1f")]

    #: the columns of a generation setting (no truth to recover)
    generation_columns = [("sampler", "label", ""), ("heavy %", "heavy_pct", ".0f"),
                          ("vs seq (pts)", "heavy_vs_sequential", ""),
                          ("PLL/res", "pll", ".3f"), ("vs seq (nats)", "pll_vs_sequential", ""),
                          ("identity", "identity", ".3f"), ("JSD", "jsd_heldout", ".4f"),
                          ("NFE", "nfe", ".1f"), ("tok/pass", "tokens_per_pass", ".2f"),
                          ("seqs", "sequences", ".1f"), ("wall s", "wall_s", ".1f")]

    def check(self, options: AntibodyBench) -> AntibodyBench:
        """A setting named twice is run once (its rows would be doubled); an unknown one is
        refused."""
        unknown = [s for s in options.settings if s not in SETTINGS]
        if unknown:
            raise UnmaskError(f"--settings: unknown {unknown[0]!r}; choose from "
                              f"{', '.join(SETTINGS)}")
        return dataclasses.replace(options, settings=tuple(dict.fromkeys(options.settings)))


#: what ``unmask antibody bench`` builds its flags from, before importing the bench
DECLARED = AntibodyBenchTask()
