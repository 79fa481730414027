"""All the path globs of a policy bundle matched in one linear-time pass (RE2's `Set`).

Judging a path pattern by pattern (`ledger.policy.path_glob`: an automaton per pattern, in Python)
costs up to ~15 us a pattern: 2,000 wildcard-heavy patterns, the limit, made one path cost
~30 ms, and a search that judged a few hundred new paths took seconds. Here every pattern
is translated once (at compile time) into a regular expression over an encoded path and
the bundle's patterns go into one RE2 set: a path is answered in one pass over its bytes,
whatever the patterns are (RE2 never backtracks).

The translation keeps `ledger.policy.path_glob`'s meaning exactly (a property test checks both
against wcmatch). A path is encoded segment by segment, each as `/` + text, with three
code points no document path may hold standing for what a glob treats apart: `.` -> \\x01,
`..` -> \\x02 (only a segment starting with a literal `.` matches them; `**` never spans
them), the root of an absolute path -> \\x04, and a trailing slash -> \\x03 at the end. A
path holding one of them (never a document's) is answered by the automata.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import re2

from ledger.policy.path_glob import _GLOBSTAR, PathGlob, SplitPath

_DOT, _DOTDOT, _TRAILING, _ROOT = "\x01", "\x02", "\x03", "\x04"  # in encoded paths
_RE_DOT, _RE_DOTDOT, _RE_TRAILING, _RE_ROOT = r"\x01", r"\x02", r"\x03", r"\x04"  # in expressions
_RESERVED = re.compile("[\x01-\x04\ud800-\udfff]")  # and lone surrogates (not UTF-8)
_CHAR = r"[^/\x01-\x04]"  # what `*` and `?` stand for inside a segment
_ANY_SEGMENT = r"/[^/\x01\x02\x03][^/]*"  # what `**` spans: any segment but `.` and `..`
_MAX_MEM = 64 << 20


def encode(path: SplitPath) -> str | None:
    """The path as the set's expressions read it; None when it holds a reserved code point
    or a lone surrogate."""
    out = []
    for index, part in enumerate(path.parts):
        if _RESERVED.search(part):
            return None
        if part == "" and index == 0:
            out.append("/" + _ROOT)
        else:
            out.append("/" + {".": _DOT, "..": _DOTDOT}.get(part, part))
    return "".join(out) + (_TRAILING if path.trailing_slash else "")


def _wildcard(text: str) -> str:
    pieces: list[str] = []
    for char in text:
        if char == "*":
            if not pieces or pieces[-1] != f"{_CHAR}*":
                pieces.append(f"{_CHAR}*")
        elif char == "?":
            pieces.append(_CHAR)
        else:
            pieces.append(_escape(char))
    return "".join(pieces)


def _escape(text: str) -> str:
    # Everything but [A-Za-z0-9_] as a code point: no RE2 escape rule to get wrong.
    return "".join(c if c.isascii() and (c.isalnum() or c == "_") else f"\\x{{{ord(c):x}}}" for c in text)


def translate(glob: PathGlob) -> str:
    """The expression (anchored at both ends by the set) of one compiled glob."""
    segments = glob.segments
    last = len(segments)
    open_end = last > 1 and segments[-1] is _GLOBSTAR
    body = []
    for index, segment in enumerate(segments):
        if segment is _GLOBSTAR:
            if open_end and index == last - 1:
                # A trailing `/**` spans one segment at least, or the path's trailing slash.
                body.append(f"(?:(?:{_ANY_SEGMENT})+{_RE_TRAILING}?|{_RE_TRAILING})")
                return "".join(body)
            body.append(f"(?:{_ANY_SEGMENT})*")
            continue
        if segment.literal is not None:
            literal = segment.literal
            text = {"": _RE_ROOT, ".": _RE_DOT, "..": _RE_DOTDOT}.get(literal) or _escape(literal)
            body.append("/" + text)
            continue
        assert segment.expression is not None
        choices = [_wildcard(segment.text)]
        if segment.dot_literal:  # `.*` may match `.` and `..`: the automaton says which
            choices += [code for part, code in ((".", _RE_DOT), ("..", _RE_DOTDOT)) if segment.matches(part)]
        body.append("/(?:" + "|".join(choices) + ")")
    return "".join(body) + f"{_RE_TRAILING}?"


class GlobSet:
    """The globs of a bundle, in order; `matching(path)` answers the indices of those that
    match. Built once per compiled bundle.

    The set's DFA may run out of memory on some text; RE2 then answers no match at all,
    which for a deny rule would fail open. A last expression that matches every text tells a
    real "none" from that failure, and on failure each glob's own RE2 expression (which
    falls back to RE2's NFA itself: still linear, still exact) answers instead."""

    def __init__(self, globs: Sequence[PathGlob]) -> None:
        self.globs = tuple(globs)
        self._sources = [translate(glob) for glob in self.globs]
        self._options = re2.Options()
        self._options.max_mem = _MAX_MEM
        self._options.log_errors = False
        self._set = re2.Set.FullMatchSet(self._options)
        for source in self._sources:
            self._set.Add(source)
        self._sentinel = self._set.Add(r"(?s).*")
        self._set.Compile()
        self._singles: list[re2._Regexp] | None = None

    def matching(self, path: SplitPath) -> frozenset[int]:
        if not self.globs:
            return frozenset()
        encoded = encode(path)
        if encoded is None:  # not a document's path: the automata answer
            return frozenset(i for i, glob in enumerate(self.globs) if glob.matches_split(path))
        found = self._set.Match(encoded) or ()
        if self._sentinel in found:
            return frozenset(i for i in found if i != self._sentinel)
        return self.one_by_one(encoded)

    def one_by_one(self, encoded: str) -> frozenset[int]:
        """Each glob's expression on its own (the answer when the set's DFA gave up)."""
        if self._singles is None:
            self._singles = [re2.compile(source, self._options) for source in self._sources]
        return frozenset(i for i, single in enumerate(self._singles) if single.fullmatch(encoded))
