"""The token automaton and its canvas feasibility: hand-checked cases, allowed sets against a
brute force with Python's ``re``, the joint-feasibility search, refusals."""

import itertools
import re
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from tiny_text import bpe_tokenizer, char_tokenizer, text_model, text_of  # noqa: E402

from unmask import constraints  # noqa: E402
from unmask.constraints.base import Constrain, _largest_feasible, _rounds  # noqa: E402
from unmask.constraints.compile import compile_dfa, spelling  # noqa: E402
from unmask.constraints.dfa import DFAConstraint  # noqa: E402
from unmask.decode import decode  # noqa: E402
from unmask.errors import UnmaskError  # noqa: E402

pytest.importorskip("outlines_core")


def _allowed(model, spec, canvas, cols=None):
    con = DFAConstraint(spec)
    x = torch.tensor([canvas])
    con.prepare(model, x)
    cols = cols or slice(0, len(canvas))
    return con.allowed(x, torch.tensor([0]), cols)[0], con


def _ids(tok, text):
    return tok.convert_tokens_to_ids(list(text))


def test_hand_checked_allowed_sets():
    model = text_model(char_tokenizer())
    tok, m, eos = model.tokenizer, model.mask_id, model.eos_ids[0]
    a, b, c = _ids(tok, "abc")
    allowed, _ = _allowed(model, constraints.regex("a[bc]"), [m, m, m])
    sets = [set(row.nonzero().squeeze(1).tolist()) for row in allowed]
    assert sets == [{a}, {b, c}, {eos}]
    allowed, _ = _allowed(model, constraints.regex("a[bc]"), [m, c, m])
    assert [set(r.nonzero().squeeze(1).tolist()) for r in allowed][::2] == [{a}, {eos}]
    # after EOS only EOS: "a" then EOS at 1 forbids everything but EOS at 2, and "a" alone
    # is not in the language, so position 1 cannot be EOS
    allowed, _ = _allowed(model, constraints.regex("a|ab"), [m, m, m])
    assert set(allowed[1].nonzero().squeeze(1).tolist()) == {b, eos}
    assert set(allowed[0].nonzero().squeeze(1).tolist()) == {a}


def test_no_eos_fills_the_canvas_exactly():
    model = text_model(char_tokenizer(), eos=False)
    m = model.mask_id
    with pytest.raises(UnmaskError, match="fills its 3 positions exactly .a template"):
        _allowed(model, constraints.regex("a[bc]"), [m, m, m])
    out = decode(model, torch.full((2, 5), m), "confidence", constraint=constraints.regex("(ab)*a"))
    assert [text_of(model, r) for r in out.tokens.tolist()] == ["ababa"] * 2


@pytest.mark.parametrize("pattern", ["(ab|1)+", "the (cat|mat)", "[0-9]{2}", r"\{\"a\"}",
                                     r"\[1, [23]\]"])
def test_allowed_equals_brute_force_with_re(pattern):
    """Subword tokens: a token is allowed at a masked position exactly when some filling of
    the other masked positions decodes (up to EOS) to a full match of the pattern."""
    model = text_model(bpe_tokenizer())
    m, eos, vocab = model.mask_id, model.eos_ids[0], model.vocab_size
    # the ids that spell text, and EOS (PAD spells nothing: never used in a text)
    real = [i for i in model.real_token_mask.nonzero().squeeze(1).tolist()
            if i != model.pad_id]
    rng = torch.Generator().manual_seed(0)
    for _ in range(3):
        canvas = [m] * 3
        if True:  # one committed token, chosen among those a valid text can hold there
            pos = int(torch.randint(0, 3, (1,), generator=rng))
            allowed, _ = _allowed(model, constraints.regex(pattern), canvas)
            options = allowed[pos].nonzero().squeeze(1).tolist()
            canvas[pos] = options[int(torch.randint(0, len(options), (1,), generator=rng))]
        allowed, _ = _allowed(model, constraints.regex(pattern), canvas)
        masked = [i for i, t in enumerate(canvas) if t == m]
        want = torch.zeros(len(canvas), vocab, dtype=torch.bool)
        for fill in itertools.product(real, repeat=len(masked)):
            row = list(canvas)
            for i, t in zip(masked, fill, strict=True):
                row[i] = t
            cut = next((i for i, t in enumerate(row) if t == eos), len(row))
            if any(t != eos for t in row[cut:]):
                continue
            if re.fullmatch(pattern, text_of(model, row)):
                for i in masked:
                    want[i, row[i]] = True
        assert torch.equal(allowed[masked], want[masked]), (pattern, canvas)


def test_joint_commit_keeps_the_confident_feasible_prefix():
    model = text_model(char_tokenizer(), eos=False)
    m = model.mask_id
    a, b = _ids(model.tokenizer, "ab")
    hook = Constrain(DFAConstraint(constraints.regex("ab|ba")))
    x = torch.full((1, 2), m)
    hook.prepare(model, None, x.clone())
    from types import SimpleNamespace

    from unmask.samplers.base import Selection
    state = SimpleNamespace(row_ids=torch.tensor([0]), tokens=x, eligible=x == m,
                            x0=torch.tensor([[a, a]]), x0_prob=torch.tensor([[0.4, 0.9]]))
    sel, new = hook.adjust_selection(state, Selection(torch.tensor([[True, True]])),
                                     torch.tensor([[a, a]]))
    # "aa" is not in the language: the more confident position 1 is written alone
    assert sel.reveal.tolist() == [[False, True]] and hook.stats()["cut_passes"].tolist() == [1]


def test_search_finds_the_largest_feasible_count():
    class AtMost:
        def __init__(self, limit):
            self.limit = limit

        def feasible(self, tokens, rows):
            return (tokens == 1).sum(1) <= self.limit[rows]

    torch.manual_seed(0)
    for n in (1, 7, 8, 9, 64, 300):
        r = 40
        count = torch.randint(0, n + 1, (r,))
        limit = torch.randint(0, n + 1, (r,))
        rank = torch.argsort(torch.rand(r, n), 1).argsort(1)
        reveal = rank < count[:, None]
        x = torch.zeros(r, n, dtype=torch.long)
        got = _largest_feasible(AtMost(limit), torch.arange(r), x, reveal, rank, count,
                                torch.ones_like(x))
        assert torch.equal(got, torch.minimum(count, limit)), n
    assert _rounds(256, 8) == 3


def test_refusals_are_one_line():
    model = text_model(char_tokenizer())
    m = model.mask_id
    with pytest.raises(UnmaskError, match="shortest string takes 6 tokens; the canvas holds 4"):
        decode(model, torch.full((1, 4), m), "confidence", constraint=constraints.regex("abcdef"))
    spell = spelling(model.tokenizer, model.vocab_size, model.real_token_mask.tolist(),
                     model.eos_ids)
    with pytest.raises(UnmaskError, match="more than the bound 5"):
        compile_dfa(constraints.regex("[a-z]{8}"), spell, max_states=5)
    with pytest.raises(UnmaskError, match="took more than"):
        compile_dfa(constraints.regex("(a|b)*a(a|b){13}"), spell, timeout=0.01)
    _end_runaways()  # left running past its bound: ended here, not in a later test
    with pytest.raises(UnmaskError, match="cannot be compiled"):
        compile_dfa(constraints.regex("(a)\\1"), spell)
    with pytest.raises(UnmaskError, match="json_schema: not supported"):
        compile_dfa(constraints.json_schema({"not": {"type": "string"}}), spell)
    given = torch.tensor([_ids(model.tokenizer, "xy") + [m]])
    with pytest.raises(UnmaskError, match="row 0: its given tokens cannot be completed"):
        decode(model, given, "confidence", constraint=constraints.regex("ab?"))


def test_unconstrained_rows_decode_as_alone():
    model = text_model(bpe_tokenizer())
    x = torch.full((3, 12), model.mask_id)
    specs = [constraints.choice("yes", "no"), None, constraints.regex("[0-9]+")]
    mixed = decode(model, x, "eb:gamma=1", constraint=DFAConstraint(specs), seed=5)
    alone = decode(model, x[1:2], "eb:gamma=1", seed=6)
    assert torch.equal(mixed.tokens[1], alone.tokens[0]) and mixed.nfe[1] == alone.nfe[0]
    texts = [text_of(model, r) for r in mixed.tokens.tolist()]
    assert texts[0] in ("yes", "no") and re.fullmatch("[0-9]+", texts[2])


@pytest.mark.parametrize("sampler", ["confidence", "uniform", "eb:gamma=1"])
def test_wordpiece_texts_match(sampler, tmp_path):
    """BERT's WordPiece: words joined by spaces, ``##`` pieces glued, punctuation joined by
    the decoder's clean-up; every decoded text matches."""
    from tiny_text import wordpiece_tokenizer

    model = text_model(wordpiece_tokenizer(tmp_path))
    specs = [constraints.regex("yes(, no)*"), constraints.choice("the cat", "maybe"),
             constraints.regex("(a|b)(a|b|1)*")]
    out = decode(model, torch.full((3, 8), model.mask_id), sampler, seed=2,
                 constraint=DFAConstraint(specs))
    for spec, row in zip(specs, out.tokens.tolist(), strict=True):
        text = text_of(model, row)
        assert (text in spec.value if spec.kind == "choice"
                else re.fullmatch(spec.value, text)), (spec, text)


def test_one_host_read_a_pass_as_without():
    """The constraint's work reads nothing back: a constrained decode makes the loop's one
    read a pass (beyond the reads made once, when it is prepared)."""
    from unmask.host_reads import count_host_reads

    model = text_model(bpe_tokenizer())
    x = torch.full((4, 12), model.mask_id)
    con = DFAConstraint(constraints.regex("(ab|1)+"))
    runs = {}
    for label, c in (("free", None), ("constrained", con)):
        for sampler in ("confidence", "eb:gamma=1"):
            with count_host_reads() as reads:
                res = decode(model, x, sampler, constraint=c)
            runs[label, sampler] = (reads.total, int(res.steps.max()))
    for sampler in ("confidence", "eb:gamma=1"):
        free, passes_free = runs["free", sampler]
        con_reads, passes = runs["constrained", sampler]
        once_free, once_con = free - passes_free, con_reads - passes
        assert once_free >= 0 and once_con >= once_free  # per pass: one read each
        assert once_con - once_free <= 6  # prepared once (compile, checks)


def _end_runaways():
    from unmask.constraints import compile as compiler

    for worker in list(compiler._RUNAWAY):
        worker.join()


def _spell():
    model = text_model(char_tokenizer())
    return spelling(model.tokenizer, model.vocab_size, model.real_token_mask.tolist(),
                    model.eos_ids)


def test_a_pattern_whose_counts_unroll_past_the_bound_is_refused_before_compiling():
    """((a{100}){100}){100} would take outlines-core unbounded time and memory: refused at
    once; counts that unroll within the bound compile."""
    import time

    from unmask.constraints import compile as compiler

    t0 = time.perf_counter()
    with pytest.raises(UnmaskError, match="spell out 1e\\+06 characters, more than the bound"):
        compile_dfa(constraints.regex("((a{100}){100}){100}"), _spell())
    with pytest.raises(UnmaskError, match="json_schema: its counted repetitions"):
        compile_dfa(constraints.json_schema({"type": "string", "maxLength": 10**9}), _spell())
    assert time.perf_counter() - t0 < 5
    assert compile_dfa(constraints.regex("(ab){3}c{2,4}"), _spell()).n_states > 1
    compiler.check_unrolled("(?:x{1000}){99}", "regex")  # 99,000: within the bound


def test_a_compilation_past_its_bound_is_remembered_and_runaways_are_capped(monkeypatch):
    """A language that ran past its bound is refused at once when asked again with no longer
    a bound (no new thread); while MAX_RUNAWAY abandoned compilations still run, a new
    language is refused; once they end, it compiles."""
    import threading

    from unmask.constraints import compile as compiler

    slow = constraints.regex("(a|b)*a(a|b){12}")
    with pytest.raises(UnmaskError, match="took more than 0.01 s"):
        compile_dfa(slow, _spell(), timeout=0.01)
    threads = threading.active_count()
    with pytest.raises(UnmaskError, match="took more than 0.01 s"):
        compile_dfa(slow, _spell(), timeout=0.005)
    assert threading.active_count() <= threads  # refused without a thread
    _end_runaways()
    release = threading.Event()
    stuck = [threading.Thread(target=release.wait, daemon=True) for _ in range(2)]
    for t in stuck:
        t.start()
    monkeypatch.setattr(compiler, "_RUNAWAY", list(stuck))
    with pytest.raises(UnmaskError, match="2 earlier languages are still compiling"):
        compile_dfa(constraints.regex("x[yz]"), _spell())
    release.set()
    for t in stuck:
        t.join()
    assert compile_dfa(constraints.regex("x[yz]"), _spell()).n_states > 1
