"""What a value must be, said once: type predicates, the check of a value against a type hint,
the check of a dict against a dataclass's fields, and the argument types of the command line.

Every layer that reads values from outside uses these: sampler parameters
(:func:`unmask.samplers.base.make_sampler`), config files
(:func:`unmask.models.files.dataclass_from_dict`), ``--model-config`` overrides, the
lm-eval model's ``--model_args`` and the CLI's flags. Each caller words its own one-line
message; what counts as an integer, a number or a bool is decided here.

The types understood are ``int``, ``float``, ``bool``, ``str``, ``None``, ``list[T]``, ``dict``
and unions of them; any other hint (a tensor, an object, ``typing.Any``) is not checked here
and is left to the receiver's own checks.
"""

from __future__ import annotations

import math
import numbers
import sys
import types
import typing

from unmask.errors import UnmaskError

# ------------------------------------------------------------------ predicates


_NOT_TEXT = __import__("re").compile("[\x00\ud800-\udfff]")


def text_problem(text: str) -> str | None:
    """What keeps ``text`` from being plain text (None: nothing): a byte that was not UTF-8
    (a command line decodes one as a surrogate escape), a lone surrogate (JSON's
    ``"\\ud800"``), or a NUL character, with its position."""
    m = _NOT_TEXT.search(text)
    if m is None:
        return None
    ch, at = m.group(), m.start()
    if ch == "\x00":
        return f"a NUL character at position {at}"
    if "\udc80" <= ch <= "\udcff":
        return f"a byte that is not UTF-8 (0x{ord(ch) - 0xdc00:02x}) at position {at}"
    return f"a lone surrogate (U+{ord(ch):04X}) at position {at}, which is not text"


def is_bool(value) -> bool:
    """``True``/``False``, numpy's too (a numpy bool exists only once numpy is imported, so
    this module does not import it)."""
    if isinstance(value, bool):
        return True
    np = sys.modules.get("numpy")
    return np is not None and isinstance(value, np.bool_)


def is_int(value) -> bool:
    """An integer (numpy's too) that is not a bool (``True`` is an int to Python, never a
    count here)."""
    return isinstance(value, numbers.Integral) and not is_bool(value)


def is_number(value) -> bool:
    """A real number (an int, a float, numpy's too) that is not a bool."""
    return isinstance(value, numbers.Real) and not is_bool(value)


#: the smallest positive temperature: below it a logit divided by it overflows to -inf in
#: float64 for some token (every token then ties), and 0, the argmax it tends to, is meant
MIN_TEMPERATURE = 1e-6


def is_temperature(value) -> bool:
    """A finite number that is 0 or at least :data:`MIN_TEMPERATURE`."""
    return is_number(value) and (value == 0 or MIN_TEMPERATURE <= value < float("inf"))


def temperature_message(name: str, value) -> str:
    """The one line refusing ``value`` for the temperature ``name``."""
    return (f"{name}: must be a finite number >= 0 (0: the argmax; a positive one at least "
            f"{MIN_TEMPERATURE:g}, a smaller one overflows), got {value!r}")


def plain(value):
    """``value`` with a numpy scalar made the Python one (int, float or bool)."""
    if is_bool(value):
        return bool(value)
    if is_int(value):
        return int(value)
    if is_number(value):
        return float(value)
    return value


# ------------------------------------------------------------------ values against type hints

#: the scalar types and how a message names them
SCALARS = {int: "an integer", float: "a number", bool: "True or False", str: "a string"}


def union_options(hint) -> tuple:
    """The options of a union hint (``int | None`` -> ``(int, NoneType)``); ``(hint,)`` for any
    other hint."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return typing.get_args(hint)
    return (hint,)


def is_scalar_hint(hint) -> bool:
    """Whether every option of ``hint`` is int, float, bool, str or None."""
    return all(t in SCALARS or t is type(None) for t in union_options(hint))


def matches(value, hint) -> bool:
    """Whether ``value`` is of type ``hint``: an int (not a bool) for ``int``, any real number
    (not a bool) for ``float``, a bool for ``bool``, a str for ``str``, None for ``None``, a list
    whose items match for ``list[T]``, a dict for ``dict``, one option for a union. Other hints
    are not checked (True)."""
    options = union_options(hint)
    if len(options) > 1:
        return any(matches(value, t) for t in options)
    if hint is type(None):
        return value is None
    if hint is bool:
        return is_bool(value)
    if hint is int:
        return is_int(value)
    if hint is float:
        return is_number(value)
    if hint is str:
        return isinstance(value, str)
    origin = typing.get_origin(hint) or hint
    if origin is list:
        (item,) = typing.get_args(hint) or (typing.Any,)
        return isinstance(value, list) and all(matches(v, item) for v in value)
    if origin is dict:
        return isinstance(value, dict)
    return True


def describe(hint) -> str:
    """How a message names a scalar hint: ``int | None`` -> 'an integer or None'."""
    options = union_options(hint)
    return " or ".join([SCALARS[t] for t in options if t in SCALARS]
                       + (["None"] if type(None) in options else []))


def json_type(value) -> str:
    """The JSON name of a decoded value's type (for messages)."""
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "an object", type(None): "null"}.get(type(value),
                                                                    type(value).__name__)


# ------------------------------------------------------------------ dicts against dataclasses


class FieldProblem(typing.NamedTuple):
    """The first thing wrong with a dict read as a dataclass's fields.

    kind: 'unknown' (a key that is no field), 'missing' (a required field absent) or 'type'
        (a value not of its field's type).
    key: the key or field.
    hint: the field's type hint (None for an unknown key).
    """

    kind: str
    key: str
    hint: object = None


def field_hints(cls) -> dict[str, object]:
    """Field name -> resolved type hint of dataclass ``cls``, in field order."""
    import dataclasses  # a caller with a dataclass has it imported; the CLI's flags need not

    hints = typing.get_type_hints(cls)
    return {f.name: hints.get(f.name, object) for f in dataclasses.fields(cls)}


def field_problem(cls, data: dict, *, partial: bool = False) -> FieldProblem | None:
    """The first problem of ``data`` as the fields of dataclass ``cls`` (None when there is
    none): an unknown key (the first in sorted order), then, field by field, a missing required
    field (not with ``partial``: ``data`` overrides some fields) or a value that does not
    :func:`match <matches>` its hint."""
    import dataclasses

    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        return FieldProblem("unknown", unknown[0])
    hints = field_hints(cls)
    for name, f in fields.items():
        if name not in data:
            required = (f.default is dataclasses.MISSING
                        and f.default_factory is dataclasses.MISSING)
            if required and not partial:
                return FieldProblem("missing", name, hints[name])
            continue
        if not matches(data[name], hints[name]):
            return FieldProblem("type", name, hints[name])
    return None


# ------------------------------------------------------------------ argument types
# each refuses a text with :class:`InvalidText` (its message one line); the command line
# turns it into "argument --x: ..." and exit 2 (unmask.commands.flags.types), lm-eval's
# --model_args into an UnmaskError naming the key (parse_text_args)


class InvalidText(ValueError):
    """A text an argument type refuses; the message says why in one line."""


def int_at_least(low: int):
    """An argument type: an integer >= ``low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise InvalidText(f"expected an integer >= {low}, got {text!r}"
                                             ) from None
        if value < low:
            raise InvalidText(f"must be >= {low}, got {value}")
        return value

    parse.__name__ = f"integer >= {low}"
    return parse


positive_int = int_at_least(1)
non_negative_int = int_at_least(0)


def seed_int(text: str) -> int:
    """An argument type: a seed, an integer in [0, 2**63)."""
    value = non_negative_int(text)
    if value >= 2**63:
        raise InvalidText(f"must be < 2**63, got {value}")
    return value


def finite_float(low: float | None = None, high: float | None = None, *,
                 open_low: bool = False):
    """An argument type: a finite float, optionally within [low, high] (``open_low``:
    (low, high])."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise InvalidText(f"expected a number, got {text!r}") from None
        if not math.isfinite(value):
            raise InvalidText(f"must be a finite number, got {text!r}")
        if low is not None and (value <= low if open_low else value < low):
            raise InvalidText(
                f"must be {'>' if open_low else '>='} {low:g}, got {value:g}")
        if high is not None and value > high:
            raise InvalidText(f"must be <= {high:g}, got {value:g}")
        return value

    parse.__name__ = "finite number"
    return parse


def bool_text(text: str) -> bool:
    """An argument type: true/false, yes/no or 1/0 (any case)."""
    value = text.strip().lower()
    if value not in ("1", "0", "true", "false", "yes", "no"):
        raise InvalidText(f"expected true or false, got {text!r}")
    return value in ("1", "true", "yes")


def one_of(*choices: str):
    """An argument type: one of ``choices``, as written."""

    def parse(text: str) -> str:
        if text not in choices:
            raise InvalidText(f"expected {' or '.join(choices)}, got {text!r}")
        return text

    parse.__name__ = " or ".join(choices)
    return parse


def optional(parse):
    """An argument type: None for '' or 'None', else ``parse``'s value."""
    return lambda text: None if text.strip() in ("", "None") else parse(text)


def parse_text_args(args: dict, parsers: dict, where: str) -> dict:
    """``args`` (key -> text, or a value whose ``str`` is read) typed by ``parsers`` (key -> an
    argument type); :class:`~unmask.errors.UnmaskError` ``"{where}: ..."`` names an unknown key
    or the key whose text its parser refuses."""
    unknown = sorted(set(args) - set(parsers))
    if unknown:
        raise UnmaskError(f"{where}: unknown key {unknown[0]!r}; accepted: "
                          f"{', '.join(parsers)}")
    typed = {}
    for key, value in args.items():
        if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
            value = int(value)  # a caller's parser read "-4" as -4.0: say -4 back
        try:
            typed[key] = parsers[key](value if isinstance(value, str) else str(value))
        except InvalidText as e:
            raise UnmaskError(f"{where}: {key}: {e}") from None
    return typed
