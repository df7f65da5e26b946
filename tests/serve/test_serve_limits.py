"""What a request may cost and reach on a served model (issue 68): the spec's files and
bounds, the decode budget, the temperature's range, the Host header, and what the server
refuses at start-up instead of on every request."""

import pytest
from serve_helpers import Running, post

from unmask.errors import UnmaskError
from unmask.serve.jobs import ServedModel
from unmask.serve.options import ServeOptions

BASE = {"model": "text", "prompt": "What is 3 + 4?", "max_tokens": 8}


def _refused(server, needle: str, code: str | None = None, **fields) -> str:
    status, out, raw = post(server.port, "/v1/completions", {**BASE, **fields})
    assert status == 400 and "Traceback" not in raw, raw[:300]
    message = out["error"]["message"]
    assert needle in message and "\n" not in message, message
    if code is not None:
        assert out["error"]["code"] == code
    return message


def test_a_request_cannot_name_a_file_nor_learn_whether_one_exists(text_server, tmp_path):
    (tmp_path / "f.json").write_text("[1, 2, 3]")
    seen = {_refused(text_server, "cannot set frequencies", sampler=f"pc:frequencies={p}")
            .replace(str(p), "P") for p in (tmp_path / "f.json", tmp_path / "missing")}
    assert len(seen) == 1
    _refused(text_server, "cannot set estimator", sampler="mi-guided:estimator=/etc")


@pytest.mark.parametrize("sampler, needle", [
    ("info-gain:n_candidates=256,tau_tok=100,tau_pos=100", "the server allows n_candidates"),
    ("info-gain:n_candidates=1000000000000", "out of range"),
    ("topk:k=8+ramp=0.5,min=1000000000000000000000", "out of range"),
    ("mi-oracle", "cannot be requested")])
def test_costs_out_of_bounds_are_refused(text_server, sampler, needle):
    _refused(text_server, needle, sampler=sampler)


@pytest.mark.parametrize("t", [5e-324, 1e-320])
def test_a_subnormal_temperature_is_a_400(text_server, t):
    _refused(text_server, "temperature", temperature=t)


def test_another_host_name_is_refused(text_server):
    status, out, _ = post(text_server.port, "/v1/completions", BASE,
                          headers={"Host": "evil.example"})
    assert status == 400 and out["error"]["code"] == "host_not_allowed"


def test_a_request_past_the_decode_budget_ends_with_an_error_and_frees_its_rows():
    with Running(ServeOptions(model="text", max_tokens=64, batch_wait_ms=0, threads=1,
                              max_decode_s=0.01)) as s:
        message = _refused(s, "decode budget of 0.01 s", "decode_budget_exceeded",
                           max_tokens=64, sampler="confidence")
        assert "cheaper sampler" in message and s.batcher.rows_held == 0


def test_a_request_for_an_estimator_the_server_lacks_is_told_what_it_can_do(llada_server):
    status, out, _ = post(llada_server.port, "/v1/completions",
                          {"model": "llada", "prompt": "hi", "max_tokens": 4,
                           "sampler": "mi-guided"})
    assert status == 400 and "a request cannot name one" in out["error"]["message"]


def test_a_requested_sampler_is_built_and_prepared_once_per_spec(monkeypatch):
    from unmask.request import DecodeRequest
    from unmask.serve.jobs import Decoding

    served = ServedModel.load(ServeOptions(model="text", threads=1))
    built = []
    real = DecodeRequest.build_sampler
    monkeypatch.setattr(DecodeRequest, "build_sampler",
                        lambda self, *a: built.append(self.sampler) or real(self, *a))
    for seed in range(3):
        for spec in ("margin", "eb:gamma=0.10", "dapd"):
            try:
                served.request(Decoding(sampler=spec), seed=seed, gen_length=8)
            except UnmaskError as e:  # the text model (BERT) returns no attention weights
                assert spec == "dapd" and str(e).startswith("dapd: "), e
    assert sorted(built) == ["dapd", "eb:gamma=0.1", "margin"]


def test_what_would_fail_every_request_is_refused_at_start_up():
    with pytest.raises(UnmaskError, match=r"^--cache-kv: 'dual' needs"):
        ServedModel.load(ServeOptions(model="text", cache_kv="dual"))


@pytest.mark.parametrize("field, value", [("echo", 0), ("logprobs", 0), ("best_of", True),
                                          ("echo", 1)])
def test_a_neutral_field_takes_only_its_own_value_not_an_equal_one(text_server, field, value):
    _refused(text_server, f"{field}: only", **{field: value})


def test_text_that_is_not_text_is_refused_at_its_position(text_server):
    _refused(text_server, "prompt: holds a lone surrogate (U+D800) at position 3",
             prompt="abc\ud800")
    _refused(text_server, "prompt 1: holds a NUL", prompt=["ok", "a\x00"])
    status, out, _ = post(text_server.port, "/v1/chat/completions",
                          {"model": "text", "max_tokens": 4,
                           "messages": [{"role": "user", "content": "x\ud800"}]})
    assert status == 400 and "messages[0].content: holds a lone" in out["error"]["message"]


def test_a_chat_too_long_is_refused_naming_the_messages(text_server):
    status, out, _ = post(text_server.port, "/v1/chat/completions",
                          {"model": "text", "max_tokens": 8,
                           "messages": [{"role": "user", "content": "word " * 400}]})
    assert status == 400 and out["error"]["message"].startswith("messages (templated): ")


def test_a_preset_is_the_served_models_own_where_it_has_one(text_server, monkeypatch):
    from unmask.presets import MODEL_PRESETS, Preset
    from unmask.serve.jobs import Decoding

    monkeypatch.setitem(MODEL_PRESETS, "text", {"fast": Preset("topk:k=3", "a test", "")})
    assert text_server.served.sampler(Decoding(preset="fast")) == "topk:k=3"
    assert text_server.served.sampler(Decoding(preset="quality")) == "confidence"


@pytest.mark.parametrize("ref", ["file:///etc/passwd", "/etc/passwd", "http://127.0.0.1:9/s"])
def test_a_schema_cannot_reach_a_file_or_a_url(text_server, ref):
    """A JSON Schema's ``$ref`` resolves inside the schema only: no file, no URL."""
    body = {**BASE, "response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"$ref": ref}}}}
    status, out, raw = post(text_server.port, "/v1/completions", body)
    assert status == 400 and "Traceback" not in raw, raw[:300]


def test_a_slow_build_does_not_stall_the_event_loop(text_server, monkeypatch):
    """While one request's jobs are being built (a cold constraint compile, a long prompt),
    the server still answers: the build runs on its own thread."""
    import threading

    from serve_helpers import get

    entered, release = threading.Event(), threading.Event()
    real = ServedModel.generate_jobs

    def held(self, *args, **kwargs):
        entered.set()
        release.wait(120)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(ServedModel, "generate_jobs", held)
    answer = {}
    slow = threading.Thread(target=lambda: answer.update(
        zip(("status", "out", "raw"), post(text_server.port, "/v1/completions",
                                            {**BASE, "max_tokens": 4}), strict=True)))
    slow.start()
    try:
        assert entered.wait(60)
        # answered while the build waits (a stalled loop would time out)
        status, health = get(text_server.port, "/health", timeout=10)
        assert status == 200 and health["status"] == "ok" and "status" not in answer
    finally:
        release.set()
        slow.join(120)
    assert answer["status"] == 200, answer.get("raw", "")[:300]
