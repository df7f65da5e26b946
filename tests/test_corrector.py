"""The corrector: the loop's remasking (exact on the toy MDM with hand-made correctors) and
the learned head (shape, persistence tied to one MDM, states and training)."""

import pytest
import torch

from unmask import DecodeConfig, ExactJointMDM, UnmaskError, decode, make_sampler
from unmask.corrector import (
    Corrector,
    CorrectorConfig,
    CorrectorTrainConfig,
    compute_corrector_features,
    decoded_states,
    load_corrector,
    train_corrector,
)
from unmask.hooks import BanRemasked, CheckFinished, Remask, corrector_hooks
from unmask.metrics import roc_auc


class FixedCorrector:
    """Says every decoded token is wrong with probability ``p`` (hand-made, for the loop)."""

    def __init__(self, p: float):
        self.p = p
        self.calls = []

    def check_model(self, model):
        pass

    def wrong_probs(self, output, tokens):
        self.calls.append(tokens.clone())
        return torch.full(tokens.shape, self.p)


class KnowsTheAnswer:
    """Flags exactly the tokens that differ from ``answer`` (a perfect corrector)."""

    def __init__(self, answer: torch.Tensor):
        self.answer = answer

    def check_model(self, model):
        pass

    def wrong_probs(self, output, tokens):
        return (tokens != self.answer[: len(tokens)]).float()


def test_a_corrector_that_flags_everything_remasks_each_position_max_remasks_times(toy):
    """Two blanks, sequential: pass 1 reveals a; pass 2 reveals b and remasks a; pass 3
    reveals a and remasks b; pass 4 reveals b (a is out of remasks); pass 5 checks and ends."""
    x = torch.tensor([[0, 1, 2, toy.mask_id, toy.mask_id]])
    res = decode(toy, x, "confidence", hooks=corrector_hooks(FixedCorrector(0.9), max_remasks=1))
    assert res.nfe.tolist() == [5]
    assert res.stats["remasked"].tolist() == [2]
    assert res.tokens[0, :3].tolist() == [0, 1, 2]  # given tokens never change
    assert (res.tokens != toy.mask_id).all()
    plain = decode(toy, x, "confidence")
    assert torch.equal(res.tokens, plain.tokens)  # the exact model decodes a and b again


@pytest.mark.parametrize("sampler, block", [("confidence", None), ("topk:k=2", None),
                                            ("eb:gamma=0.5", None), ("topk:k=2", 1)])
def test_a_corrector_that_flags_nothing_costs_one_check_pass(toy, sampler, block):
    name, _, params = sampler.partition(":")
    kw = dict(p.split("=") for p in params.split(",")) if params else {}
    kw = {k: (int(v) if v.isdigit() else float(v)) for k, v in kw.items()}
    x = torch.full((3, 5), toy.mask_id)
    x[1, 2] = 1
    x[2, :4] = torch.tensor([0, 1, 1, 0])
    cfg = DecodeConfig(block_size=block)
    plain = decode(toy, x, make_sampler(name, **kw), cfg)
    corr = FixedCorrector(0.1)
    res = decode(toy, x, make_sampler(name, **kw), cfg, hooks=corrector_hooks(corr))
    assert torch.equal(res.tokens, plain.tokens)
    assert torch.equal(res.nfe, plain.nfe + 1)
    assert res.stats["remasked"].tolist() == [0, 0, 0]
    # the last pass of every row saw the finished row
    assert all((c != toy.mask_id).any() for c in corr.calls)


def test_a_perfect_corrector_repairs_what_parallel_decoding_got_wrong():
    """On a joint where one-shot decoding of independent argmaxes is wrong, a corrector that
    knows the answer sends the wrong tokens back until the exact model decodes them right."""
    torch.manual_seed(0)
    found = False
    for seed in range(40):
        toy = ExactJointMDM(n=5, v=3, seed=seed)
        x = torch.full((1, 5), toy.mask_id)
        one_shot = decode(toy, x, make_sampler("topk", k=5))
        mode = toy.states[toy.probs.argmax()]
        seq = decode(toy, x, "confidence").tokens[0]
        if torch.equal(one_shot.tokens[0], seq) or not torch.equal(seq, mode):
            continue
        found = True
        res = decode(toy, x, make_sampler("topk", k=5),
                     hooks=corrector_hooks(KnowsTheAnswer(seq[None]), max_remasks=5))
        assert res.stats["remasked"].item() >= 1
        assert torch.equal(res.tokens[0], seq)
        break
    assert found, "no toy joint where one-shot decoding differs from sequential"


def test_remask_settings_are_validated():
    corr = FixedCorrector(0.5)
    for bad in (0.0, 1.0, True, "0.3"):
        with pytest.raises(UnmaskError, match="remask_threshold"):
            Remask(corr, threshold=bad)
    for bad in (-1, 1.5, True):
        with pytest.raises(UnmaskError, match="max_remasks"):
            Remask(corr, max_remasks=bad)
        with pytest.raises(UnmaskError, match="max_remasks"):
            BanRemasked(bad)
    with pytest.raises(UnmaskError, match="corrector: expected an object with"):
        Remask(object())


def test_corrector_hooks_are_remask_check_and_ban():
    corr = FixedCorrector(0.5)
    remask, check = corrector_hooks(corr, threshold=0.2, max_remasks=3)
    assert isinstance(remask, Remask) and isinstance(check, CheckFinished)
    assert (remask.corrector, remask.threshold, remask.max_remasks) == (corr, 0.2, 3)
    *_, ban = corrector_hooks(corr, max_remasks=1, ban_remasked=True)
    assert isinstance(ban, BanRemasked) and ban.max_bans == 1


def test_remask_without_check_lets_a_filled_row_end(toy):
    """Without :class:`CheckFinished` a row ends as soon as its last MASK is filled: the
    corrector reads every pass but the one after the last."""
    x = torch.full((2, 5), toy.mask_id)
    plain = decode(toy, x, "confidence")
    corr = FixedCorrector(0.1)
    res = decode(toy, x, "confidence", hooks=(Remask(corr),))
    assert torch.equal(res.tokens, plain.tokens) and torch.equal(res.nfe, plain.nfe)
    assert sum(len(c) for c in corr.calls) == int(plain.nfe.sum())


# -- the learned head ------------------------------------------------------------------------

@pytest.fixture
def small_model():
    from unmask.models import MDMTransformer, TransformerConfig

    torch.manual_seed(0)
    return MDMTransformer(TransformerConfig(vocab_size=5, mask_id=4, max_length=6, d_model=16,
                                            n_layers=1, n_heads=2, d_ff=32)).eval()


def test_head_reads_one_pass_and_belongs_to_its_model(small_model, tmp_path):
    torch.manual_seed(1)
    corr = Corrector(CorrectorConfig.for_model(small_model, d=8, n_heads=2, layers=1)).eval()
    x = torch.tensor([[0, 4, 2, 3, 4, 1], [4, 4, 4, 4, 4, 0]])
    with torch.no_grad():
        out = small_model(x)
        feats = corr.features(out, x)
        p = corr.wrong_probs(out, x)
    assert feats.shape == (2, 6, 16 + 4 + 1 + 5)
    assert torch.allclose(feats[..., 16:20].sum(-1), torch.ones(2, 6))  # marginals
    assert torch.equal(feats[..., 21:].argmax(-1), x)  # one-hot current token
    # the features as first written: a list index and F.one_hot (no buffers on the head)
    ids = corr.config.real_token_ids
    log_p = torch.log_softmax(out.logits[..., ids].float(), -1)
    first = torch.cat([out.hidden.float(), log_p.exp(), torch.special.entr(log_p.exp())
                       .sum(-1, keepdim=True), torch.nn.functional.one_hot(x, 5).float()], -1)
    assert torch.equal(feats, first)
    assert p.shape == (2, 6) and ((p > 0) & (p < 1)).all()
    corr.save(tmp_path / "c")
    back = load_corrector(tmp_path / "c", model=small_model)
    with torch.no_grad():
        assert torch.equal(back.wrong_probs(out, x), p)
    with torch.no_grad():
        small_model.head.weight.add_(0.1)  # another model now
    with pytest.raises(UnmaskError, match="fingerprint"):
        load_corrector(tmp_path / "c", model=small_model)
    with pytest.raises(UnmaskError, match="corrector"):
        load_corrector(tmp_path / "nothing-here")


def test_decoded_states_label_what_differs_from_the_answer(toy):
    answer = torch.tensor([[0, 1, 2, 0, 1], [2, 2, 2, 2, 2]])
    inputs = answer.clone()
    inputs[:, 2:] = toy.mask_id
    states = decoded_states(toy, inputs, answer, [("confidence", {}), ("topk", {"k": 3})])
    # row 0 sequential: 3 states; row 1 one shot: 1 state
    assert states.tokens.shape == (4, 5)
    assert states.groups.tolist() == [0, 0, 0, 1]
    assert not states.decoded[:, :2].any()  # the given positions are never "decoded"
    assert torch.equal(states.decoded, (states.tokens != toy.mask_id) & (torch.arange(5) >= 2))
    want = (states.tokens != answer[states.groups]) & states.decoded
    assert torch.equal(states.wrong, want)


def test_roc_auc_exact():
    y = torch.tensor([True, False, True, False])
    assert roc_auc(torch.tensor([0.9, 0.1, 0.8, 0.2]), y) == 1.0
    assert roc_auc(torch.tensor([0.1, 0.9, 0.2, 0.8]), y) == 0.0
    assert roc_auc(torch.tensor([0.5, 0.5, 0.5, 0.5]), y) == 0.5
    assert roc_auc(torch.tensor([0.9, 0.2, 0.1, 0.8]), y) == 0.5


def test_training_learns_to_find_wrong_tokens(small_model, tmp_path):
    """A token is wrong exactly when it is 3: the head must learn that from the one-hot."""
    torch.manual_seed(2)
    tokens = torch.randint(0, 4, (400, 6))
    tokens[torch.rand(400, 6) < 0.3] = small_model.mask_id
    decoded = tokens != small_model.mask_id
    from unmask.corrector import DecodedStates

    states = DecodedStates(tokens, (tokens == 3) & decoded, decoded, torch.arange(400))
    corr = Corrector(CorrectorConfig.for_model(small_model, d=8, n_heads=2, layers=1))
    feats = compute_corrector_features(small_model, corr, tokens)
    res = train_corrector(corr, feats, states, CorrectorTrainConfig(max_epochs=8, lr=1e-2,
                                                                    batch_size=32),
                          tmp_path / "run", log=lambda s: None)
    assert res["auc"] > 0.99
    assert res["precision"] > 0.9 and res["recall"] > 0.9
    assert (tmp_path / "run" / "best" / "corrector.safetensors").is_file()
    assert len((tmp_path / "run" / "history.jsonl").read_text().splitlines()) >= 1


def test_a_lookahead_sampler_under_a_corrector_decodes_the_same_tokens(toy):
    """Its precomputed next pass is not reused (the corrector may change the state after
    it), so it pays one loop pass per step more; the decisions stay the same."""
    x = torch.full((2, 5), toy.mask_id)
    x[1, 0] = 2
    plain = decode(toy, x, make_sampler("info-gain"))
    res = decode(toy, x, make_sampler("info-gain"), hooks=corrector_hooks(FixedCorrector(0.1)))
    assert torch.equal(res.tokens, plain.tokens)
    assert (res.nfe >= plain.nfe + 1).all()


def test_ban_remasked_decodes_a_sent_back_position_to_another_token(toy):
    x = torch.tensor([[0, 1, 2, toy.mask_id, toy.mask_id]])
    plain = decode(toy, x, "confidence")
    res = decode(toy, x, "confidence", hooks=corrector_hooks(
        FixedCorrector(0.9), max_remasks=1, ban_remasked=True))
    assert res.nfe.tolist() == [5] and res.stats["remasked"].tolist() == [2]
    assert (res.tokens[0, 3:] != plain.tokens[0, 3:]).all()
    assert res.tokens[0, :3].tolist() == [0, 1, 2]
    # each second choice is the best token left under the exact conditional at its pass:
    # pass 3 decodes the first-revealed position beside the other's first token, pass 4 the
    # other beside the new token
    first = 3 if int(plain.reveal_step[0, 3]) == 0 else 4
    second = 7 - first
    state = plain.tokens[0].clone()
    state[first] = toy.mask_id
    p = toy.conditionals(state[None])[0, first]
    p[int(plain.tokens[0, first])] = -1
    assert int(res.tokens[0, first]) == int(p.argmax())
    state = res.tokens[0].clone()
    state[second] = toy.mask_id
    p = toy.conditionals(state[None])[0, second]
    p[int(plain.tokens[0, second])] = -1
    assert int(res.tokens[0, second]) == int(p.argmax())


def test_ban_remasked_refuses_more_bans_than_tokens_to_spare(toy):
    x = torch.tensor([[0, 1, 2, toy.mask_id, toy.mask_id]])
    with pytest.raises(UnmaskError, match="max_remasks"):
        decode(toy, x, "confidence", hooks=corrector_hooks(
            FixedCorrector(0.9), max_remasks=3, ban_remasked=True))


def test_epoch_order_is_the_runs_generator_replayed():
    """The shuffle of each epoch is what one generator seeded once draws epoch after epoch,
    as a function of (seed, epoch), so a resumed run shuffles as an uninterrupted one."""
    from unmask.corrector import _epoch_order

    gen = torch.Generator().manual_seed(7)
    for epoch in range(4):
        assert torch.equal(_epoch_order(50, 7, epoch), torch.randperm(50, generator=gen))


def test_training_resumes_and_refuses_other_data(small_model, tmp_path):
    torch.manual_seed(2)
    tokens = torch.randint(0, 4, (200, 6))
    tokens[torch.rand(200, 6) < 0.3] = small_model.mask_id
    decoded = tokens != small_model.mask_id
    from unmask.corrector import DecodedStates

    states = DecodedStates(tokens, (tokens == 3) & decoded, decoded, torch.arange(200))
    cfg = CorrectorTrainConfig(max_epochs=2, lr=1e-2, batch_size=32)

    def run(**kw):
        torch.manual_seed(3)
        corr = Corrector(CorrectorConfig.for_model(small_model, d=8, n_heads=2, layers=1))
        feats = compute_corrector_features(small_model, corr, tokens)
        return train_corrector(corr, feats, states, cfg, tmp_path / "run", log=lambda s: None,
                               **kw), corr

    first, corr = run(data={"puzzles": 200})
    again, corr2 = run(data={"puzzles": 200}, resume=True)  # already done: nothing more
    assert again["best_epoch"] == first["best_epoch"]
    assert all(torch.equal(a, b) for a, b in zip(corr.state_dict().values(),
                                                 corr2.state_dict().values(), strict=True))
    with pytest.raises(UnmaskError, match=r"data.puzzles 200 -> 300"):
        run(data={"puzzles": 300}, resume=True)


def test_a_states_file_that_would_run_code_is_refused(tmp_path):
    from unmask.corrector import load_decoded_states

    marker = tmp_path / "marker"

    class RunsCode:
        def __reduce__(self):
            return exec, (f"open({str(marker)!r}, 'w').write('ran')",)

    torch.save({"key": {}, "states": RunsCode()}, tmp_path / "states.pt")
    with pytest.raises(UnmaskError, match="refused"):
        load_decoded_states(tmp_path / "states.pt")
    assert not marker.exists()
    (tmp_path / "empty.pt").write_bytes(b"")
    with pytest.raises(UnmaskError, match="not a states file"):
        load_decoded_states(tmp_path / "empty.pt")


@pytest.mark.parametrize("damage", ["truncated weights", "config a list", "config lacks a key",
                                    "config not JSON"])
def test_a_damaged_head_folder_is_one_line(small_model, tmp_path, damage):
    import json

    corr = Corrector(CorrectorConfig.for_model(small_model, d=8, n_heads=2, layers=1))
    corr.save(tmp_path)
    weights, config = tmp_path / "corrector.safetensors", tmp_path / "config.json"
    meta = json.loads(config.read_text())
    if damage == "truncated weights":
        weights.write_bytes(weights.read_bytes()[:200])
    elif damage == "config a list":
        config.write_text("[1, 2]")
    elif damage == "config lacks a key":
        del meta["config"]["hidden_size"]
        config.write_text(json.dumps(meta))
    else:
        config.write_text("{not json")
    with pytest.raises(UnmaskError, match="corrector: ") as e:
        Corrector.load(tmp_path)
    assert "\n" not in str(e.value)
