"""Chain typing with ANARCI's HMMs through pyhmmer: real germline V genes of each chain type
(the IMGT genes the anarci package ships) are typed as what they are."""

import pytest

pytest.importorskip("anarci")
pytest.importorskip("pyhmmer")

from unmask.antibody.data import germline_table  # noqa: E402
from unmask.antibody.typing import ChainType, chain_types, heavy_share  # noqa: E402
from unmask.errors import UnmaskError  # noqa: E402


def genes(chain: str, species: str, count: int) -> list[str]:
    """The first ``count`` distinct V genes of ``chain`` ('H', 'K', 'L') of ``species``."""
    table = germline_table()["V"][chain][species]
    seqs = list(dict.fromkeys(g.replace("-", "") for _, g in sorted(table.items())))
    return seqs[:count]


@pytest.mark.parametrize("species", ["human", "mouse"])
def test_germline_v_genes_are_typed_as_their_chain(species):
    want, seqs = [], []
    for chain in "HKL":
        got = genes(chain, species, 6)
        seqs += got
        want += [chain] * len(got)
    types = chain_types(seqs)
    assert [t.chain for t in types] == want
    assert all(t.score >= 80 for t in types)
    # the margin says heavy for heavy chains, not for light ones
    assert all((t.heavy_margin > 0) == (w == "H") for t, w in zip(types, want, strict=True))
    assert heavy_share(types) == pytest.approx(want.count("H") / len(want))


def test_a_heavy_chain_with_a_cdr3_and_j_gene_stays_heavy():
    # a whole human heavy variable domain: IGHV3-23 germline, a CDR3 and the IGHJ4 FR4
    seq = ("EVQLLESGGGLVQPGGSLRLSCAASGFTFSSYAMSWVRQAPGKGLEWVSAISGSGGSTYYADSVKGRFTISRDNSKNT"
           "LYLQMNSLRAEDTAVYYCAKDRGYSSGWYFDYWGQGTLVTVSS")
    [t] = chain_types([seq])
    assert t.heavy and t.score > 150


def test_a_light_framework_start_turns_a_heavy_tail_light():
    """What a parallel decoder's chimera looks like: a lambda chain's first half, a heavy
    chain's second half, typed by whichever half scores more (here not heavy)."""
    heavy, light = genes("H", "human", 1)[0], genes("L", "human", 1)[0]
    [t] = chain_types([light[:70] + heavy[70:]])
    assert not t.heavy


def test_what_is_no_antibody_is_untyped_and_order_is_kept():
    seqs = ["", "GSGSGSGSGSGSGSGSGSGS", genes("K", "human", 1)[0]]
    types = chain_types(seqs)
    assert types[0] == ChainType(None, None, 0.0, 0.0)
    assert types[1].chain is None and types[1].score < 80
    assert types[2].chain == "K"


def test_bad_input_is_refused():
    with pytest.raises(UnmaskError, match="residue strings"):
        chain_types([b"EVQL"])
    with pytest.raises(UnmaskError, match="at least one"):
        heavy_share([])
