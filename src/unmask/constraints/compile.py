"""A :class:`~unmask.constraints.spec.ConstraintSpec` compiled for a tokenizer: a token-level
DFA (:class:`TokenDFA`), built once per (language, tokenizer) and cached by their hashes.

A regular expression becomes a token-level automaton with outlines-core (``Index`` over the
tokenizer's vocabulary, each token spelled as the text it adds when decoded); a JSON Schema
becomes a regular expression first (``build_regex_from_schema``), any JSON object the same
with ``{"type": "object"}`` and a nesting bound, a list of choices their alternation.
End of text: the canvas is longer than most answers, so the language is padded: from an
accepting state the model's EOS ids (all of them) lead to a padding state where only EOS
follows; a model without EOS fills the canvas exactly. Bounds: :data:`MAX_STATES` states and
:data:`COMPILE_SECONDS` seconds; beyond either the constraint is refused (one line).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from unmask.constraints.spec import ConstraintSpec
from unmask.errors import UnmaskError, require

#: the most states a compiled automaton may have (its feasibility costs grow with them)
MAX_STATES = 2000
#: the most seconds compiling one (language, tokenizer) may take
COMPILE_SECONDS = 20.0
#: compiled automata kept in memory
CACHE_SIZE = 16
#: compilations left running past :data:`COMPILE_SECONDS` (a thread cannot be stopped) that
#: may be alive at once: beyond them a new language is refused until one ends
MAX_RUNAWAY = 2
#: the most characters a pattern may spell out once its counted repetitions are unrolled
#: (``(a{100}){100}`` is 10,000): past it the automaton would not fit the state bound anyway,
#: and building it would take unbounded time and memory
MAX_UNROLLED = 100_000


@dataclass(frozen=True)
class TokenDFA:
    """A deterministic automaton over a model's token ids, with tokens grouped into classes
    that move every state alike.

    delta: (S, C) int64, the next state of each state under each token class; state 0 is the
        dead state (absorbing, never accepting), class 0 the tokens the language never uses.
    token_class: (V,) int64, the class of each token id.
    accept: (S,) bool, where the text may end (the padding state included).
    start: the start state.
    min_tokens: the fewest tokens a string of the language takes (EOS padding not counted).
    pads: whether EOS pads the end (the model has EOS ids).
    key: the hash of (language, tokenizer) the automaton is cached by.
    """

    delta: np.ndarray
    token_class: np.ndarray
    accept: np.ndarray
    start: int
    min_tokens: int
    pads: bool
    key: str
    compile_s: float = 0.0

    @property
    def n_states(self) -> int:
        return int(self.delta.shape[0])

    def run(self, ids) -> int:
        """The state after the token ids ``ids`` from the start (0: dead)."""
        state = self.start
        for t in ids:
            state = int(self.delta[state, self.token_class[t]])
        return state

    def accepts(self, ids) -> bool:
        return bool(self.accept[self.run(ids)])


def spec_regex(spec: ConstraintSpec) -> str:
    """The regular expression of ``spec`` (outlines-core's syntax); UnmaskError (one line)
    for a schema feature outlines-core does not support."""
    if spec.kind == "regex":
        return spec.value
    if spec.kind == "choice":
        return "|".join(f"(?:{re.escape(option)})" for option in spec.value)
    if spec.kind == "json_object":
        return _json_object(_json_value(spec.value - 1))
    from outlines_core.json_schema import build_regex_from_schema

    try:
        return build_regex_from_schema(spec.value)
    except (ValueError, TypeError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UnmaskError(f"json_schema: not supported: {first[:160]}") from None


#: JSON's pieces for ``json_object``: a string without \\u escapes, a number, optional spaces
_STRING = r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt])*"'
_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
_SPACE = "[ ]?"


def _json_value(depth: int) -> str:
    """Any JSON value with at most ``depth`` levels of objects and arrays."""
    scalar = f"{_STRING}|{_NUMBER}|true|false|null"
    if depth == 0:
        return scalar
    inner = _json_value(depth - 1)
    items = f"(?:{inner}){_SPACE}(?:,{_SPACE}(?:{inner}){_SPACE})*"
    return f"{scalar}|{_json_object(inner)}|\\[{_SPACE}(?:{items})?\\]"


def _json_object(value: str) -> str:
    """A JSON object whose member values match ``value``."""
    member = f"{_STRING}{_SPACE}:{_SPACE}(?:{value})"
    return f"\\{{{_SPACE}(?:{member}{_SPACE}(?:,{_SPACE}{member}{_SPACE})*)?\\}}"


# ------------------------------------------------------------------ the tokenizer's spelling


@dataclass(frozen=True)
class Spelling:
    """How a tokenizer's ids spell text: ``surfaces[id]`` the text the token adds when decoded
    (None: a token the language never uses: special, mask, not valid text alone), and
    ``prefix`` the text the spelling starts with that decoding drops (WordPiece's leading
    space)."""

    surfaces: tuple[str | None, ...]
    eos_ids: tuple[int, ...]
    prefix: str = ""

    @property
    def key(self) -> str:
        text = json.dumps([self.surfaces, self.eos_ids, self.prefix])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def spelling(tokenizer, vocab_size: int, real: list[bool], eos_ids: tuple[int, ...]
             ) -> Spelling:
    """The :class:`Spelling` of ``tokenizer`` over ids ``0..vocab_size-1``; ``real`` marks the
    ids a model may emit (special tokens spell nothing). Byte-level and character tokenizers
    spell a token by decoding it alone; WordPiece (``##`` continuations, words joined by
    spaces) by a space before each word piece, the first one's dropped (so a text never
    starts with a ``##`` piece)."""
    pieces = tokenizer.convert_ids_to_tokens(list(range(vocab_size)))
    backend = getattr(tokenizer, "backend_tokenizer", None)
    decoder = getattr(backend, "decoder", None)
    wordpiece = (type(decoder).__name__ == "WordPiece" if backend is not None
                 else any(isinstance(p, str) and p.startswith("##") for p in pieces))
    cleanup = bool(getattr(decoder, "cleanup", False))
    special = set(eos_ids) | set(getattr(tokenizer, "all_special_ids", ()))
    surfaces: list[str | None] = []
    for i in range(vocab_size):
        text = None
        if real[i] and i not in special and isinstance(pieces[i], str):
            if wordpiece:
                text = _wordpiece_surface(pieces[i], cleanup)
            else:
                text = tokenizer.decode([i], skip_special_tokens=False,
                                        clean_up_tokenization_spaces=False)
            if not text or "\ufffd" in text:
                text = None  # a partial UTF-8 byte, or nothing: never in the language
        surfaces.append(text)
    spell = Spelling(tuple(surfaces), tuple(eos_ids), " " if wordpiece else "")
    _check_spelling(tokenizer, spell)
    return spell


#: WordPiece's clean-up: these words join the text before them without a space
_JOINING = {".", "?", "!", ","}
#: ... and these change with their neighbours (" ' " -> "'", "do not" -> "don't"): unused
_CONTEXTUAL = {"'", "not"}


def _wordpiece_surface(piece: str, cleanup: bool) -> str | None:
    """The text a WordPiece token adds: a continuation (``##x``) its own text, a word a
    space and its text; with the decoder's clean-up, punctuation that joins the word before
    it has no space, and words whose spelling depends on their neighbours are not used."""
    if piece.startswith("##"):
        return piece[2:]
    if cleanup and piece in _CONTEXTUAL:
        return None
    return piece if cleanup and piece in _JOINING else " " + piece


def _check_spelling(tokenizer, spell: Spelling) -> None:
    """Refuse a tokenizer whose decoding is not the spelling of its ids, tested on pairs and
    triples of ids (so a constrained text is the text that decoding gives)."""
    ids = [i for i, s in enumerate(spell.surfaces) if s is not None]
    rng = np.random.default_rng(0)
    for _ in range(64 if len(ids) > 1 else 0):
        seq = [int(i) for i in rng.choice(ids, size=int(rng.integers(2, 4)))]
        if spell.prefix and not spell.surfaces[seq[0]].startswith(spell.prefix):
            continue
        want = "".join(spell.surfaces[i] for i in seq)[len(spell.prefix):]
        got = tokenizer.decode(seq, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        require(got == want, f"constraint: the tokenizer decodes {seq} as {got!r}, not the "
                             f"text of its tokens {want!r}; it cannot be constrained")


# ------------------------------------------------------------------ compilation


_CACHE: OrderedDict[str, TokenDFA] = OrderedDict()
_LOCK = threading.Lock()
#: languages whose compilation ran past the bound, by key: refused at once when asked again
_TIMED_OUT: OrderedDict[str, float] = OrderedDict()
#: the compilation threads still running past the bound
_RUNAWAY: list[threading.Thread] = []


def compile_dfa(spec: ConstraintSpec, spell: Spelling, *, max_states: int = MAX_STATES,
                timeout: float = COMPILE_SECONDS) -> TokenDFA:
    """The :class:`TokenDFA` of ``spec`` over ``spell`` (cached by both hashes)."""
    key = hashlib.sha256(f"{spec.hash}:{spell.key}:{max_states}".encode()).hexdigest()[:16]
    with _LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
        if key in _TIMED_OUT and timeout <= _TIMED_OUT[key]:
            raise _too_slow(spec.kind, _TIMED_OUT[key])
        _RUNAWAY[:] = [worker for worker in _RUNAWAY if worker.is_alive()]
        require(len(_RUNAWAY) < MAX_RUNAWAY,
                f"{spec.kind}: {len(_RUNAWAY)} earlier languages are still compiling past "
                f"the {COMPILE_SECONDS:g} s bound; try again once they end")
    t0 = time.perf_counter()
    transitions, initial, finals = _index(spec, spell, timeout, key)
    dfa = _dense(transitions, initial, finals, spell, key, max_states, spec)
    dfa = TokenDFA(**{**dfa.__dict__, "compile_s": time.perf_counter() - t0})
    with _LOCK:
        _CACHE[key] = dfa
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    return dfa


def _index(spec: ConstraintSpec, spell: Spelling, timeout: float, key: str):
    """outlines-core's index of ``spec`` over the spelled vocabulary, built in a thread that
    may take at most ``timeout`` seconds (past them the thread is left to end, counted in
    :data:`_RUNAWAY`, and the language is remembered as too slow): (transitions, initial,
    finals)."""
    from outlines_core import Index, Vocabulary

    regex = spec_regex(spec)
    check_unrolled(regex, spec.kind)
    pattern = spell.prefix and re.escape(spell.prefix)
    # the end anchor makes outlines-core's automaton accept the whole language: without it
    # its matching is leftmost-first ("a|ab" would stop at "a")
    pattern = f"{pattern}(?:{regex})$"
    by_text: dict[str, list[int]] = {}
    for i, text in enumerate(spell.surfaces):
        if text is not None:
            by_text.setdefault(text, []).append(i)
    require(by_text, "constraint: the model's tokenizer spells no text")
    eos = len(spell.surfaces)  # outside the vocabulary: padding is added afterwards
    result: dict = {}

    def build():
        try:
            index = Index(pattern, Vocabulary(eos, by_text))
            result["out"] = (index.get_transitions(), index.get_initial_state(),
                             index.get_final_states())
        except BaseException as exc:  # noqa: B902 - reported in the caller's thread
            result["error"] = exc

    worker = threading.Thread(target=build, daemon=True)
    worker.start()
    worker.join(timeout)
    name = spec.kind
    if worker.is_alive():
        with _LOCK:
            _RUNAWAY.append(worker)
            _TIMED_OUT[key] = max(timeout, _TIMED_OUT.get(key, 0.0))
            while len(_TIMED_OUT) > 256:
                _TIMED_OUT.popitem(last=False)
        raise _too_slow(name, timeout)
    if "error" in result:
        exc = result["error"]
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UnmaskError(f"{name}: cannot be compiled: {first[:160]}")
    return result["out"]


def _too_slow(kind: str, seconds: float) -> UnmaskError:
    return UnmaskError(f"{kind}: compiling it over the tokenizer took more than {seconds:g} s; "
                       "simplify it")


def check_unrolled(regex: str, kind: str) -> None:
    """Refuse a pattern that spells out more than :data:`MAX_UNROLLED` characters once its
    counted repetitions are unrolled (an open repetition counts its minimum, plus one);
    a pattern Python's parser does not read is left to outlines-core."""
    try:
        import re._parser as parser
    except ImportError:  # Python < 3.11
        import sre_parse as parser
    try:
        tree = parser.parse(regex)
    except (re.error, RecursionError, OverflowError, ValueError):
        return
    size = _unrolled(tree, parser)
    require(size <= MAX_UNROLLED,
            f"{kind}: its counted repetitions spell out {size:.3g} characters, more than "
            f"the bound {MAX_UNROLLED:,}; use smaller counts")


def _unrolled(tree, parser) -> float:
    """The characters a parsed pattern spells out with its repetitions unrolled (bounded)."""
    total = 0.0
    for op, arg in tree:
        if op in (parser.MAX_REPEAT, parser.MIN_REPEAT, getattr(parser, "POSSESSIVE_REPEAT",
                                                                  None)):
            lo, hi, sub = arg
            times = hi if hi != parser.MAXREPEAT else lo + 1
            total += max(times, 1) * _unrolled(sub, parser)
        elif op == parser.SUBPATTERN:
            total += _unrolled(arg[-1], parser)
        elif op == parser.BRANCH:
            total += sum(_unrolled(branch, parser) for branch in arg[1])
        elif op in (parser.ASSERT, parser.ASSERT_NOT):
            total += _unrolled(arg[1], parser)
        else:
            total += 1
        if total > MAX_UNROLLED:
            return total
    return total


def _dense(transitions, initial, finals, spell, key, max_states, spec) -> TokenDFA:
    """The trimmed, dense :class:`TokenDFA` of outlines-core's transitions (EOS padding
    added); UnmaskError beyond ``max_states`` or for an empty language."""
    vocab = len(spell.surfaces)
    # each state's (token ids, next states) as arrays: a 50k vocabulary gives millions of
    # transitions, read at C speed (outlines-core's EOS transitions dropped)
    arrays = {}
    for s, out in transitions.items():
        toks = np.fromiter(out.keys(), dtype=np.int64, count=len(out))
        nxts = np.fromiter(out.values(), dtype=np.int64, count=len(out))
        keep = toks < vocab
        arrays[s] = (toks[keep], nxts[keep])
    graph = {s: set(np.unique(nxts).tolist()) for s, (_, nxts) in arrays.items()}
    useful = _useful(graph, initial, set(finals))
    require(initial in useful, f"{spec.kind}: no sequence of the tokenizer's tokens spells a "
                               "string of it")
    pads = bool(spell.eos_ids)
    # 0: dead, 1..: useful states, last: padding (when the model has EOS)
    number = {s: i + 1 for i, s in enumerate(sorted(useful))}
    n = len(number) + 1 + pads
    require(n <= max_states, f"{spec.kind}: its automaton has {n} states over this "
                             f"tokenizer, more than the bound {max_states}; simplify it")
    table = np.zeros((n, vocab), dtype=np.int64)
    renumber = np.zeros(max(transitions, default=0) + 2 + max(
        (int(a[1].max()) for a in arrays.values() if a[1].size), default=0), dtype=np.int64)
    renumber[list(number)] = list(number.values())  # useless states -> 0 (dead)
    for s, i in number.items():
        toks, nxts = arrays.get(s, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
        table[i, toks] = renumber[nxts]
    accept = np.zeros(n, dtype=bool)
    accept[[number[s] for s in finals if s in number]] = True
    if pads:
        pad = n - 1
        eos = list(spell.eos_ids)
        table[np.ix_(np.flatnonzero(accept), eos)] = pad
        table[pad, eos] = pad
        accept[pad] = True
    classes, token_class = np.unique(table, axis=1, return_inverse=True)
    # class 0 for the tokens that lead nowhere, if any do
    dead = np.flatnonzero(~classes.any(0))
    if dead.size and dead[0] != 0:
        order = np.arange(classes.shape[1])
        order[[0, dead[0]]] = order[[dead[0], 0]]
        classes, token_class = classes[:, order], np.argsort(order)[token_class]
    return TokenDFA(delta=np.ascontiguousarray(classes), token_class=token_class.reshape(-1),
                    accept=accept, start=number[initial],
                    min_tokens=_shortest(graph, initial, set(finals)), pads=pads, key=key)


def _useful(graph, initial, finals) -> set:
    """States reachable from ``initial`` from which a final state is reachable."""
    seen, todo = {initial}, [initial]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    back: dict = {}
    for s in seen:
        for nxt in graph.get(s, ()):
            back.setdefault(nxt, set()).add(s)
    live, todo = set(finals) & seen, list(set(finals) & seen)
    while todo:
        for prev in back.get(todo.pop(), ()):
            if prev not in live:
                live.add(prev)
                todo.append(prev)
    return live


def _shortest(graph, initial, finals) -> int:
    """The fewest tokens from ``initial`` to a final state (breadth first)."""
    level, seen, depth = {initial}, {initial}, 0
    while level and not level & finals:
        level = {n for s in level for n in graph.get(s, ())} - seen
        seen |= level
        depth += 1
    return depth
