"""Fast-dLLM's block KV cache (arXiv:2505.22618) for the decode loop, opt-in.

A row's first pass in a block runs the whole row and keeps every layer's keys and values;
the block's later passes reuse them:

- ``"prefix"``: the keys/values of the positions before the block are reused; the model
  runs the block and everything after it.
- ``"dual"``: the keys/values before *and* after the block are reused; the model runs the
  block alone (its keys/values replace the cached ones in place).

The cache is refreshed at every block boundary. For a bidirectional model (LLaDA) this
changes what the model computes: within a block, the reused keys/values are those of the
block's first pass, not of the current tokens, so the tokens may differ from decoding
without the cache (``docs/models.md`` measures by how much). Positions the model does not
run on a pass keep the logits and hidden states of the block's first pass; samplers reveal
only positions of the current block, which every pass computes. When the loop asks for the
current blocks only (samplers that read eligible positions only), a ``"prefix"`` pass runs
the output layer on the block alone, where the model lets it
(:meth:`~unmask.models.hf.HFMaskedModel.output_layer_on`), and no logits are kept between
passes (each pass computes the row's block, the only positions read): the cache holds the
keys and values alone, not a (B, N, V) array of logits.

Only code whose forward takes ``past_key_values`` (and, for ``"dual"``, ``replace_position``)
as Fast-dLLM's LLaDA code does, with unshifted logits, can be cached.
"""

from __future__ import annotations

import contextlib
import inspect

import torch

from unmask.errors import UnmaskError
from unmask.models.base import ModelOutput
from unmask.models.handle import inference_mode
from unmask.models.hf_compat import key_mask_inputs

#: the cache modes (:class:`~unmask.decode.DecodeConfig` ``cache_kv``)
CACHE_MODES = ("prefix", "dual")


def block_span(first: int, last: int, block: int, lead: int) -> tuple[int, int]:
    """(lo, hi): the positions of blocks ``first`` .. ``last`` of length ``block``, counted
    back from the row's end (the first block lacks ``lead`` positions, so block k spans
    [k * block - lead, (k + 1) * block - lead), clipped at 0)."""
    return max(first * block - lead, 0), (last + 1) * block - lead


def _takes(fn, name: str) -> bool:
    return name in inspect.signature(fn).parameters


def check_cacheable(model, mode: str) -> None:
    """:class:`UnmaskError` naming why ``model`` cannot run with the ``mode`` cache."""
    hf = getattr(model, "hf", None)
    what = f"cache_kv: {mode!r} needs a model folder whose code takes "
    if hf is None or not _takes(hf.forward, "past_key_values"):
        raise UnmaskError(what + "past_key_values (e.g. LLaDA's, as Fast-dLLM ships it)")
    if mode == "dual" and not _takes(hf.forward, "replace_position"):
        raise UnmaskError(what + "replace_position (Fast-dLLM's LLaDA code)")
    if getattr(model, "shift_logits", False):
        raise UnmaskError(f"cache_kv: {mode!r} is not supported for models with shifted "
                          "logits (Dream)")


class BlockKVCache:
    """Per-row keys/values of the block each row is in, and that pass's outputs.

    Args:
        model: a :class:`~unmask.models.hf.HFMaskedModel` accepted by :func:`check_cacheable`.
        mode: ``"prefix"`` or ``"dual"``.
        batch_size, seq_len: the decode batch (B, N).
        block: the loop's block length; lead: the positions its first block lacks
            (:func:`block_span`).
    """

    def __init__(self, model, mode: str, batch_size: int, seq_len: int, block: int,
                 lead: int = 0):
        check_cacheable(model, mode)
        self.model, self.mode, self.block, self.lead = model, mode, block, lead
        self.block_of = torch.full((batch_size,), -1, dtype=torch.long, device=model.device)
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        #: (B, N, V) and (B, N, D) of each row's block-first pass (kept where the loop reads
        #: positions outside the rows' blocks only)
        self.logits: torch.Tensor | None = None
        self.hidden: torch.Tensor | None = None
        #: the last computed groups (:meth:`_groups`), their epoch, and whether they hold
        #: no rows entering a block (then they stand for the rest of the epoch)
        self._last_groups: list = []
        self._epoch: int | None = None
        self._groups_stand = False
        #: dual: the positions a block's pass replaces, by (lo, hi, n)
        self._replace: dict[tuple[int, int, int], torch.Tensor] = {}

    def __call__(self, handle, x: torch.Tensor, rows: torch.Tensor, blocks: torch.Tensor,
                 cols: slice | None = None, keep_outputs: bool = True,
                 epoch: int | None = None) -> ModelOutput:
        """The loop's pass on ``x`` (R, N) for original ``rows`` (R,) in ``blocks`` (R,):
        whole rows where a row entered a block, else cached windows; the output holds the
        positions ``cols`` (default: all; they must hold every row's block). Counts one call
        and one sequence per row on ``handle``.

        ``keep_outputs``: positions a row's window does not compute hold the outputs of the
        row's block-first pass (kept for every row, (B, N, V)); False (the loop reads each
        row's block only): they hold zeros and nothing but the keys and values is kept.
        ``epoch``: calls of one epoch have the same ``rows`` and ``blocks`` (the caller's
        word; None: no two calls do), so they are run in the same groups (a row's padding
        never changes: only real tokens are written) once no row is entering its block."""
        cols = slice(0, x.shape[1]) if cols is None else cols
        parts = []  # (indices into rows, first column, logits, hidden)
        block_only = cols.stop - cols.start < x.shape[1]  # logits of the block alone
        if epoch is None or epoch != self._epoch or not self._groups_stand:
            self._last_groups = self._groups(x, rows, blocks)
            # after this call every row is in its block: the next call of the epoch
            # runs the same groups, none entering
            self._groups_stand = all(block >= 0 for block, _, _ in self._last_groups)
            self._epoch = epoch
        with inference_mode():
            for block, padded, sub in self._last_groups:
                whole = sub.shape[0] == rows.shape[0]  # one group: every row, in order
                xs, rs = (x, rows) if whole else (x[sub], rows[sub])
                if block < 0:  # rows entering a block: whole rows, keys and values kept
                    logits, hidden = self._refresh(xs, rs, cols, keep_outputs, padded)
                    parts.append((sub, 0, logits, hidden))
                    self.block_of[rs] = blocks if whole else blocks[sub]
                else:
                    lo, window_logits, window_hidden = self._window(xs, rs, block, block_only,
                                                                    padded)
                    parts.append((sub, lo - cols.start, window_logits, window_hidden))
            logits, hidden = self._outputs(rows, cols, parts, keep_outputs)
        handle.count(rows, distinct=True)
        return ModelOutput(logits=logits, hidden=hidden)

    def _groups(self, x: torch.Tensor, rows: torch.Tensor, blocks: torch.Tensor):
        """[(block, padded, indices into rows)]: the rows of one model call each, read with
        one host read: rows entering a block (block -1) and rows of each block, split by
        whether the row holds padding (rows without get no attention mask, as alone)."""
        fresh = self.block_of[rows] != blocks
        pad = self.model.pad_id
        padded = ((x == pad).any(1) if pad is not None
                  else torch.zeros_like(fresh)).long()
        key = torch.where(fresh, -1, blocks) * 2 + padded
        return [(k // 2, bool(k % 2), (key == k).nonzero().squeeze(1))
                for k in torch.unique(key).tolist()]

    def _outputs(self, rows: torch.Tensor, cols: slice, parts: list, keep_outputs: bool):
        """(logits (R, W, V), hidden (R, W, D)) at ``cols`` from the computed ``parts``, over
        the kept outputs (``keep_outputs``) or zeros."""
        width = cols.stop - cols.start
        if len(parts) == 1:
            idx, at, part_logits, part_hidden = parts[0]
            if (len(idx) == len(rows) and at == 0 and part_logits.shape[1] == width
                    and part_hidden.shape[1] >= width):
                # one call computed every row at ``cols`` (a prefix window's hidden states
                # run on past them)
                return part_logits, part_hidden[:, :width]
        if keep_outputs:
            logits, hidden = self.logits[rows, cols], self.hidden[rows, cols]  # copies
        else:
            _, _, some_logits, some_hidden = parts[0]
            logits = some_logits.new_zeros(len(rows), width, some_logits.shape[-1])
            hidden = some_hidden.new_zeros(len(rows), width, some_hidden.shape[-1])
        for idx, at, part_logits, part_hidden in parts:
            w = min(part_logits.shape[1], width - at)
            logits[idx, at:at + w] = part_logits[:, :w]
            hidden[idx, at:at + w] = part_hidden[:, :w]
        return logits, hidden

    def _run(self, x: torch.Tensor, window: torch.Tensor, padded: bool, **kwargs):
        """The model on ``window`` of the rows ``x``; ``padded``: some hold padding, left
        out of attention (the mask covers whole rows: every key)."""
        mask = key_mask_inputs(self.model.hf, x != self.model.pad_id) if padded else {}
        out = self.model.hf(input_ids=window, use_cache=True, output_hidden_states=True,
                            **mask, **kwargs)
        layer = self.model.hidden_layer
        return out, out.logits.float(), out.hidden_states[layer].float()

    def _refresh(self, x: torch.Tensor, rows: torch.Tensor, cols: slice, keep_outputs: bool,
                 padded: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """Run whole ``rows``; keep their keys/values (and, ``keep_outputs``, their logits and
        hidden states at ``cols``); return those logits (R, W, V) and hidden states (the
        output layer runs at ``cols`` only where the model lets it)."""
        n = x.shape[1]
        with (self.model.output_layer_on(cols.start, cols.stop, n)
              if cols.stop - cols.start < n else contextlib.nullcontext()):
            out, logits, hidden = self._run(x, x, padded)
        logits = logits[:, cols] if logits.shape[1] == n else logits
        hidden = hidden[:, cols]
        b = self.block_of.shape[0]
        if not self.keys:
            self.keys = [k.new_zeros(b, *k.shape[1:]) for k, _ in out.past_key_values]
            self.values = [v.new_zeros(b, *v.shape[1:]) for _, v in out.past_key_values]
        if keep_outputs:
            if self.logits is None:
                self.logits = logits.new_zeros(b, n, logits.shape[-1])
                self.hidden = hidden.new_zeros(b, n, hidden.shape[-1])
            self.logits[rows, cols], self.hidden[rows, cols] = logits, hidden
        for layer, (k, v) in enumerate(out.past_key_values):
            self.keys[layer][rows], self.values[layer][rows] = k, v
        return logits, hidden

    def _window(self, x: torch.Tensor, rows: torch.Tensor, block: int, block_only: bool,
                padded: bool):
        """(first position, logits, hidden) of the positions the model runs on (``block_only``:
        the logits of the block's positions only, where the model can)."""
        lo, hi = block_span(block, block, self.block, self.lead)
        # rows are distinct: as many as the cache holds is all of them, in order, and the
        # stored tensors serve as they are (the dual pass overwrites only the block's keys and
        # values, which each pass computes anew)
        every = len(rows) == len(self.block_of)
        if self.mode == "prefix":
            past = [(k[:, :, :lo], v[:, :, :lo]) if every else (k[rows, :, :lo], v[rows, :, :lo])
                    for k, v in zip(self.keys, self.values, strict=True)]
            n = x.shape[1] - lo
            with (self.model.output_layer_on(0, hi - lo, n) if block_only
                  else contextlib.nullcontext()):
                _, logits, hidden = self._run(x, x[:, lo:], padded, past_key_values=past)
            return lo, logits, hidden
        past = [(k, v) if every else (k[rows], v[rows])
                for k, v in zip(self.keys, self.values, strict=True)]
        replace = self._replace.get((lo, hi, x.shape[1]))
        if replace is None:  # one row: the code replaces the same positions in all rows
            replace = torch.zeros(1, x.shape[1], dtype=torch.bool, device=x.device)
            replace[:, lo:hi] = True
            self._replace[lo, hi, x.shape[1]] = replace
        _, logits, hidden = self._run(x, x[:, lo:hi], padded, past_key_values=past,
                                      replace_position=replace)
        return lo, logits, hidden
