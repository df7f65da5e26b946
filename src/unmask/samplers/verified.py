"""Verified parallel reveals: check a sampler's set against sequential decoding in one call.

A sampler proposes a set D of positions to reveal in one pass, each with the loop's proposal
(the argmax, or the Gumbel draw at the temperature). Revealing D at once is what sequential
decoding would have done only where no member changes the proposal of a later one. With D in
descending confidence, d_1 .. d_K, and P_m = the state with d_1 .. d_m revealed, one batched
model call evaluates P_1 .. P_K (K sequences per row). Position d_{l+1} is *consistent* when
its proposal under P_l (same rule, same Gumbel noise) is the token it was drafted with. The
pass reveals the longest prefix d_1 .. d_m whose members are all consistent (m >= 1: d_1 is
the loop's own proposal on the current state), and the model's output on P_m is the next
pass's (``Selection.next_output``), so a pass costs one model call per row, while
``sequences`` counts the K.

Every token revealed this way is the proposal of the model given the tokens revealed before
it (in pass order, and within a pass in confidence order): the decoded sequence is one that
sequential decoding, visiting positions in that order, produces. What parallel decoding can
still lose against sequential decoding is the order, not a token its own predecessors would
have changed.

The order can be held to sequential decoding's too, to a stated tolerance: with
``tolerance`` t < 1, d_{l+1} is accepted only if, under P_l, its confidence (the probability
of its proposal) is within t of the largest confidence of any eligible position, i.e. if
sequential confidence decoding on P_l would reveal it or one no more than t surer. At t = 0
(temperature 0, a set that holds the most confident position, as every confidence-ordered
sampler's does) the decode is sequential confidence decoding's, token for token, up to exact
ties; t = 1 checks tokens only.

Evaluating every prefix costs K sequences a pass. With ``prefixes="doubling"`` a pass
evaluates only P_m for m in E = {1, 2, 4, 8, ...} and m = K (about log2(K) + 1 sequences),
checks d_{l+1} under P_s, s the longest evaluated prefix with s <= l (its proposal, and with
t < 1 its confidence against the surest position open in P_l, all under P_s), and reveals
the longest prefix in E whose members all pass. A token is then the proposal given the
pass's first s members rather than all l: where the draft's members are independent of one
another given the state the two agree, elsewhere ``doubling`` may accept a token sequential
decoding would have changed. Drafts of at most two positions are checked the same way by
both.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import torch

from unmask.errors import UnmaskError, require
from unmask.models.base import ModelOutput
from unmask.probs import entropy_from_log_probs, propose, real_log_probs
from unmask.samplers.base import Selection, StepState
from unmask.samplers.wrapper import SamplerWrapper
from unmask.validation import is_int, is_number


@dataclass
class VerifiedReveal:
    """The outcome of verifying one pass's drafts, for the B rows of the step.

    reveal: (B, N) bool, the accepted prefix of each row's draft (never empty).
    next_output: the model on each row's next state (rows whose next state is complete get
        zeros, as they leave the loop), or None when no row needed a call.
    entropy: (B, N) nats, each revealed position's entropy given the pass's positions before
        it (what sequential decoding would have paid for it; 0 elsewhere).
    rejected: (B,) drafted positions (after the ``max_draft`` cap) held back for a later
        pass.
    """

    reveal: torch.Tensor
    next_output: ModelOutput | None
    entropy: torch.Tensor
    rejected: torch.Tensor


PREFIXES = ("all", "doubling")


def _prefix_passes(state: StepState, seqs: torch.Tensor, pre: _Prefixes, need: torch.Tensor,
                   *, tolerance: float, max_sequences: int, output_hidden_layers: bool
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None,
                              list[tuple[slice, ModelOutput]]]:
    """Run the model on the prefixes ``seqs`` (B, K, N) where ``need`` (B, K) holds.

    Each d_{r+1} (r >= 1) is read under P_{s_r} only, so its log-probabilities, proposal and
    entropy are taken at those K - 1 (prefix, position) pairs alone; the loop computes the
    accepted prefix's over every position when it reads that pass (unless ``tolerance`` < 1
    computed them for every prefix already).

    Returns (proposed (B, K - 1) long, d_{r+1}'s proposal under P_{s_r}; entropy (B, K - 1)
    float64 nats, its entropy there; confidence (B, K, N) float64, each position's proposed
    token's probability under each prefix, when ``tolerance`` < 1, else None; the calls as
    (row slice, output) pairs, rows in order). Entries of ranks r + 1 >= k are not defined.
    """
    b, width, n = seqs.shape
    device = seqs.device
    real = state.real_mask.to(device)
    noise = state.gumbel(0, tuple(state.log_probs.shape[1:])) if state.temperature > 0 else None
    proposed = torch.zeros(b, width - 1, dtype=torch.long, device=device)
    entropy = torch.zeros(b, width - 1, dtype=torch.float64, device=device)
    confidence = (torch.zeros(b, width, n, dtype=torch.float64, device=device)
                  if tolerance < 1.0 else None)
    calls: list[tuple[slice, ModelOutput]] = []
    for rows in _row_chunks(pre.per_row, max_sequences):
        here = need[rows]
        out = state.model(seqs[rows][here], state.row_ids[rows, None].expand(-1, width)[here],
                          output_hidden_layers=output_hidden_layers)
        # the call's sequence of (row, prefix) in row-major order of ``here``
        seq = here.flatten().long().cumsum(0).view(here.shape) - 1  # (R, K)
        at_seq = seq.gather(1, pre.under[rows]).clamp(min=0)  # (R, K - 1)
        at_pos = pre.pos[rows, 1:]  # (R, K - 1)
        if confidence is None:  # the checked pairs only
            lp_at = real_log_probs(out.logits[at_seq, at_pos], real)  # (R, K - 1, V)
            noise_at = (None if noise is None else
                        noise[rows][torch.arange(len(here), device=device)[:, None], at_pos])
            proposed[rows] = propose(lp_at, state.temperature, noise_at)
        else:  # every position of every prefix; the pairs are read from them
            lp = real_log_probs(out.logits, real)  # (S, N, V), S = here.sum()
            tok = propose(lp, state.temperature, None if noise is None else
                          noise[rows, None].expand(-1, width, -1, -1)[here])
            confidence[rows][here] = lp.gather(-1, tok[..., None]).squeeze(-1).double().exp()
            lp_at, proposed[rows] = lp[at_seq, at_pos], tok[at_seq, at_pos]
            out = dataclasses.replace(out, log_probs=lp)  # the loop's next lp
        entropy[rows] = entropy_from_log_probs(lp_at).double()
        calls.append((rows, out))
    return proposed, entropy, confidence, calls


def _row_chunks(per_row: list[int], max_sequences: int) -> list[slice]:
    """The rows of each model call: whole rows, up to ``max_sequences`` sequences (a row's
    count from ``per_row``) per call; rows that need nothing join the call before them, so
    calls cover the rows in order (none at all when none needs one)."""
    b, total = len(per_row), sum(per_row)
    if total <= max_sequences:
        return [slice(0, b)] if total else []
    chunks, start = [], 0
    while start < b:
        # whole rows per call, up to max_sequences sequences; rows that need nothing join the
        # call before them, so calls cover the rows in order (none at all when none needs one)
        stop, total = start + 1, per_row[start]
        while stop < b and (total == 0 or per_row[stop] == 0
                            or total + per_row[stop] <= max_sequences):
            total += per_row[stop]
            stop += 1
        if not total:
            break
        chunks.append(slice(start, stop))
        start = stop
    return chunks


def verify_reveal(state: StepState, draft: torch.Tensor, *, max_draft: int | None = None,
                  tolerance: float = 1.0, max_sequences: int = 8192,
                  output_hidden_layers: bool = False, prefixes: str = "all") -> VerifiedReveal:
    """Verify a draft against sequential decoding (module docstring).

    Args:
        state: the step's :class:`~unmask.samplers.base.StepState`; drafted tokens are
            ``state.x0``.
        draft: (B, N) bool, the positions the sampler chose.
        max_draft: verify at most this many positions per row (the most confident ones); the
            rest of the draft waits. None: the whole draft.
        tolerance: in [0, 1]; below 1 a position is also accepted only if its confidence under
            its predecessors is within this of the surest eligible position's.
        max_sequences: sequences per model call; rows are split across calls whole, so every
            row is charged one call per pass however its prefixes are chunked.
        output_hidden_layers: ask the model for its hidden layers (for the next pass).
        prefixes: ``"all"`` evaluates P_1 .. P_K; ``"doubling"`` only P_m for m in
            {1, 2, 4, 8, ...} and m = K (about log2(K) + 1 sequences per row), checks each
            d_j under the longest evaluated prefix shorter than j, and reveals the longest
            evaluated prefix whose members all pass (module docstring).

    Returns:
        A :class:`VerifiedReveal`.
    """
    pre = _Prefixes.of(state, draft, max_draft, prefixes)
    seqs = torch.where(pre.in_prefix, state.x0[:, None, :], state.tokens[:, None, :])
    need = pre.evaluated & (seqs == state.mask_id).any(-1)  # complete prefixes need no call
    proposed, prefix_entropy, confidence, calls = _prefix_passes(
        state, seqs, pre, need, tolerance=tolerance, max_sequences=max_sequences,
        output_hidden_layers=output_hidden_layers)

    ok = torch.ones_like(pre.valid)
    ok[:, 1:] = proposed == state.x0.gather(1, pre.pos[:, 1:])
    if confidence is not None:
        # the surest eligible position sequential decoding would see before d_{r+1}: the open
        # positions of P_r, with their confidences under P_{s_r}
        open_ = state.eligible[:, None, :] & ~pre.in_prefix  # (B, K, N): open under P_m
        conf_under = confidence.gather(1, pre.under[:, :, None].expand(-1, -1, pre.n))
        surest = conf_under.masked_fill(~open_[:, :-1], -1.0).amax(-1)  # (B, K - 1)
        ok[:, 1:] &= pre.at(confidence) >= surest - tolerance - 1e-12
    ok &= pre.valid
    # the longest evaluated prefix whose members all pass; d_1 always
    passing = ok.long().cumprod(1).bool() & pre.evaluated
    accepted = torch.where(passing, pre.m[None, :], 0).amax(1).clamp(min=1)  # (B,)
    # the next pass is the model on each row's accepted prefix
    next_output = (ModelOutput.cat([out.pick(need[rows], accepted[rows] - 1,
                                             all_chosen_evaluated=pre.all_called)
                                    for rows, out in calls]) if calls else None)
    return VerifiedReveal(reveal=(pre.ranks < accepted[:, None]) & draft,
                          next_output=next_output,
                          entropy=pre.paid_entropy(state, prefix_entropy, accepted),
                          rejected=pre.k - accepted)


def _needed(k: torch.Tensor, n_masked: torch.Tensor, prefixes: str) -> torch.Tensor:
    """(B,) how many of the prefixes P_1 .. P_k a row evaluates hold a MASK, from the draft
    sizes ``k`` (B,) and the masked counts (B,): P_m has one unless m = n_masked (the draft
    is masked positions), and P_k is always evaluated."""
    if prefixes == "doubling":  # lengths 1, 2, 4, ... up to k, and k
        powers = 2 ** torch.arange(62, device=k.device)
        evaluated = (powers[None, :] <= k[:, None]).sum(1) + ((k & (k - 1)) != 0).long()
    else:
        evaluated = k
    return evaluated - ((k == n_masked) & (k > 0)).long()


@dataclass
class _Prefixes:
    """The prefixes P_1 .. P_K of a draft (in descending confidence) and which are evaluated.

    order, ranks: (B, N) positions by confidence rank and each position's rank; k: (B,) the
    draft sizes (capped); m: (K,) 1..K; in_prefix: (B, K, N) the members of P_m; valid:
    (B, K) m <= k; evaluated: (B, K) the prefixes given a model call; under: (B, K - 1) the
    prefix index (s_r - 1) under which d_{r+1} is checked; pos: (B, K) the drafted positions
    by rank; per_row: each row's evaluated prefixes that hold a MASK (the sequences it needs
    run), on the host; all_called: on the host, whether every row's evaluated prefixes all
    hold a MASK (no draft completes its row), so every accepted prefix has a model output.
    """

    order: torch.Tensor
    ranks: torch.Tensor
    k: torch.Tensor
    m: torch.Tensor
    in_prefix: torch.Tensor
    valid: torch.Tensor
    evaluated: torch.Tensor
    under: torch.Tensor
    pos: torch.Tensor
    n: int
    per_row: list[int]
    all_called: bool

    @classmethod
    def of(cls, state: StepState, draft: torch.Tensor, max_draft: int | None, prefixes: str
           ) -> _Prefixes:
        b, n = draft.shape
        device = draft.device
        conf = state.x0_prob.double().masked_fill(~draft, -torch.inf)
        order = torch.argsort(conf, dim=1, descending=True, stable=True)  # (B, N)
        k = draft.sum(1)
        if max_draft is not None:
            k = k.clamp(max=max_draft)
        # the one host read of a verified pass: the draft sizes, sequences per row, and the
        # rows whose whole draft completes them (or that have none)
        n_masked = state.masked.sum(1)
        sizes = torch.stack([k, _needed(k, n_masked, prefixes),
                             ((k == n_masked) | (k == 0)).long()]).tolist()
        width, per_row, all_called = max(sizes[0], default=0), sizes[1], not any(sizes[2])
        ranks = torch.empty_like(order)
        ranks.scatter_(1, order, torch.arange(n, device=device).expand(b, n))
        m = torch.arange(1, width + 1, device=device)
        in_prefix = (ranks[:, None, :] < m[None, :, None]) & draft[:, None, :]  # (B, K, N)
        valid = m[None, :] <= k[:, None]  # (B, K)
        if prefixes == "all":
            evaluated = valid
        elif prefixes == "doubling":
            evaluated = valid & (((m & (m - 1)) == 0)[None, :] | (m[None, :] == k[:, None]))
        else:
            raise UnmaskError(f"prefixes: expected one of {PREFIXES}, got {prefixes!r}")
        # d_{r+1} (rank r) is checked under P_{s_r}, s_r = the longest evaluated prefix <= r
        # (s_r = r for "all"; >= 1 from rank 1 on: P_1 is always evaluated)
        last = torch.where(evaluated, m[None, :], 0).cummax(1).values  # (B, K): s_m
        under = (last[:, :-1] - 1).clamp(min=0)  # (B, K - 1)
        return cls(order, ranks, k, m, in_prefix, valid, evaluated, under, order[:, :width], n,
                   per_row, all_called)

    def at(self, t: torch.Tensor) -> torch.Tensor:
        """t (B, K, N) -> (B, K - 1): t[b, under, pos], d_{r+1}'s value under P_{s_r}."""
        return t.gather(1, self.under[:, :, None].expand(-1, -1, self.n)).gather(
            2, self.pos[:, 1:, None]).squeeze(-1)

    def paid_entropy(self, state: StepState, prefix_entropy: torch.Tensor,
                     accepted: torch.Tensor) -> torch.Tensor:
        """(B, N) nats each revealed position pays: d_1 its entropy on the current state,
        d_{r+1} its entropy under P_{s_r} (``prefix_entropy`` (B, K - 1)); 0 elsewhere."""
        b, width = self.pos.shape
        paid = torch.zeros(b, width, dtype=torch.float64, device=self.pos.device)
        paid[:, 0] = state.entropy.double().gather(1, self.pos[:, :1]).squeeze(1)
        paid[:, 1:] = prefix_entropy
        entropy = torch.zeros(b, self.n, dtype=torch.float64, device=self.pos.device)
        entropy.scatter_(1, self.pos, torch.where(self.m[None, :] <= accepted[:, None],
                                                  paid, 0.0))
        return entropy


@dataclass
class Verified(SamplerWrapper):
    """A sampler whose every pass's set is verified against sequential decoding.

    The inner sampler chooses a set; only its longest prefix (in confidence order) whose
    tokens its own earlier members would not change is revealed (module docstring). The model
    call that checks the prefixes is the next pass's (``Selection.next_output``): one model
    call per pass, ``sequences`` counts the prefixes. Reports ``stats["rejected"]`` (B,):
    positions the inner sampler chose that verification held back for a later pass (with the
    inner sampler's own statistics). The spec ``NAME+verify=T,max_draft=M,prefixes=P`` builds
    one (:mod:`unmask.samplers.spec`).

    Args:
        inner: the sampler whose sets are verified; not one that evaluates its next state
            itself (lookahead), nor one that writes its own tokens.
        tolerance: in [0, 1]; below 1 a position is also accepted only if, given the pass's
            positions before it, its confidence is within this of the surest eligible
            position's (0: sequential confidence decoding's order; 1: tokens only).
        max_draft: verify (and reveal) at most this many positions per pass, the most
            confident of the set (None: the whole set); bounds sequences per pass.
        prefixes: which prefixes a pass evaluates (:func:`verify_reveal`): ``"all"`` (every
            token checked under all its predecessors; K sequences per pass) or
            ``"doubling"`` (lengths 1, 2, 4, ..., K; about log2(K) + 1 sequences per pass,
            each token checked under the longest evaluated prefix before it).
    """

    evaluates_next_state: ClassVar[bool] = True
    #: its passes judge whole rows (the next pass's output is handed over)
    reads_eligible_only: ClassVar[bool] = False

    tolerance: float = 1.0
    max_draft: int | None = None
    prefixes: str = "all"

    def __post_init__(self):
        super().__post_init__()
        if self.inner.evaluates_next_state:
            raise UnmaskError(f"verify: sampler {self.inner.label!r} evaluates its next state "
                              "itself (lookahead); verify the sets of samplers that do not")
        require(is_number(self.tolerance)
                and 0.0 <= self.tolerance <= 1.0,
                f"verify_tolerance: must be in [0, 1], got {self.tolerance!r}")
        require(self.max_draft is None or (is_int(self.max_draft)
                                           and self.max_draft >= 1),
                f"verify max_draft: must be None or an integer >= 1, got {self.max_draft!r}")
        require(self.prefixes in PREFIXES,
                f"verify prefixes: expected one of {PREFIXES}, got {self.prefixes!r}")
        self._batch_size, self._rejected = 0, None

    @property
    def label(self) -> str:
        return f"{self.inner.label}+verify"

    def begin(self, batch_size: int, seq_len: int) -> None:
        super().begin(batch_size, seq_len)
        self._batch_size, self._rejected = batch_size, None

    def select(self, state: StepState) -> Selection:
        sel = self.inner.select(state)
        if sel.tokens is not None:
            raise RuntimeError(f"sampler {self.inner.label!r}: verification checks the loop's "
                               "proposals; a sampler with its own tokens cannot be verified")
        checked = verify_reveal(state, sel.reveal, max_draft=self.max_draft,
                                tolerance=self.tolerance,
                                output_hidden_layers=self.needs_hidden_layers,
                                prefixes=self.prefixes)
        if self._rejected is None:
            self._rejected = torch.zeros(self._batch_size, dtype=torch.long,
                                         device=state.tokens.device)
        self._rejected.index_add_(0, state.row_ids, checked.rejected)
        return Selection(checked.reveal, next_output=checked.next_output,
                         entropy=checked.entropy)

    def stats(self) -> dict[str, torch.Tensor]:
        rejected = self._rejected
        if rejected is None:
            rejected = torch.zeros(self._batch_size, dtype=torch.long)
        return {**super().stats(), "rejected": rejected}
