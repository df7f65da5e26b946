"""A served request's sampler spec never touches the server's filesystem: over every parameter
of every registered sampler, ``+verify`` and every spec modifier, a value naming a file (an
existing one a sampler could read, a folder, a missing one) is refused or decodes without a
single file opened or stat'ed; the parameters that take a path or an object are refused
before anything is built, and the parameters that scale a pass's work are bounded."""

import os
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import unmask.hooks  # noqa: F401 - registers the modifiers
from unmask.errors import UnmaskError
from unmask.samplers.base import available_samplers
from unmask.samplers.requests import REQUEST_LIMITS, REQUEST_REFUSED, parameter_hints
from unmask.samplers.spec import HOOK_MODIFIERS
from unmask.serve.jobs import request_sampler
from unmask.validation import is_scalar_hint

#: what the file watch saw while it was on: (event, path)
TOUCHED: list = []
_WATCHING = [False]


def _audit(event, args):
    if _WATCHING[0] and event in ("open", "os.listdir", "os.scandir", "os.chdir"):
        TOUCHED.append((event, str(args[0]) if args else ""))


sys.addaudithook(_audit)


@pytest.fixture
def watch(monkeypatch):
    """Record every file opened, listed or stat'ed (``TOUCHED``) while ``_WATCHING``."""
    for name in ("stat", "lstat"):
        real = getattr(os, name)

        def spy(path, *a, _real=real, _name=name, **k):
            if _WATCHING[0]:
                TOUCHED.append((_name, str(path)))
            return _real(path, *a, **k)

        monkeypatch.setattr(os, name, spy)
    TOUCHED.clear()
    yield TOUCHED
    _WATCHING[0] = False


def _owners() -> list[str]:
    return [*(s for s in available_samplers() if s not in REQUEST_REFUSED), "+verify",
            *(f"+{m}" for m in HOOK_MODIFIERS)]


def _spec(owner: str, key: str, value: str) -> str:
    if owner.startswith("+"):
        return f"confidence{owner},{key}={value}"
    return f"{owner}:{key}={value}"


EVERY_PARAMETER = [(o, k) for o in _owners() for k in parameter_hints(o)]


def _ask(spec: str) -> str | None:
    """request_sampler(spec) with the watch on: the spec, or None when refused (one line)."""
    _WATCHING[0] = True
    try:
        return request_sampler(spec)
    except UnmaskError as e:
        assert "\n" not in str(e)
        return None
    finally:
        _WATCHING[0] = False


def test_every_parameter_is_seen():
    names = {(o, k) for o, k in EVERY_PARAMETER}
    assert {("pc", "frequencies"), ("mi-guided", "estimator"), ("demask", "estimator"),
            ("info-gain", "n_candidates"), ("+verify", "max_draft"), ("+ramp", "rate"),
            ("+wino", "tau2")} <= names


@pytest.mark.parametrize("owner,key", EVERY_PARAMETER)
def test_no_parameter_reads_a_file_for_a_request(tmp_path, monkeypatch, watch, owner, key):
    table = tmp_path / "freq.json"
    table.write_text("[1, 2, 3, 4]")  # a table pc could read, were it asked to
    (tmp_path / "folder").mkdir()
    monkeypatch.chdir(tmp_path)
    plain = is_scalar_hint(parameter_hints(owner)[key])
    for value in (str(table), "freq.json", str(tmp_path / "folder"), str(tmp_path / "none"),
                  "/etc/passwd"):
        out = _ask(_spec(owner, key, value))
        assert not watch, (owner, key, value, watch[:3])
        if not plain:  # a path, a table or an object: refused before anything is built
            assert out is None, (owner, key, value)


def test_the_refusal_is_the_same_whether_the_file_exists(tmp_path):
    (tmp_path / "f.json").write_text("[1, 2]")
    messages = []
    for path in (tmp_path / "f.json", tmp_path / "missing"):
        with pytest.raises(UnmaskError) as e:
            request_sampler(f"pc:frequencies={path}")
        messages.append(str(e.value).replace(str(path), "P"))
    assert messages[0] == messages[1] and "cannot set frequencies" in messages[0]


PATHISH = st.text(alphabet="/.~_-abcdefx0123456789", min_size=1, max_size=24)
VALUES = st.one_of(PATHISH, st.integers(-(2**70), 2**70).map(str),
                   st.floats(allow_nan=True, allow_infinity=True).map(repr),
                   st.sampled_from(["none", "true", "/", ".", "..", "~", "/dev/zero",
                                    "/proc/self/environ", "freq.json"]))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(picks=st.lists(st.tuples(st.sampled_from(EVERY_PARAMETER), VALUES), min_size=1,
                      max_size=3))
def test_any_request_spec_touches_no_file(watch, picks):
    """Several parameters at once, any values: a spec is refused or canonical, and nothing
    on disk was looked at."""
    name = next((o for (o, _), _ in picks if not o.startswith("+")), "confidence")
    params, mods = {}, {}
    for (owner, key), value in picks:
        if owner == name:
            params.setdefault(key, value)
        elif owner.startswith("+"):
            mods.setdefault(owner, {}).setdefault(key, value)
    spec = name + (":" + ",".join(f"{k}={v}" for k, v in params.items()) if params else "")
    spec += "".join(o + "".join(f",{k}={v}" for k, v in kv.items()) for o, kv in mods.items())
    watch.clear()
    _ask(spec)
    assert not watch, (spec, watch[:3])


@pytest.mark.parametrize("key", sorted(REQUEST_LIMITS))
def test_parameters_that_scale_work_are_bounded(key):
    owner = next(o for o, k in EVERY_PARAMETER if k == key)
    lo, hi = REQUEST_LIMITS[key]
    big = int(hi) + 1 if isinstance(hi, int) else hi * 10
    with pytest.raises(UnmaskError, match=rf"{key}=.*the server allows {key} in"):
        request_sampler(_spec(owner, key, str(big)))


@pytest.mark.parametrize("spec", ["topk:k=1000000000000000000000000", "topk:k=9223372036854775808",
                                  "topk:k=8+ramp=0.5,min=1000000000000000000000",
                                  "eb:gamma=inf", "eb:gamma=nan", "mi-oracle",
                                  "info-gain:n_candidates=1000000000000"])
def test_requests_out_of_range_are_one_line(spec):
    with pytest.raises(UnmaskError, match="sampler"):
        request_sampler(spec)
