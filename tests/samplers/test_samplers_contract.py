"""Every registered sampler, driven through the same decode loop plain and wrapped in each
wrapper of the library (``Verified``, ``StopAtEOS``, ``WithHooks``, ``Ramp``, and a verified
sampler inside ``StopAtEOS``), keeps the contract."""

import pytest
import torch

from unmask import DecodeConfig, UnmaskError, Verified, available_samplers, decode, make_sampler
from unmask.generate import StopAtEOS
from unmask.hooks import Hook
from unmask.samplers.base import sampler_class
from unmask.samplers.ramp import Ramp
from unmask.samplers.spec import WithHooks, parse_spec
from unmask.samplers.wrapper import SamplerWrapper

#: the samplers the library registers (no experimental one may join the global registry)
REGISTERED = ["confidence", "dapd", "demask", "dus", "eb", "entropy", "factor", "info-gain",
              "klass", "lookum", "margin", "mi-guided", "mi-oracle", "pc", "threshold", "topk",
              "uniform"]


def _untrained_estimator(model):
    from unmask.mi.estimator import EstimatorConfig, MIEstimator

    torch.manual_seed(0)
    return {"estimator": MIEstimator(EstimatorConfig(hidden_size=model.hidden_size)),
            "gamma": 1.0}


# Parameters for samplers whose defaults need something the test models lack (a shipped
# estimator, ...): a dict, or a function of the model returning one.
PARAMS: dict = {
    "mi-guided": _untrained_estimator,
    "mi-oracle": {"gamma": 1.0, "eps": 0.0},
    "demask": lambda model: {"estimator": _untrained_estimator(model)["estimator"],
                             "bound": 0.5},
}


def subject(name, toy, tiny_transformer):
    """The model a sampler is driven on: the toy, or the tiny transformer for samplers that
    read attention weights (the toy has none; tests/samplers/test_dapd.py checks the refusal)."""
    return tiny_transformer if getattr(sampler_class(name), "needs_attentions", False) else toy


def sampler_names():
    return REGISTERED


def test_the_registry_holds_the_library_samplers_only():
    import unmask.samplers  # noqa: F401  (registers them all)

    assert available_samplers() == REGISTERED


def verifiable(name):
    """Samplers whose sets ``Verified`` can check: all but lookahead."""
    return not sampler_class(name).evaluates_next_state


#: how a test wraps the sampler: name -> (verified?, wrap(sampler, model))
WRAPPERS = {
    "plain": (False, lambda s, m: s),
    "verified": (True, lambda s, m: Verified(s)),
    "stop-at-eos": (False, lambda s, m: _stop_at_eos(s, m)),
    "stop-at-eos-verified": (True, lambda s, m: _stop_at_eos(Verified(s), m)),
    "with-hooks": (False, lambda s, m: WithHooks(s, ())),
    "ramp": (False, lambda s, m: Ramp(s, rate=0.5)),
}
#: wrappers that refuse a sampler evaluating its own next state (lookahead)
REFUSE_LOOKAHEAD = ("verified", "stop-at-eos-verified", "ramp")


def _stop_at_eos(sampler, model):
    """Ends a row where the position before its first masked one holds the model's first
    real token (blocks of one position): often, on random inputs."""
    return StopAtEOS(sampler, eos_id=model.real_token_ids[0], block=1, gen_start=0)


VERIFY = pytest.mark.parametrize("verify", list(WRAPPERS))


def skip_unverifiable(name, verify):
    if verify in REFUSE_LOOKAHEAD and not verifiable(name):
        with pytest.raises(UnmaskError, match="evaluates its next state itself"):
            WRAPPERS[verify][1](make_sampler(name), None)
        pytest.skip(f"{name} evaluates its next state itself; {verify} refuses it")


def build(name, model, verify="plain"):
    params = PARAMS.get(name, {})
    sampler = make_sampler(name, **(params(model) if callable(params) else params))
    return WRAPPERS[verify][1](sampler, model)


def masked_inputs(model, b, seed=0):
    g = torch.Generator().manual_seed(seed)
    n = model.max_length
    x = torch.randint(0, len(model.real_token_ids), (b, n), generator=g)
    x = torch.tensor(model.real_token_ids)[x]
    hide = torch.rand(b, n, generator=g) < 0.7
    hide[0] = True  # one row fully masked
    return x.masked_fill(hide, model.mask_id)


@VERIFY
@pytest.mark.parametrize("name", sampler_names())
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_contract_on_toy(name, temperature, verify, toy, tiny_transformer):
    skip_unverifiable(name, verify)
    toy = subject(name, toy, tiny_transformer)
    x = masked_inputs(toy, 6)
    history_cfg = DecodeConfig(temperature=temperature, record_history=True)
    res = decode(toy, x, build(name, toy, verify), history_cfg, seed=11)
    masked = x == toy.mask_id
    # revealed tokens never change, and every mask is filled with a real token
    assert torch.equal(res.tokens[~masked], x[~masked])
    assert not (res.tokens == toy.mask_id).any()
    assert torch.isin(res.tokens, torch.tensor(toy.real_token_ids)).all()
    # at least one position per step, so at most N steps; NFE counts passes per row
    n_masked = masked.sum(1)
    assert (res.steps <= n_masked).all() and (res.steps >= (n_masked > 0).long()).all()
    assert (res.nfe >= res.steps.clamp(max=1)).all()
    assert (res.sequences >= res.nfe).all()
    # each history step changes every unfinished row by at least one position
    prev = x
    for t, state in enumerate(res.history):
        changed = (state != prev).sum(1)
        running = res.steps > t
        assert (changed[running] >= 1).all()
        assert (changed[~running] == 0).all()
        prev = state
    # reveal_step agrees with masking
    assert ((res.reveal_step >= 0) == masked).all()
    # same seed -> same output
    again = decode(toy, x, build(name, toy, verify), history_cfg, seed=11)
    assert torch.equal(res.tokens, again.tokens)


@VERIFY
@pytest.mark.parametrize("name", sampler_names())
def test_batch_equals_rows(name, verify, toy, tiny_transformer):
    skip_unverifiable(name, verify)
    toy = subject(name, toy, tiny_transformer)
    x = masked_inputs(toy, 5, seed=3)
    cfg = DecodeConfig(temperature=0.7)
    batch = decode(toy, x, build(name, toy, verify), cfg, seed=100)
    # the sampler's own statistics (lookahead samplers count bypasses and candidates)
    own = set(build(name, toy, verify).stats())
    assert set(batch.stats) == own | ({"rejected"} if WRAPPERS[verify][0] else set())
    for r in range(x.shape[0]):
        one = decode(toy, x[r:r + 1], build(name, toy, verify), cfg, seed=100 + r)
        assert torch.equal(one.tokens[0], batch.tokens[r]), (name, r)
        assert one.nfe[0] == batch.nfe[r]
        assert one.steps[0] == batch.steps[r]
        assert one.sequences[0] == batch.sequences[r]
        for key in batch.stats:
            assert one.stats[key][0] == batch.stats[key][r]


@VERIFY
@pytest.mark.parametrize("name", sampler_names())
def test_blocks_decode_left_to_right(name, verify, tiny_transformer):
    skip_unverifiable(name, verify)
    m = tiny_transformer
    x = torch.full((3, 12), m.mask_id)
    res = decode(m, x, build(name, m, verify), DecodeConfig(block_size=4), seed=0)
    # every position of block j is revealed before any position of block j + 1
    step = res.reveal_step.view(3, 3, 4)
    assert (step[:, :-1].max(-1).values < step[:, 1:].min(-1).values).all()
    assert not (res.tokens == m.mask_id).any()


@VERIFY
@pytest.mark.parametrize("name", sampler_names())
def test_nothing_masked_costs_nothing(name, verify, toy, tiny_transformer):
    skip_unverifiable(name, verify)
    toy = subject(name, toy, tiny_transformer)
    x = torch.zeros(2, 5, dtype=torch.long)
    res = decode(toy, x, build(name, toy, verify))
    assert res.nfe.tolist() == [0, 0] and res.steps.tolist() == [0, 0]
    assert torch.equal(res.tokens, x)


@pytest.mark.parametrize("name", sampler_names())
def test_registered_class_has_name(name):
    assert sampler_class(name).name == name


@pytest.mark.parametrize("wrap", [w for w in WRAPPERS if w != "plain"])
@pytest.mark.parametrize("name", sampler_names())
def test_a_wrapper_answers_the_protocol_as_its_sampler(name, wrap, toy, tiny_transformer):
    skip_unverifiable(name, wrap)
    model = subject(name, toy, tiny_transformer)
    plain, wrapped = build(name, model), build(name, model, wrap)
    assert isinstance(wrapped, SamplerWrapper)
    plain.prepare(model)
    wrapped.prepare(model)  # loads what the sampler reads (the estimator of mi-guided ...)
    assert wrapped.needs_hidden_layers == plain.needs_hidden_layers
    assert wrapped.needs_attentions == plain.needs_attentions
    assert wrapped.name == plain.name and plain.label in wrapped.label
    assert wrapped.evaluates_next_state == (WRAPPERS[wrap][0] or plain.evaluates_next_state)
    assert wrapped.decode_hooks() == ()


def test_a_wrapper_forwards_what_it_does_not_override():
    """A sampler whose every protocol answer differs from the base class's default."""
    from dataclasses import dataclass

    from unmask.samplers.base import Sampler, Selection

    @dataclass
    class Probe(Sampler):
        needs_attentions = True

        def prepare(self, model):
            self.prepared = model

        @property
        def needs_hidden_layers(self):
            return getattr(self, "prepared", None) is not None

        def begin(self, batch_size, seq_len):
            self.begun = (batch_size, seq_len)

        def select(self, state):
            return Selection(state.eligible)

        def stats(self):
            return {"probe": torch.ones(1)}

        def decode_hooks(self):
            return ("hook",)

    for wrap in (lambda s: WithHooks(s, ("more",)), lambda s: StopAtEOS(s, 0, 1, 0),
                 lambda s: Verified(s)):
        inner = Probe()
        w = wrap(inner)
        assert w.needs_attentions and not w.needs_hidden_layers
        w.prepare("model")
        assert inner.prepared == "model" and w.needs_hidden_layers
        w.begin(3, 7)
        assert inner.begun == (3, 7)
        assert torch.equal(w.stats()["probe"], torch.ones(1))
        assert w.decode_hooks()[0] == "hook"
        assert w.label.startswith("Probe")


class _OwnPasses(Hook):
    """Changes nothing, but as a hook that may rewrite tokens it makes the loop run the model
    on every pass itself (no handed-over next output is reused)."""

    rewrites = True
    reads_eligible_only = True


@pytest.mark.parametrize("inner", ["eb+verify", "topk:k=2+verify=0", "info-gain"])
def test_rows_ended_at_eos_get_the_model_on_their_own_next_state(inner, tiny_transformer,
                                                                 monkeypatch):
    """Rows that StopAtEOS ends are marked stale in the inner sampler's handed-over output,
    and the loop runs the model on their next state: the decode is the one where the loop
    runs every pass itself, and the loop did refresh rows."""
    from unmask.decode import _Loop

    m = tiny_transformer
    eos, other = m.real_token_ids[:2]
    x = torch.full((8, m.max_length), m.mask_id)
    x[:4, :2] = eos  # these rows end at once, then fill a block a pass
    x[4:, :2] = other
    x[6:, 5] = eos  # these may end later, with blocks still to fill
    cfg = DecodeConfig(block_size=2)

    def sampler():
        return StopAtEOS(parse_spec(inner).build(), eos_id=eos, block=2, gen_start=0)

    refreshed, refresh = [], _Loop.refresh

    def counting(self, handed, rows, stale, hidden_layers):
        refreshed.append(int(stale.sum()))
        return refresh(self, handed, rows, stale, hidden_layers)

    monkeypatch.setattr(_Loop, "refresh", counting)
    handed = decode(m, x, sampler(), cfg, seed=4)
    assert sum(refreshed) > 0
    calls = len(refreshed)
    own = decode(m, x, sampler(), cfg, hooks=(_OwnPasses(),), seed=4)
    assert len(refreshed) == calls  # nothing handed over, nothing to refresh
    assert (handed.tokens[:4, 2:] == eos).all()
    for field in ("tokens", "reveal_step", "steps", "cumulative_entropy"):
        assert torch.equal(getattr(handed, field), getattr(own, field)), field
