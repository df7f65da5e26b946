"""The server on Ray Serve with 2 replicas (a local Ray cluster on the CPU): 8 concurrent
requests of other lengths and samplers each answer as `unmask.generate` alone with their
seed, and a streamed answer equals the whole one."""

import socket
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest
from test_serve_exact import REQUESTS, _alone, _ask

from unmask.models.auto import load_model
from unmask.serve.options import ServeOptions

pytest.importorskip("ray.serve")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_ray_serve_replicas_answer_as_generate_alone():
    from ray import serve

    from unmask.serve import ray_app

    port = _free_port()
    ray_app.start(ServeOptions(model="text", threads=1, batch_wait_ms=50), "127.0.0.1", port,
                  replicas=2)
    try:
        status = serve.status().applications["unmask"].deployments["unmask"]
        assert status.replica_states == {"RUNNING": 2}
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused",
                               max_retries=0, timeout=300)
        with ThreadPoolExecutor(len(REQUESTS)) as pool:
            got = list(pool.map(lambda req: _ask(client, req), REQUESTS))
        model = load_model("text")
        assert got == [_alone(model, req) for req in REQUESTS]
        prompt, max_tokens, extra, temperature, seed = REQUESTS[0]
        chunks = client.completions.create(model="text", prompt=prompt, max_tokens=max_tokens,
                                           temperature=temperature, seed=seed, stream=True,
                                           extra_body=extra)
        assert "".join(c.choices[0].text for c in chunks if c.choices) == got[0][0]
        from serve_helpers import post

        status, out, _ = post(port, "/v1/completions", {"model": "text", "prompt": "hi"},
                              headers={"Host": "evil.example"})  # the replicas' Host check
        assert status == 400 and out["error"]["code"] == "host_not_allowed"
    finally:
        ray_app.stop()
