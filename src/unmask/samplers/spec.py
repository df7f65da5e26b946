"""One sampler spec syntax for every command and bench:

    SPEC      := NAME [":" PARAM ("," PARAM)*] MODIFIER*
    PARAM     := KEY "=" VALUE
    MODIFIER  := "+verify" ["=" TOLERANCE] | "+corrector"

e.g. ``eb:gamma=0.1``, ``mi-guided:gamma=1.0,order=confidence+verify=0.002``,
``topk:k=7+corrector``. A VALUE is an int, a float, true/false, none or a string (it runs to
the next ``,`` or to a ``+`` that starts a modifier, so ``1e+3`` is a number). ``+verify``
wraps the sampler in :class:`~unmask.samplers.verified.Verified` (TOLERANCE in [0, 1], default
1: tokens only); ``+corrector`` asks the caller to decode with its corrector's hooks
(:func:`unmask.hooks.corrector_hooks`); the two do not combine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from unmask.errors import UnmaskError
from unmask.samplers.base import Sampler, make_sampler, parse_param_value
from unmask.samplers.verified import Verified

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MODIFIER = re.compile(r"\+(verify|corrector)(?=[=+]|$)")
VERIFY, CORRECTOR = "+verify", "+corrector"


@dataclass
class SamplerSpec:
    """A parsed sampler spec.

    name: a registered sampler name.
    params: the sampler's parameters (values parsed: int, float, bool, None or str).
    verify: the verification tolerance in [0, 1], or None (not verified).
    corrected: decode with the corrector's hooks.
    label: how tables name the entry (default: ``NAME K=V ... [+corrector] [+verify[=T]]``).

    Constructing one validates it (builds the sampler once): an unknown name or parameter, a
    value of the wrong type, verify on a sampler that evaluates its next state, or verify
    with the corrector raise :class:`UnmaskError` naming the field.
    """

    name: str
    params: dict = field(default_factory=dict)
    verify: float | None = None
    corrected: bool = False
    label: str = ""

    def __post_init__(self):
        if not isinstance(self.params, dict):
            raise UnmaskError(f"params: expected a dict, got {type(self.params).__name__}")
        if self.verify is not None and self.corrected:
            raise UnmaskError(f"sampler spec {self.text!r}: {VERIFY} and {CORRECTOR} cannot be "
                              "combined (the corrector may change the state after a verified "
                              "pass)")
        self.build()  # validate now, with a message naming the field
        if not self.label:
            self.label = self.name + "".join(f" {k}={v}" for k, v in self.params.items())
            if self.corrected:
                self.label += " " + CORRECTOR
            if self.verify is not None:
                self.label += " " + verify_suffix(self.verify)

    @classmethod
    def parse(cls, text: str) -> SamplerSpec:
        """:func:`parse_spec`."""
        return parse_spec(text)

    @property
    def verified(self) -> bool:
        return self.verify is not None

    @property
    def text(self) -> str:
        """The spec in its canonical syntax (``parse_spec(spec.text)`` gives it back)."""
        out = self.name
        if self.params:
            out += ":" + ",".join(f"{k}={v}" for k, v in self.params.items())
        if self.verify is not None:
            out += VERIFY + ("" if self.verify == 1.0 else f"={self.verify:g}")
        return out + (CORRECTOR if self.corrected else "")

    def build(self) -> Sampler:
        """A fresh sampler of this spec (wrapped in :class:`Verified` when verified)."""
        sampler = make_sampler(self.name, **self.params)
        return sampler if self.verify is None else Verified(sampler, tolerance=self.verify)


def verify_suffix(tolerance: float) -> str:
    """How a label shows verification: ``+verify`` (tokens only) or ``+verify=T``."""
    return VERIFY + ("" if tolerance == 1.0 else f"={tolerance:g}")


def parse_spec(text: str) -> SamplerSpec:
    """Parse ``NAME[:K=V,...][+verify[=T]][+corrector]`` (module docstring) into a validated
    :class:`SamplerSpec`; :class:`UnmaskError` naming the spec and what is wrong."""
    if not isinstance(text, str):
        raise UnmaskError(f"sampler spec: expected a string, got {type(text).__name__}")

    def fail(what: str, pos: int):
        raise UnmaskError(f"sampler spec {text!r}: {what} at position {pos}")

    m = _NAME.match(text)
    if not m:
        fail("expected a sampler name", 0)
    name, pos, params = m.group(), m.end(), {}
    if text.startswith(":", pos):
        pos += 1
        while True:
            k = _KEY.match(text, pos)
            if not k:
                fail("expected a parameter name", pos)
            if not text.startswith("=", k.end()):
                fail(f"expected '=' after {k.group()!r}", k.end())
            start = end = k.end() + 1
            while end < len(text) and text[end] != "," and not _MODIFIER.match(text, end):
                end += 1
            if end == start:
                fail(f"expected a value for {k.group()!r}", start)
            if k.group() in params:
                fail(f"{k.group()!r} given twice", k.start())
            params[k.group()] = parse_param_value(text[start:end])
            pos = end
            if not text.startswith(",", pos):
                break
            pos += 1
    verify, corrected = None, False
    while pos < len(text):
        m = _MODIFIER.match(text, pos)
        if not m:
            fail(f"expected {VERIFY}[=T] or {CORRECTOR}", pos)
        pos = m.end()
        if m.group(1) == "corrector":
            if corrected:
                fail(f"{CORRECTOR} given twice", m.start())
            corrected = True
            continue
        if verify is not None:
            fail(f"{VERIFY} given twice", m.start())
        verify = 1.0
        if text.startswith("=", pos):
            end = text.find("+", pos + 1)
            end = len(text) if end < 0 else end
            value = parse_param_value(text[pos + 1:end])
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not 0.0 <= value <= 1.0:
                fail(f"{VERIFY}=T takes a tolerance in [0, 1], got {text[pos + 1:end]!r}", pos + 1)
            verify, pos = float(value), end
    return SamplerSpec(name, params, verify, corrected)
