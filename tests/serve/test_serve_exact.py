"""A request's answer does not depend on what it is batched with: alone, among 8 concurrent
requests of other prompt lengths, samplers and lengths, each equals `unmask.generate` of its
prompt alone with its seed (text and pass count); and the rows of a cancelled request leave
the decode without changing the others'."""

from concurrent.futures import ThreadPoolExecutor

import torch
from serve_helpers import post

from unmask.decode import DecodeConfig, decode
from unmask.generate import generate, parse_sampler, prompt_batch
from unmask.serve.decoding import CancelRows

#: (prompt, max_tokens, unmask fields, temperature, seed): the first four share settings and
#: row width (prompts of 13 to 16 ids in 16 slots) and differ in length; the others differ
REQUESTS = [
    ("What is 3 + 4?", 16, {"block_length": 4}, 0.7, 5),
    ("What is 12+4?", 16, {"block_length": 4}, 0.7, 6),
    ("Sum 10 20 30", 16, {"block_length": 4}, 0.7, 7),
    ("What is 9+1", 16, {"block_length": 4}, 0.7, 8),
    ("What is 3 + 4?", 16, {"block_length": 4, "sampler": "eb:gamma=0.1"}, 0.7, 5),
    ("Count to five: 1 2 3", 8, {"sampler": "margin"}, 0.0, 1),
    ("hi", 16, {"block_length": 8, "sampler": "threshold:tau=0.5"}, 1.0, 2),
    ("What is 3 + 4?", 12, {"block_length": 4, "sampler": "topk:k=2"}, 0.7, 5),
]


def _ask(client, req):
    prompt, max_tokens, extra, temperature, seed = req
    r = client.completions.create(model="text", prompt=prompt, max_tokens=max_tokens,
                                  temperature=temperature, seed=seed, extra_body=extra)
    return r.choices[0].text, r.choices[0].model_extra["unmask"]["passes"]


def _alone(model, req, pad_to=None):
    """`generate` of the request's prompt alone, its slots rounded up to a multiple of
    ``pad_to`` (default: the block, as the server's default)."""
    prompt, max_tokens, extra, temperature, seed = req
    block = extra.get("block_length")
    (g,) = generate(model, None, prompt, gen_length=max_tokens, temperature=temperature,
                    seed=seed, sampler=extra.get("sampler", "confidence"), block_length=block,
                    pad_to_multiple_of=pad_to or block or max_tokens)
    return g.text, g.nfe


def test_alone_and_in_a_batch_of_8_equal_generate(text_server):
    model = text_server.served.model
    want = [_alone(model, req) for req in REQUESTS]
    client = text_server.client()
    assert _ask(client, REQUESTS[0]) == want[0]  # alone
    calls = text_server.batcher.totals["decode_calls"]
    with ThreadPoolExecutor(len(REQUESTS)) as pool:
        got = list(pool.map(lambda req: _ask(client, req), REQUESTS))
    assert got == want
    made = text_server.batcher.totals["decode_calls"] - calls  # (the log keeps the last 256)
    new = list(text_server.batcher.calls)[-made:]
    assert max(c["jobs"] for c in new) >= 3, new  # rows of different prompt lengths shared a call
    assert len(new) < len(REQUESTS)


def test_cancelled_rows_leave_and_the_others_decode_as_alone(text_server):
    model = text_server.served.model
    ids = [text_server.served.encode(p) for p in ("What is 3 + 4?", "What is 12+4?")]
    x, ends = prompt_batch(model, ids, 4, 16, min_new_tokens=16, pad_to_multiple_of=4)
    config = DecodeConfig(temperature=0.7, block_size=4)
    seeds = torch.tensor([3, 9])
    sampler = ends.sampler(CancelRows(parse_sampler("confidence"),
                                      lambda: [0]))
    res = decode(model, x, sampler, config, seed=seeds, hooks=ends.hooks())
    (alone,) = generate(model, None, "What is 12+4?", gen_length=16, block_length=4,
                        min_new_tokens=16, temperature=0.7, seed=9, pad_to_multiple_of=4)
    assert res.tokens[1, -16:].tolist() == alone.token_ids and int(res.nfe[1]) == alone.nfe
    assert int(res.nfe[0]) == 4  # one pass per block, then it left


def test_batch_invariant_server_answers_as_alone():
    from serve_helpers import Running

    from unmask.serve.options import ServeOptions

    with Running(ServeOptions(model="text", batch_invariant=True, batch_wait_ms=200,
                              threads=1)) as server:
        client = server.client()
        with ThreadPoolExecutor(4) as pool:
            got = list(pool.map(lambda req: _ask(client, req), REQUESTS[:4]))
        assert max(c["jobs"] for c in server.batcher.calls) >= 2
    assert got == [_alone(server.served.model, req) for req in REQUESTS[:4]]


def test_a_server_without_prompt_padding_answers_as_plain_generate():
    """``pad_to_multiple_of=1``: a row is its prompt then the masks, as plain `generate` lays
    it out (sampled: the story, 17 ids, draws other tokens in 20 slots); only prompts of one
    length share a call."""
    from serve_helpers import Running

    from unmask.serve.options import ServeOptions

    requests = [*REQUESTS[:4], ("Tell me a story", 16, {"block_length": 4}, 1.5, 3)]
    with Running(ServeOptions(model="text", pad_to_multiple_of=1, batch_wait_ms=200,
                              threads=1)) as server:
        client = server.client()
        with ThreadPoolExecutor(len(requests)) as pool:
            got = list(pool.map(lambda req: _ask(client, req), requests))
        model = server.served.model
        lengths = {len(server.served.encode(req[0])) for req in requests}
        assert len(server.batcher.calls) >= len(lengths) >= 2
    assert got == [_alone(model, req, pad_to=1) for req in requests]
    assert got[-1] != _alone(model, requests[-1])  # in whole blocks: another text


def test_the_answer_records_its_request_and_the_request_reproduces_it(text_server):
    """The body is read into one DecodeRequest; the answer carries it, and `generate` given
    that request alone gives the answer's text and passes; the CLI's flags for the same
    settings build the same request (with the padding the server adds: the block)."""
    from unmask.commands.flags.request import request_from_args
    from unmask.commands.flags.sampler import sampler_text
    from unmask.request import DecodeRequest

    body = {"model": "text", "prompt": "What is 3 + 4?", "max_tokens": 16, "temperature": 0.7,
            "seed": 11, "sampler": "low_confidence", "block_length": 4, "min_new_tokens": 2}
    status, answer, _ = post(text_server.port, "/v1/completions", body)
    assert status == 200, answer
    request = DecodeRequest.from_json(answer["unmask"]["request"])
    assert request.sampler == "confidence" and request.seed == 11
    (g,) = generate(text_server.served.model, None, body["prompt"], request)
    assert (g.text, g.nfe) == (answer["choices"][0]["text"],
                               answer["choices"][0]["unmask"]["passes"])
    from unmask.cli import build_parser

    args = build_parser().parse_args(
        ["generate", "--prompt", "x", "--sampler", "low_confidence", "--gen-length", "16",
         "--temperature", "0.7", "--seed", "11", "--block-length", "4",
         "--min-new-tokens", "2", "--pad-to-multiple-of", "4"])
    assert request_from_args(args, sampler_text(args)) == request
