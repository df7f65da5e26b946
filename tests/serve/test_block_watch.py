"""The server's streaming hook (BlockWatch): what it reports, and what it costs the loop."""

import torch

from unmask import DecodeConfig, decode
from unmask.host_reads import count_host_reads
from unmask.models.toy import FixedOutputModel
from unmask.serve.decoding import BlockWatch

BLOCK = 8


def test_it_reports_each_committed_block_once_in_order_for_one_read_a_pass():
    model = FixedOutputModel(n=32, v=9, seed=3)
    x = torch.full((3, model.n), model.mask_id)
    config = DecodeConfig(block_size=BLOCK)
    with count_host_reads() as alone:
        want = decode(model, x, "confidence", config, seed=1)
    got = []
    watch = BlockWatch([0, 2], 0, BLOCK, lambda row, ids: got.append((row, ids)))
    with count_host_reads() as reads:
        res = decode(model, x, "confidence", config, seed=1, hooks=(watch,))
    assert torch.equal(res.tokens, want.tokens)
    # a block is reported at the pass after it fills: every block but each row's last
    for row in (0, 2):
        sent = [ids for r, ids in got if r == row]
        assert sent == [res.tokens[row, :BLOCK * k].tolist() for k in range(1, 4)]
    # one more read at each pass after one where a watched row filled a block
    growth_passes = len({int(res.reveal_step[r, BLOCK * k:BLOCK * (k + 1)].max())
                         for r in (0, 2) for k in range(3)})
    assert reads.total == alone.total + int(res.steps.max()) + growth_passes
