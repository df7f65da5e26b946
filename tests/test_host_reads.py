"""Host reads in the decode loop (each one a device synchronisation on a GPU): the loop makes
one per pass (its stopping check, which carries the contract checks), and no sampler, verifier
or hook adds more than one, counted on the CPU with the zero-cost model."""

import importlib.util
from pathlib import Path

import pytest
import torch

from unmask import DecodeConfig, decode, make_sampler
from unmask.host_reads import count_host_reads
from unmask.models.toy import FixedOutputModel
from unmask.samplers.base import Sampler, Selection, available_samplers
from unmask.samplers.verified import _needed

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("loop_overhead",
                                               ROOT / "benchmarks" / "loop_overhead.py")
loop_overhead = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(loop_overhead)
CASES = loop_overhead.cases()

@pytest.fixture(scope="module")
def model():
    return FixedOutputModel(n=32, v=9, seed=3)


def reads_per_pass(model, build, batch=8, config=None):
    return loop_overhead.host_reads_per_pass(model, build, batch, config)[0]


def test_every_registered_sampler_is_counted():
    assert set(available_samplers()) <= set(CASES)


def test_the_loop_reads_the_host_once_a_pass(model):
    """Confidence's selection reads nothing: what it costs is the loop's (one read a pass, the
    stopping check, plus four once per decode: three to check the input tokens, one to check
    the first pass's logits)."""
    assert reads_per_pass(model, CASES["confidence"]) == 1
    x = torch.full((8, model.n), model.mask_id, dtype=torch.long)
    with count_host_reads() as reads:
        res = decode(model, x, "confidence")
    assert int(res.steps.max()) == model.n
    assert reads.total == model.n + 4  # + checking the first pass's logits


@pytest.mark.parametrize("label", list(CASES))
def test_no_sampler_adds_more_than_one_read_a_pass(label, model):
    loop = reads_per_pass(model, CASES["confidence"])
    assert reads_per_pass(model, CASES[label]) <= loop + 1


#: decoders that read the host a second time a pass, because the shape of a model call they
#: make depends on it (docs/gpu.md): the lookahead samplers' candidates, a verified pass's
#: prefixes, WINO's checked positions
SECOND_READ = ("info-gain", "lookum", "eb+verify", "eb+verify (doubling)", "topk:k=3+verify=0",
               "threshold:tau=0.7+wino=0.9", "eb+verify (stop at EOS)")


@pytest.mark.parametrize("label", [label for label in CASES if label not in SECOND_READ])
def test_every_other_decoder_reads_the_host_once_a_pass(label, model):
    """DAPD's and DEMASK's scans (as on an accelerator, where they read nothing), the
    corrector (which keeps complete rows: known from the pass before's read) and every other
    sampler read no more than the loop."""
    assert reads_per_pass(model, CASES[label]) <= reads_per_pass(model, CASES["confidence"])


def test_cancelling_rows_reads_nothing(model):
    """The server's cancelling wrapper, with a row to cancel, reads as the loop does."""
    from unmask.serve.decoding import CancelRows

    def build(m):
        return CancelRows(make_sampler("confidence"), lambda: [0]), ()

    assert reads_per_pass(model, build) == reads_per_pass(model, CASES["confidence"])


@pytest.mark.parametrize("name", ["confidence", "topk", "threshold", "eb", "factor", "pc"])
def test_block_decoding_reads_the_host_twice_a_pass(name, model):
    """With blocks and a sampler that reads the current block only, the pass also reads which
    blocks it computes (one read for both ends)."""
    cfg = DecodeConfig(block_size=8)
    assert reads_per_pass(model, CASES[name], config=cfg) <= 2


@pytest.mark.parametrize("prefixes", ["all", "doubling"])
def test_sequences_a_verified_pass_needs_are_counted_without_the_prefixes(prefixes):
    """`_needed` (from draft sizes and masked counts) equals counting the evaluated prefixes
    that hold a MASK one by one."""
    for k in range(0, 40):
        for n_masked in range(max(k, 1), k + 3):
            m = torch.arange(1, k + 1)
            if prefixes == "all":
                evaluated = m
            else:
                evaluated = m[((m & (m - 1)) == 0) | (m == k)]
            expected = int((evaluated < n_masked).sum())
            got = _needed(torch.tensor([k]), torch.tensor([n_masked]), prefixes)
            assert got.tolist() == [expected], (k, n_masked)


def test_the_counter_counts_value_reads_and_restores_tensor():
    t = torch.tensor([1.0, 2.0])
    original = torch.Tensor.item
    with count_host_reads(sites=True) as reads:
        bool(t.sum() > 0)
        t.tolist()
        float(t[0])
        t.sum().item()
        t.sum() + 1  # no read
    assert reads.total == 4
    assert sum(reads.by_site.values()) == 4
    assert all(site.startswith("test_host_reads.py:") and site.endswith(
        " test_the_counter_counts_value_reads_and_restores_tensor") for site in reads.by_site)
    assert torch.Tensor.item is original


class _Broken(Sampler):
    """Reveals what ``choose(state)`` returns (tokens: ``tokens(state)`` or the loop's;
    ``stale``: ``stale(state)`` or none)."""

    def __init__(self, choose, tokens=None, stale=None):
        self.choose, self.tokens, self.stale = choose, tokens, stale

    def select(self, state):
        return Selection(self.choose(state),
                         None if self.tokens is None else self.tokens(state),
                         stale=None if self.stale is None else self.stale(state))


@pytest.mark.parametrize("sampler, message", [
    (_Broken(lambda s: ~s.eligible | s.eligible), "not eligible"),
    (_Broken(lambda s: torch.zeros_like(s.eligible)), "no progress"),
    (_Broken(lambda s: s.eligible, lambda s: torch.full_like(s.x0, 9)), "not a real token"),
    (_Broken(lambda s: s.eligible, lambda s: torch.full_like(s.x0, -4)), "not a real token"),
    (_Broken(lambda s: s.eligible[:, :-1]), "reveal must be a bool tensor"),
    (_Broken(lambda s: s.eligible, stale=lambda s: s.masked.any(1)), "with next_output"),
])
def test_a_sampler_breaking_the_contract_is_stopped_on_its_pass(sampler, message):
    model = FixedOutputModel(n=6, v=4)
    x = torch.full((2, 6), model.mask_id, dtype=torch.long)
    x[0, 0] = 1
    with pytest.raises(RuntimeError, match=message):
        decode(model, x, sampler)


def test_the_zero_cost_model_decodes_like_any_model():
    """Fixed logits: sequential confidence decoding reveals positions in descending
    confidence of the fixed argmax, each the argmax token."""
    model = FixedOutputModel(n=10, v=5, seed=1)
    x = torch.full((3, 10), model.mask_id, dtype=torch.long)
    res = decode(model, x, make_sampler("confidence"))
    probs = torch.softmax(model.logits[:, :5].double(), -1)
    assert torch.equal(res.tokens, probs.argmax(-1).expand(3, -1))
    order = torch.argsort(probs.amax(-1), descending=True, stable=True)
    assert torch.equal(res.reveal_step[0, order], torch.arange(10))
