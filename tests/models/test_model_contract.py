"""The model contract the loop and samplers rely on: declared attributes with defaults, and
the real-token mask built once and handed to samplers on the step state."""

from dataclasses import dataclass

import torch

from unmask import ExactJointMDM, decode
from unmask.samplers.base import Sampler, Selection


def test_every_model_declares_the_contract_attributes():
    toy = ExactJointMDM(n=4, v=3, seed=0)
    assert (toy.task, toy.tokenizer, toy.pad_id, toy.eos_ids, toy.autocast_bf16) == (
        None, None, None, (), False)


def test_the_real_token_mask_is_built_once_per_vocabulary():
    toy = ExactJointMDM(n=4, v=3, seed=0)
    mask = toy.real_token_mask
    assert mask.tolist() == [True, True, True, False]  # MASK is id 3
    assert toy.real_token_mask is mask
    toy.real_token_ids = (0, 2)
    assert toy.real_token_mask.tolist() == [True, False, True, False]


@dataclass
class _Recorder(Sampler):
    """Reveals the first eligible position; keeps every state's real_mask."""

    def begin(self, batch_size, seq_len):
        self.seen = []

    def select(self, state):
        self.seen.append(state.real_mask)
        first = state.eligible.long().argmax(1)
        return Selection(torch.nn.functional.one_hot(first, state.eligible.shape[1]).bool()
                         & state.eligible)


def test_samplers_read_the_real_token_mask_from_the_step_state():
    toy = ExactJointMDM(n=4, v=3, seed=0)
    sampler = _Recorder()
    x = torch.full((3, 4), toy.mask_id)
    x[1, 0] = 0  # rows finish at different passes: sub-states of fewer rows
    decode(toy, x, sampler)
    assert len(sampler.seen) == 4
    assert all(m is sampler.seen[0] for m in sampler.seen)  # one tensor for the decode
    assert torch.equal(sampler.seen[0], toy.real_token_mask)
