"""One sampler spec syntax for every command and bench:

    SPEC      := NAME [":" PARAM ("," PARAM)*] MODIFIER*
    PARAM     := KEY "=" VALUE
    MODIFIER  := "+" MODNAME ["=" VALUE] ("," PARAM)*

e.g. ``eb:gamma=0.1``, ``mi-guided:gamma=1.0,order=confidence+verify=0.002``,
``eb:gamma=1.0+verify=0.03,prefixes=doubling``, ``topk:k=7+corrector``,
``threshold:tau=0.5+wino=0.9,max_checks=4``. A VALUE is an int, a float, true/false, none or
a string (it runs to the next ``,`` or to a ``+`` that starts a modifier, so ``1e+3`` is a
number). The modifiers:

* ``+verify[=T][,max_draft=M][,prefixes=all|doubling]`` wraps the sampler in
  :class:`~unmask.samplers.verified.Verified` (tolerance T in [0, 1], default 1: tokens
  only);
* ``+corrector`` asks the caller to decode with its corrector's hooks
  (:func:`unmask.hooks.corrector_hooks`; the corrector is a model of its own);
* a decode hook registered with :func:`register_hook` (``+wino=TAU2,...``: WINO's
  narrow-out re-masking, ``+remdm=ETA,...``: ReMDM's), its first parameter given by ``=``,
  the rest by name; the built sampler carries the hooks (:class:`WithHooks`), so
  :func:`~unmask.decode.decode` runs them with it;
* a sampler wrapper registered with :func:`register_wrapper` (``+ramp=RATE``: a per-pass
  reveal cap that grows with what the row already holds,
  :class:`~unmask.samplers.ramp.Ramp`), built around the sampler before ``+verify``.

``+verify`` combines with neither the corrector nor a hook (each may change the state after
a verified pass); it does with a wrapper (it verifies the wrapped sampler's sets).
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field, fields

from unmask.errors import UnmaskError
from unmask.presets import preset_spec
from unmask.samplers.base import (
    MAX_PARAM_INT,
    Sampler,
    make_sampler,
    parse_param_value,
    sampler_class,
)
from unmask.samplers.verified import Verified
from unmask.samplers.wrapper import SamplerWrapper
from unmask.validation import is_int, is_number

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
VERIFY, CORRECTOR = "+verify", "+corrector"
#: the options ``+verify`` takes by name (the tolerance is its ``=`` value)
VERIFY_OPTIONS = ("max_draft", "prefixes")


@dataclass(frozen=True)
class HookModifier:
    """A decode hook the spec can name: ``+NAME[=V][,K=V...]`` builds ``make(**params)``
    (``primary`` takes the ``=`` value); with ``wraps``, a sampler wrapper instead:
    ``make(sampler, **params)``."""

    make: type
    primary: str
    wraps: bool = False


#: modifier name -> :class:`HookModifier`, filled by :func:`register_hook`
HOOK_MODIFIERS: dict[str, HookModifier] = {}
#: the modules whose import registers the shipped modifiers (read before any spec is parsed)
REGISTERING_MODULES = ("unmask.hooks",)


def register_hook(name: str, primary: str):
    """Class decorator: make the hook class a spec modifier ``+name[=V][,K=V...]``, V being
    the parameter ``primary`` (``unmask.hooks`` registers its re-masking hooks)."""

    def wrap(cls):
        if name in HOOK_MODIFIERS or name in ("verify", "corrector"):
            raise RuntimeError(f"spec modifier {name!r} registered twice")
        HOOK_MODIFIERS[name] = HookModifier(cls, primary)
        cls.spec_name = name
        return cls

    return wrap


def register_wrapper(name: str, primary: str):
    """Class decorator: make the :class:`~unmask.samplers.wrapper.SamplerWrapper` class a
    spec modifier ``+name[=V][,K=V...]`` that wraps the sampler (``cls(sampler, **params)``,
    V being the parameter ``primary``)."""

    def wrap(cls):
        register_hook(name, primary)(cls)
        HOOK_MODIFIERS[name] = HookModifier(cls, primary, wraps=True)
        return cls

    return wrap


def _wraps(name: str) -> bool:
    return name in HOOK_MODIFIERS and HOOK_MODIFIERS[name].wraps


@dataclass
class WithHooks(SamplerWrapper):
    """A sampler that decodes with its own hooks: :func:`~unmask.decode.decode` runs
    ``hooks`` (after those it is given) whenever it decodes with this sampler. What a spec
    with hook modifiers builds (``threshold:tau=0.5+wino=0.9``).

    hooks: :class:`~unmask.hooks.Hook` objects, in order.
    """

    hooks: tuple = ()

    def __post_init__(self):
        super().__post_init__()
        self.hooks = tuple(self.hooks)

    def decode_hooks(self) -> tuple:
        return (*self.inner.decode_hooks(), *self.hooks)


@dataclass
class SamplerSpec:
    """A parsed sampler spec.

    name: a registered sampler name.
    params: the sampler's parameters (values parsed: int, float, bool, None or str).
    verify: the verification tolerance in [0, 1], or None (not verified).
    corrected: decode with the corrector's hooks.
    label: how tables name the entry (default: ``NAME K=V ... [+corrector] [+verify[=T]]``
        and the other modifiers as written).
    verify_options: ``+verify``'s other options (``max_draft``, ``prefixes``).
    hooks: hook modifiers in order, name -> parameters (``{"wino": {"tau2": 0.9}}``).

    Constructing one validates it (builds the sampler once): an unknown name or parameter, a
    value of the wrong type, verify on a sampler that evaluates its next state, or verify
    with the corrector or a hook raise :class:`UnmaskError` naming the field.
    """

    name: str
    params: dict = field(default_factory=dict)
    verify: float | None = None
    corrected: bool = False
    label: str = ""
    verify_options: dict = field(default_factory=dict)
    hooks: dict = field(default_factory=dict)
    #: (text, sampler) built to validate the spec, handed out by the first :meth:`build`
    #: while the spec still reads ``text``
    _unused: list = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self):
        for key in ("params", "verify_options", "hooks"):
            if not isinstance(getattr(self, key), dict):
                raise UnmaskError(f"{key}: expected a dict, got "
                                  f"{type(getattr(self, key)).__name__}")
        hooks = [k for k in self.hooks if not _wraps(k)]
        if self.verify is not None and (self.corrected or hooks):
            other = CORRECTOR if self.corrected else "+" + hooks[0]
            raise UnmaskError(f"sampler spec {self.text!r}: {VERIFY} and {other} cannot be "
                              "combined (it may change the state after a verified pass)")
        if self.verify_options and self.verify is None:
            raise UnmaskError(f"sampler spec {self.text!r}: verify options without {VERIFY}")
        # validate now, with a message naming the field
        self._unused.append((self.text, self._make()))
        if not self.label:
            self.label = self.name + "".join(f" {k}={v}" for k, v in self.params.items())
            if self.corrected:
                self.label += " " + CORRECTOR
            if self.verify is not None:
                self.label += " " + verify_suffix(self.verify, self.verify_options)
            self.label += "".join(" " + _hook_text(k, v) for k, v in self.hooks.items())

    @classmethod
    def parse(cls, text: str) -> SamplerSpec:
        """:func:`parse_spec`, building this class (a subclass may override :meth:`build`)."""
        return parse_spec(text, cls)

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
            out += verify_suffix(self.verify, self.verify_options)
        out += "".join(_hook_text(k, v) for k, v in self.hooks.items())
        return out + (CORRECTOR if self.corrected else "")

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_unused": []}  # a copy or a pickle builds its own

    def build(self) -> Sampler:
        """A fresh sampler of this spec, never handed out before (the first is the one built
        to validate it, unless a parameter has changed since): in its wrapper modifiers (in
        order), then in :class:`Verified` when verified, in :class:`WithHooks` (fresh hooks)
        when it names hooks."""
        try:
            text, sampler = self._unused.pop()
        except IndexError:
            return self._make()
        return sampler if text == self.text else self._make()

    def _make(self) -> Sampler:
        sampler = make_sampler(self.name, **self.params)
        for k, v in self.hooks.items():
            if _wraps(k):
                sampler = _make_hook(k, v, sampler)
        if self.verify is not None:
            unknown = sorted(set(self.verify_options) - set(VERIFY_OPTIONS))
            if unknown:
                raise UnmaskError(f"sampler spec {self.text!r}: {VERIFY}: unknown option "
                                  f"{unknown[0]!r}; accepted: {', '.join(VERIFY_OPTIONS)}")
            sampler = Verified(sampler, tolerance=self.verify, **self.verify_options)
        hooks = tuple(_make_hook(k, v) for k, v in self.hooks.items() if not _wraps(k))
        if hooks:
            sampler = WithHooks(sampler, hooks)
        return sampler


def _make_hook(name: str, params: dict, sampler: Sampler | None = None):
    """The hook ``+name`` builds from ``params`` (a wrapper modifier: around ``sampler``)."""
    if name not in HOOK_MODIFIERS:
        raise UnmaskError(f"sampler spec: unknown modifier +{name}; choose from "
                          f"{', '.join(_modifier_names())}")
    try:
        make = HOOK_MODIFIERS[name].make
        return make(sampler, **params) if _wraps(name) else make(**params)
    except TypeError:
        raise UnmaskError(f"sampler spec: +{name}: unknown option in {sorted(params)}") from None


def _modifier_names() -> list[str]:
    # the modules that register modifiers, imported here: a spec reads the same whichever
    # module was imported first
    for module in REGISTERING_MODULES:
        importlib.import_module(module)
    return ["verify", "corrector", *HOOK_MODIFIERS]


def _hook_text(name: str, params: dict) -> str:
    primary = HOOK_MODIFIERS[name].primary if name in HOOK_MODIFIERS else None
    rest = [f"{k}={v}" for k, v in params.items() if k != primary]
    head = f"+{name}" + (f"={params[primary]}" if primary in params else "")
    return ",".join([head, *rest])


def verify_suffix(tolerance: float, options: dict | None = None) -> str:
    """How a label shows verification: ``+verify`` (tokens only) or ``+verify=T``, then the
    options given (``,prefixes=doubling``)."""
    head = VERIFY + ("" if tolerance == 1.0 else f"={tolerance:g}")
    return ",".join([head, *(f"{k}={v}" for k, v in (options or {}).items())])


class _Reader:
    """A cursor over one spec's text, failing with the spec and the position."""

    def __init__(self, text: str):
        self.text, self.pos = text, 0
        names = "|".join(map(re.escape, _modifier_names()))
        self.modifier = re.compile(rf"\+({names})(?=[=+,]|$)")

    def fail(self, what: str, pos: int | None = None):
        raise UnmaskError(f"sampler spec {self.text!r}: {what} at position "
                          f"{self.pos if pos is None else pos}")

    def value(self, start: int, end: int):
        """The value ``text[start:end]`` (:func:`parse_param_value`); an integer must be
        within :data:`MAX_PARAM_INT` in magnitude (a count, a position, a step)."""
        value = parse_param_value(self.text[start:end])
        if is_int(value) and abs(value) > MAX_PARAM_INT:
            self.fail(f"{self.text[start:end][:30]!r} is out of range (an integer of at most "
                      f"2**31 in magnitude)", start)
        return value

    def value_end(self, start: int) -> int:
        end = start
        while end < len(self.text) and self.text[end] != "," \
                and not self.modifier.match(self.text, end):
            end += 1
        return end

    def params(self, params: dict) -> dict:
        """Read ``K=V`` pairs separated by commas into ``params``; the cursor ends after
        the last."""
        text = self.text
        while True:
            k = _KEY.match(text, self.pos)
            if not k:
                self.fail("expected a parameter name")
            if not text.startswith("=", k.end()):
                self.fail(f"expected '=' after {k.group()!r}", k.end())
            start = k.end() + 1
            end = self.value_end(start)
            if end == start:
                self.fail(f"expected a value for {k.group()!r}", start)
            if k.group() in params:
                self.fail(f"{k.group()!r} given twice", k.start())
            params[k.group()] = self.value(start, end)
            self.pos = end
            if not text.startswith(",", self.pos):
                return params
            self.pos += 1


def parse_spec(text: str, cls: type[SamplerSpec] = SamplerSpec) -> SamplerSpec:
    """Parse ``NAME[:K=V,...][+MODIFIER[=V][,K=V...]]...`` (module docstring) into a validated
    ``cls`` (:class:`SamplerSpec` or a subclass); :class:`UnmaskError` naming the spec and
    what is wrong."""
    parts = spec_parts(text)
    return cls(parts.pop("name"), parts.pop("params"), **parts)


def spec_parts(text: str) -> dict:
    """The fields of the :class:`SamplerSpec` that ``text`` names (``name``, ``params``,
    ``verify``, ``corrected``, ``verify_options``, ``hooks``), read but not validated:
    nothing is built (:func:`check_request_spec` reads them before anything may touch a
    file); :class:`UnmaskError` for text that is not a spec."""
    if not isinstance(text, str):
        raise UnmaskError(f"sampler spec: expected a string, got {type(text).__name__}")
    r = _Reader(text)
    m = _NAME.match(text)
    if not m:
        r.fail("expected a sampler name", 0)
    name, params = m.group(), {}
    r.pos = m.end()
    if text.startswith(":", r.pos):
        r.pos += 1
        r.params(params)
    verify, corrected, verify_options, hooks = None, False, {}, {}
    while r.pos < len(text):
        m = r.modifier.match(text, r.pos)
        if not m:
            r.fail("expected a modifier (" + ", ".join(
                f"+{n}" + ("[=T]" if n == "verify" else "") for n in _modifier_names()) + ")")
        mod, r.pos = m.group(1), m.end()
        if mod in hooks or (mod == "verify" and verify is not None) \
                or (mod == "corrector" and corrected):
            r.fail(f"+{mod} given twice", m.start())
        if mod == "corrector":
            corrected = True
            continue
        options = _modifier_options(r, mod)
        if mod == "verify":
            verify = options.pop("", 1.0)
            verify_options = options
        else:
            hooks[mod] = options
    return {"name": name, "params": params, "verify": verify, "corrected": corrected,
            "verify_options": verify_options, "hooks": hooks}


def _modifier_options(r: _Reader, mod: str) -> dict:
    """The options after ``+mod``: its ``=`` value (under ``""`` for verify, under the hook's
    primary parameter otherwise) and ``,K=V`` pairs."""
    options, text = {}, r.text
    if text.startswith("=", r.pos):
        start = r.pos + 1
        end = r.value_end(start)
        value = r.value(start, end) if end > start else None
        if mod == "verify" and (not is_number(value)
                                or not 0.0 <= value <= 1.0):
            r.fail(f"{VERIFY}=T takes a tolerance in [0, 1], got {text[start:end]!r}", start)
        if end == start:
            r.fail(f"expected a value for +{mod}", start)
        options["" if mod == "verify" else HOOK_MODIFIERS[mod].primary] = (
            float(value) if mod == "verify" else value)
        r.pos = end
    if text.startswith(",", r.pos):
        r.pos += 1
        r.params(options)
    return options


def spec_entry(text: str, where: str = "--sampler") -> SamplerSpec:
    """The :class:`SamplerSpec` ``text`` names, validated now; a bad one is refused in one
    line naming ``where`` (the flag or field it came from)."""
    try:
        return SamplerSpec.parse(text)
    except (UnmaskError, TypeError, ValueError) as e:  # a value of the wrong type, too
        raise UnmaskError(f"{where}: {text!r}: {e}" if not isinstance(e, UnmaskError)
                          else f"{where}: {e}") from None


def preset_entry(name: str) -> SamplerSpec:
    """Preset ``name`` (:mod:`unmask.presets`) as a bench entry: its spec, labelled with the
    spec's label and ``preset=NAME``."""
    entry = parse_spec(preset_spec(name))
    entry.label = f"{entry.label} preset={name}"
    return entry


def with_estimator(entries: list[SamplerSpec], estimator: str | None) -> list[SamplerSpec]:
    """``entries``, each whose sampler reads an MI estimator (a field ``estimator``:
    ``mi-guided``, ``demask``) given ``estimator`` (a folder; None: each keeps its own)."""
    if estimator:
        for e in entries:
            if "estimator" in {f.name for f in fields(sampler_class(e.name))}:
                e.params["estimator"] = estimator
    return entries
