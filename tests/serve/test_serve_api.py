"""`unmask serve` through the real `openai` client: completions, chat, streaming, n, seed,
stop, unmask's extra body fields, infill, models and health; every answer against
`unmask.generate` / `unmask.infill` run alone with the same seed."""

import http.client
import json

import openai
import pytest
from serve_helpers import get, post

from unmask.generate import generate
from unmask.infill import infill


def alone(server, prompt, seed, **kw):
    """`generate` of one prompt alone, as the server decodes it (prompt slots in whole
    blocks)."""
    block = kw.get("block_length") or kw.get("gen_length", 128)
    (g,) = generate(server.served.model, None, prompt, seed=seed, pad_to_multiple_of=block,
                    **kw)
    return g


def test_models_and_health(text_server):
    client = text_server.client()
    (card,) = client.models.list().data
    assert card.id == "text" and card.owned_by == "unmask"
    status, health = get(text_server.port, "/health")
    assert status == 200 and health["status"] == "ok" and health["model"] == "text"
    assert health["rows_held"] == 0 and health["decode_calls"] == len(text_server.batcher.calls)


def test_completion_equals_generate_with_its_seed(text_server):
    client = text_server.client()
    r = client.completions.create(model="text", prompt="What is 3 + 4?", max_tokens=8, seed=11)
    g = alone(text_server, "What is 3 + 4?", 11, gen_length=8)
    (choice,) = r.choices
    assert choice.text == g.text and choice.index == 0
    stats = choice.model_extra["unmask"]
    assert stats == {"passes": g.nfe, "sequences": g.sequences,
                     "tokens_per_pass": round(g.tokens_per_forward, 4),
                     "cumulative_entropy": round(g.cumulative_entropy, 4), "seed": 11}
    eos = g.token_ids.index(5) if 5 in g.token_ids else None
    assert choice.finish_reason == ("length" if eos is None else "stop")
    prompt_ids = text_server.served.encode("What is 3 + 4?")
    assert r.usage.prompt_tokens == len(prompt_ids)
    assert r.usage.completion_tokens == (8 if eos is None else eos)
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_n_choices_and_extra_body_fields(text_server):
    client = text_server.client()
    extra = {"sampler": "eb:gamma=0.1", "block_length": 4, "min_new_tokens": 6}
    r = client.completions.create(model="text", prompt="Sum 1 2 3", max_tokens=16, n=3,
                                  seed=7, temperature=0.8, extra_body=extra)
    want = generate(text_server.served.model, None, ["Sum 1 2 3"] * 3, sampler="eb:gamma=0.1",
                    gen_length=16, block_length=4, min_new_tokens=6, temperature=0.8, seed=7,
                    pad_to_multiple_of=4)
    assert [c.text for c in r.choices] == [g.text for g in want]
    assert [c.model_extra["unmask"]["passes"] for c in r.choices] == [g.nfe for g in want]
    assert [c.model_extra["unmask"]["seed"] for c in r.choices] == [7, 8, 9]
    assert all(len(c.text) >= 6 for c in r.choices)  # min_new_tokens: no EOS before 6


def test_several_prompts_each_decode_as_alone(text_server):
    client = text_server.client()
    prompts = ["1 + 1 =", "What is the sum of 12 and 30? Answer with a number."]
    r = client.completions.create(model="text", prompt=prompts, max_tokens=8, n=2, seed=3,
                                  temperature=1.0, extra_body={"block_length": 4})
    texts = [c.text for c in r.choices]
    want = [alone(text_server, p, 3 + i, gen_length=8, block_length=4, temperature=1.0).text
            for i, p in enumerate([prompts[0], prompts[0], prompts[1], prompts[1]])]
    assert texts == want


def test_stop_strings_cut_the_text(text_server):
    client = text_server.client()
    kw = dict(gen_length=16, min_new_tokens=16, block_length=4)
    full = alone(text_server, "Count: 1 2 3", 5, **kw).text
    assert len(full) >= 6
    stop = full[3:5]
    r = client.completions.create(model="text", prompt="Count: 1 2 3", max_tokens=16, seed=5,
                                  stop=[stop, "zzzz"],
                                  extra_body={"min_new_tokens": 16, "block_length": 4})
    (c,) = r.choices
    assert c.text == full[:full.find(stop)] and c.finish_reason == "stop"
    r = client.completions.create(model="text", prompt="Count: 1 2 3", max_tokens=16, seed=5,
                                  stop="zzzz", extra_body={"min_new_tokens": 16,
                                                           "block_length": 4})
    assert r.choices[0].text == full and r.choices[0].finish_reason == "length"


def test_stream_sends_one_chunk_per_committed_block(text_server):
    client = text_server.client()
    extra = {"min_new_tokens": 16, "block_length": 4}
    full = alone(text_server, "Count: 1 2 3", 2, gen_length=16, min_new_tokens=16,
                 block_length=4)
    chunks = list(client.completions.create(model="text", prompt="Count: 1 2 3", max_tokens=16,
                                            seed=2, stream=True, extra_body=extra,
                                            stream_options={"include_usage": True}))
    texts = [c.choices[0].text for c in chunks if c.choices and c.choices[0].text]
    assert "".join(texts) == full.text
    ids = full.token_ids
    blocks = [text_server.served.tokenizer.decode(ids[i:i + 4], skip_special_tokens=True)
              for i in range(0, 16, 4)]
    assert texts == [b for b in blocks if b]  # a chunk per block, in order
    finish = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finish) == 1 and finish[0].choices[0].finish_reason == "length"
    assert finish[0].choices[0].model_extra["unmask"]["passes"] == full.nfe
    assert chunks[-1].usage.completion_tokens == 16 and not chunks[-1].choices


def test_stream_ends_with_done_and_holds_back_stop_prefixes(text_server):
    full = alone(text_server, "Count: 1 2 3", 4, gen_length=16, min_new_tokens=16,
                 block_length=4).text
    stop = full[3:6]
    body = {"model": "text", "prompt": "Count: 1 2 3", "max_tokens": 16, "seed": 4,
            "stream": True, "stop": stop, "min_new_tokens": 16, "block_length": 4}
    status, _, raw = post(text_server.port, "/v1/completions", body)
    assert status == 200
    events = [e[len("data: "):] for e in raw.split("\n\n") if e]
    assert events[-1] == "[DONE]"
    sent = "".join(json.loads(e)["choices"][0]["text"] for e in events[:-1])
    assert sent == full[:full.find(stop)]


def test_chat_uses_the_chat_template(text_server, llada_server):
    for server, prompt in ((text_server, "What is 2 + 2?"), (llada_server, "the cat sat")):
        client = server.client()
        r = client.chat.completions.create(model=server.served.name, max_tokens=8, seed=1,
                                           messages=[{"role": "user", "content": prompt}])
        g = alone(server, prompt, 1, gen_length=8, chat_template=True)
        assert r.choices[0].message.content == g.text
        assert r.choices[0].message.role == "assistant" and r.object == "chat.completion"
        assert r.usage.prompt_tokens == len(server.served.encode(
            messages=[{"role": "user", "content": prompt}]))


def test_chat_stream_and_several_turns(llada_server):
    client = llada_server.client()
    messages = [{"role": "system", "content": "the dog"},
                {"role": "user", "content": "a cat ran"}]
    whole = client.chat.completions.create(model="llada", messages=messages, max_tokens=16,
                                           seed=9, temperature=1.0,
                                           extra_body={"block_length": 4})
    chunks = list(client.chat.completions.create(model="llada", messages=messages,
                                                 max_tokens=16, seed=9, temperature=1.0,
                                                 stream=True, extra_body={"block_length": 4}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    ids = llada_server.served.encode(messages=messages)
    assert ids[:1] != [] and whole.usage.prompt_tokens == len(ids)


def test_completion_on_a_tiny_llada_folder_equals_generate(llada_server):
    client = llada_server.client()
    for spec in ("low_confidence", "margin", "eb:gamma=0.5"):
        r = client.completions.create(model="llada", prompt="the cat sat on", max_tokens=8,
                                      seed=2, extra_body={"sampler": spec, "block_length": 4})
        g = alone(llada_server, "the cat sat on", 2, gen_length=8, block_length=4,
                  sampler=spec)
        assert r.choices[0].text == g.text
        assert r.choices[0].model_extra["unmask"]["passes"] == g.nfe


def test_infill_on_the_protein_model_equals_infill(protein_server):
    templates = ["MKV<mask:6>LLAG", "<mask:3>GGLVQPGG<mask>"]
    body = {"model": "protein", "template": templates, "seed": 4, "sampler": "topk:k=2",
            "temperature": 0.5}
    status, out, _ = post(protein_server.port, "/v1/infill", body)
    assert status == 200, out
    for i, t in enumerate(templates):
        (g,) = infill(protein_server.served.model, t, sampler="topk:k=2", temperature=0.5,
                      seed=4 + i)
        c = out["choices"][i]
        assert c["text"] == g.text and c["template"] == t
        assert c["unmask"]["passes"] == g.nfe and len(c["text"]) == len(t.replace(
            "<mask:6>", "x" * 6).replace("<mask:3>", "xxx").replace("<mask>", "x"))
    assert out["usage"]["completion_tokens"] == 6 + 4
    client = protein_server.client()
    with pytest.raises(openai.BadRequestError, match="no tokenizer"):
        client.completions.create(model="protein", prompt="MKV", max_tokens=4)


def test_infill_refuses_bad_templates(protein_server, text_server):
    for template, needle in (("MKV", "holds no <mask>"), ("MK<mask:0>", "integer >= 1"),
                             ("mkv<mask>", "is not one of the 20 standard amino acids")):
        status, out, _ = post(protein_server.port, "/v1/infill",
                              {"model": "protein", "template": template})
        assert status == 400 and needle in out["error"]["message"]
    status, out, _ = post(text_server.port, "/v1/infill",
                          {"model": "text", "template": "The <mask:3> sat."})
    assert status == 200 and out["choices"][0]["text"]


def test_refusals_are_openai_errors(text_server):
    client = text_server.client()
    cases = [
        (dict(max_tokens=0), "max_tokens"), (dict(max_tokens=65), "max_tokens"),
        (dict(extra_body={"sampler": "no-such"}), "unknown name"),
        (dict(extra_body={"sampler": "eb:gamma=oops"}), "gamma"),
        (dict(extra_body={"sampler": "mi-guided:estimator=/etc"}), "cannot set estimator"),
        (dict(extra_body={"block_length": 3}), "does not divide"),
        (dict(extra_body={"steps": 3, "sampler": "eb"}), "steps"),
        (dict(temperature=-1), "temperature"), (dict(n=0), "n"),
        (dict(seed=-1), "seed"), (dict(top_p=0.5), "top_p"),
        (dict(extra_body={"trust_remote_code": True}), "unrecognized"),
        (dict(prompt="x" * 700), "max_length"),
    ]
    for kw, needle in cases:
        args = {"model": "text", "prompt": "hello", "max_tokens": 8, **kw}
        with pytest.raises(openai.BadRequestError) as e:
            client.completions.create(**args)
        assert e.value.status_code == 400 and needle in e.value.message, (kw, e.value.message)
        assert e.value.body["type"] == "invalid_request_error"
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="/etc/other-model", prompt="hi", max_tokens=4)
    for raw in (b"{not json", b"[1, 2]", b'{"model": "text", "prompt": 5}', b"\xff\xfe",
                b'{"model": "text", "prompt": "a", "max_tokens": "8"}',
                b'{"model": "text", "prompt": "a", "max_tokens": true}',
                b'{"model": "text", "prompt": "a", "temperature": NaN}'):
        status, out, _ = post(text_server.port, "/v1/completions", raw)
        assert status == 400 and out["error"]["type"] == "invalid_request_error", raw


def test_body_size_and_row_bounds(text_server):
    big = b'{"model": "text", "prompt": "' + b"a" * (2 << 20) + b'"}'
    status, out, _ = post(text_server.port, "/v1/completions", big)
    assert status == 413 and out["error"]["code"] == "request_too_large"
    status, out, _ = post(text_server.port, "/v1/completions",
                          {"model": "text", "prompt": ["a"] * 4, "n": 5, "max_tokens": 4})
    assert status == 400 and "limit" in out["error"]["message"]


def test_a_client_that_leaves_mid_stream_frees_its_rows(text_server):
    body = {"model": "text", "prompt": "Count: 1 2 3", "max_tokens": 64, "block_length": 4,
            "min_new_tokens": 64, "stream": True, "seed": 1}
    full = alone(text_server, "Count: 1 2 3", 1, gen_length=64, block_length=4,
                 min_new_tokens=64)
    conn = http.client.HTTPConnection("127.0.0.1", text_server.port, timeout=60)
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type":
                                                                "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    first = resp.read(6)
    assert first.startswith(b"data: ")
    conn.sock.close()
    conn.close()
    import time

    deadline = time.monotonic() + 60
    while get(text_server.port, "/health")[1]["rows_held"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert get(text_server.port, "/health")[1]["rows_held"] == 0
    call = text_server.batcher.calls[-1]
    assert call["rows"] == 1 and call["passes"] < full.nfe  # left early
