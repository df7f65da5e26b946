"""Hostile input over the API's fields (hypothesis): whatever a body holds, the server answers
with a status it documents (200, or 400 / 404 / 413 with OpenAI's error body), never a 500
or a dropped connection, and keeps serving."""

import json

import pytest
from conftest import Running, get, post
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unmask.serve.options import ServeOptions

ANSWERED = {200, 400, 404, 413}
SEEN: dict[int, int] = {}

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70),
    st.sampled_from([0, 1, 2, 4, 8, -1, 2**62, 2**63, 640, 10**6]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40), st.sampled_from(["text", "confidence", "eb:gamma=0.1", "<mask:3>",
                                           "MKV<mask:2>", "low_confidence", "topk:k=2+verify",
                                           "mi-guided:estimator=/", "pc:frequencies=/etc/x",
                                           "uniform:k=0", "eb:gamma=nan", "", "\x00", "a" * 300]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=8)
FIELDS = ["model", "prompt", "messages", "template", "max_tokens", "max_completion_tokens",
          "temperature", "seed", "stop", "n", "stream", "stream_options", "sampler", "preset",
          "block_length", "steps", "min_new_tokens", "confidence", "top_p", "logprobs",
          "echo", "best_of", "suffix", "logit_bias", "user", "trust_remote_code", "device"]
BASES = {
    "/v1/completions": {"model": "text", "prompt": "What is 1 + 1?", "max_tokens": 4},
    "/v1/chat/completions": {"model": "text", "max_tokens": 4,
                             "messages": [{"role": "user", "content": "hi"}]},
    "/v1/infill": {"model": "text", "template": "a <mask:2> b"},
}


@pytest.fixture(scope="module")
def small_server():
    """Small limits, so that a valid random request decodes fast."""
    from conftest import CHAT_TEMPLATE

    with Running(ServeOptions(model="text", chat_template=CHAT_TEMPLATE, max_tokens=8,
                              max_n=2, max_batch=4, batch_wait_ms=0, threads=1,
                              max_body_bytes=64 * 1024)) as s:
        yield s


def _check(server, path: str, body) -> None:
    status, out, raw = post(server.port, path, body)
    assert status in ANSWERED, (status, raw[:500])
    if status != 200:
        assert isinstance(out, dict) and isinstance(out["error"]["message"], str), raw[:300]
        assert "Traceback" not in raw
    elif out is None:  # an event stream
        assert raw.rstrip().endswith("data: [DONE]"), raw[-200:]
    SEEN[status] = SEEN.get(status, 0) + 1


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(path=st.sampled_from(sorted(BASES)),
       changes=st.dictionaries(st.sampled_from(FIELDS), VALUES, max_size=4),
       drop=st.sets(st.sampled_from(FIELDS), max_size=2))
def test_any_field_values_get_a_documented_answer(small_server, path, changes, drop):
    body = {k: v for k, v in {**BASES[path], **changes}.items() if k not in drop}
    _check(small_server, path, body)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(path=st.sampled_from(sorted(BASES)), raw=st.binary(max_size=200)
       | st.text(max_size=200).map(str.encode))
def test_any_bytes_get_a_documented_answer(small_server, path, raw):
    _check(small_server, path, raw)


def test_it_still_serves_after_the_hostile_bodies(small_server):
    assert SEEN.get(200, 0) and SEEN.get(400, 0)  # the bodies reached decoding and refusal
    assert get(small_server.port, "/health")[0] == 200
    status, out, _ = post(small_server.port, "/v1/completions", BASES["/v1/completions"])
    assert status == 200 and out["choices"][0]["finish_reason"] in ("stop", "length")
    assert json.dumps(out)
