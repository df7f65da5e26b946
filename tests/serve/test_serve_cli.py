"""`unmask serve` on the command line: its help reads no torch and no web framework, bad
flags are one-line refusals before anything listens, and (slow) the command serves the
`openai` client on a loopback port until interrupted."""

import signal
import socket
import subprocess
import sys
from pathlib import Path

import openai
import pytest

from unmask.cli import main

SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_help_imports_no_torch_nor_fastapi():
    code = ("import sys; from unmask.cli import main; main(['serve', '--help']); "
            "print(sorted(m for m in ('torch', 'fastapi', 'uvicorn', 'ray') if m in "
            "sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": SRC}, check=True).stdout
    assert "--batch-wait-ms" in out and out.strip().endswith("[]")


@pytest.mark.parametrize("argv, needle", [
    (["--model", "/no/such/folder"], "/no/such/folder"),
    (["--replicas", "2"], "--replicas"),
    (["--chat-template", "/no/such/file"], "--chat-template"),
    (["--port", "70000"], "--port"),
    (["--sampler", "no-such-rule"], "unknown name"),
    (["--max-batch", "0"], "--max-batch"),
    (["--pad-to-multiple-of", "0"], "--pad-to-multiple-of"),
    (["--host", "8.8.8.8", "--port", "0"], "cannot listen on 8.8.8.8"),  # no warning first
    (["--max-decode-s", "0"], "--max-decode-s"),
    (["--model", "text", "--cache-kv", "dual", "--port", "0"], "--cache-kv: 'dual'"),
])
def test_bad_flags_are_one_line_refusals(capsys, argv, needle):
    assert main(["serve", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and needle in err[0]


def test_flags_become_the_options():
    from unmask.cli import build_parser
    from unmask.commands.serve import options_from_args

    args = build_parser().parse_args(["serve", "--pad-to-multiple-of", "8", "--max-batch", "4"])
    options = options_from_args(args)
    assert options.pad_to_multiple_of == 8 and options.max_batch == 4
    args = build_parser().parse_args(["serve", "--allow-host", "a.lan", "--allow-host", "b",
                                      "--max-decode-s", "2.5"])
    assert options_from_args(args).allow_hosts == ("a.lan", "b")
    assert options_from_args(args).max_decode_s == 2.5
    default = options_from_args(build_parser().parse_args(["serve"]))
    assert default.pad_to_multiple_of is None  # the request's block


@pytest.mark.slow
def test_the_command_serves_until_interrupted(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "unmask", "serve", "--port", str(port),
                             "--threads", "1", "--max-tokens", "16"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={"PYTHONPATH": SRC, "HF_HUB_OFFLINE": "1"})
    try:
        line = proc.stdout.readline()
        assert f"http://127.0.0.1:{port}/v1" in line, (line, proc.stderr.read()[-2000:])
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused",
                               max_retries=5, timeout=60)
        r = client.completions.create(model="text", prompt="What is 3 + 4?", max_tokens=8,
                                      seed=0)
        assert r.choices[0].model_extra["unmask"]["passes"] >= 1
        with pytest.raises(openai.BadRequestError):
            client.completions.create(model="text", prompt="hi", max_tokens=17)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    assert proc.returncode in (0, 130)
