"""Path globs of policy rules, matched without backtracking.

The grammar is the one bundles have always used (wcmatch's `GLOBSTAR | DOTGLOB` globs):
`**` as a whole segment spans zero or more segments, `*` any characters within one segment,
`?` one character; everything else is literal. A segment that does not start with a literal
`.` never matches `.` or `..` (and `**` never spans them); a trailing `/**` needs something
after its folder. Character classes (`[...]`) and escapes (`\\`) are refused: they are the
corners where a hand-written matcher and wcmatch could disagree, and no bundle needs them.

Why not wcmatch's own matcher: it translates a glob to one regular expression in which each
`**` is a lazy loop, so k globstars against a path of n segments backtrack O(n^k) steps
(`**/a/**/a/**/a/**/b` against `a/a/.../c`: seconds at k = 6, forever beyond). Here a
pattern is compiled once into segment matchers, and a path is matched by following the set
of pattern positions it can be at (a non-deterministic automaton over segments): at most
segments(path) x segments(pattern) segment tests, each a regular expression without a
backtracking choice (each `*` chunk is found leftmost inside an atomic group, which is
enough because the chunks between stars have fixed lengths).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_GLOB_CHARS = 256
MAX_GLOB_SEGMENTS = 16
MAX_GLOB_WILDCARDS = 16  # `*`, `?` and `**` in one pattern
_DOT_SEGMENTS = frozenset({".", ".."})


class GlobError(ValueError):
    """A pattern outside the grammar or its limits; the message names the limit."""


@dataclass(frozen=True)
class _Segment:
    """One pattern segment without a globstar: a literal, or an anchored expression."""

    literal: str | None
    expression: re.Pattern[str] | None
    dot_literal: bool  # starts with a literal `.`: may match `.` and `..`
    text: str = ""  # the pattern's segment as written (`ledger.policy.glob_set` translates it)

    def matches(self, segment: str) -> bool:
        if segment == "":
            return self.literal == ""  # the root of an absolute path matches only itself
        if segment in _DOT_SEGMENTS and not self.dot_literal:
            return False
        if self.literal is not None:
            return segment == self.literal
        assert self.expression is not None
        return self.expression.match(segment) is not None


_GLOBSTAR = None  # a `**` segment in a compiled pattern


def _segment(text: str) -> _Segment:
    if "*" not in text and "?" not in text:
        return _Segment(text, None, text.startswith("."))
    chunks = re.split(r"\*+", text)
    parts = [re.escape(chunk).replace(r"\?", "[^/]").replace("?", "[^/]") for chunk in chunks]
    if len(parts) == 1:
        source = parts[0]
    else:
        middle = "".join(f"(?>.*?{part})" for part in parts[1:-1])
        source = f"{parts[0]}{middle}.*{parts[-1]}"
    return _Segment(None, re.compile(rf"\A{source}\Z", re.DOTALL), text.startswith("."), text)


@dataclass(frozen=True)
class SplitPath:
    """A path as globs see it, split once for all the patterns judging it."""

    parts: tuple[str, ...]  # segments; an absolute path starts with the empty root segment
    names: frozenset[str]
    trailing_slash: bool


def split_path(path: str) -> SplitPath:
    parts = [part for part in path.split("/") if part]
    if path.startswith("/"):
        parts.insert(0, "")
    return SplitPath(tuple(parts), frozenset(parts), path.endswith("/"))


@dataclass(frozen=True)
class PathGlob:
    """A compiled pattern; `matches(path)` costs at most segments x segments tests."""

    pattern: str
    segments: tuple[_Segment | None, ...]
    literals: frozenset[str]  # segments without wildcards: each must be one of the path's
    wildcards: int = field(default=0, compare=False)  # `*`, `?` and `**` in the pattern

    def matches(self, path: str) -> bool:
        return self.matches_split(split_path(path))

    def matches_split(self, path: SplitPath) -> bool:
        if not self.literals <= path.names:
            return False  # one set test rules out most patterns of a large policy
        parts, trailing_slash = path.parts, path.trailing_slash
        last = len(self.segments)
        # A trailing `/**` after a folder must span a segment or a trailing slash: its
        # state is split into "entered" (last - 1) and "spanned one" (last + 1).
        open_end = last > 1 and self.segments[-1] is _GLOBSTAR
        states = self._closure({0}, open_end)
        for part in parts:
            following: set[int] = set()
            for state in states:
                if state == last + 1 or (open_end and state == last - 1):
                    if part not in _DOT_SEGMENTS:
                        following.add(last + 1)
                    continue
                if state >= last:
                    continue
                segment = self.segments[state]
                if segment is _GLOBSTAR:
                    if part not in _DOT_SEGMENTS:
                        following.add(state)
                elif segment.matches(part):
                    following.add(state + 1)
            states = self._closure(following, open_end)
            if not states:
                return False
        if open_end:
            return last + 1 in states or (last - 1 in states and trailing_slash)
        return last in states

    def _closure(self, states: set[int], open_end: bool) -> set[int]:
        """Add the positions reachable by a `**` spanning nothing."""
        out = set(states)
        for state in sorted(states):
            index = state
            while index < len(self.segments) and self.segments[index] is _GLOBSTAR:
                if open_end and index == len(self.segments) - 1:
                    break
                index += 1
                out.add(index)
        return out


def compile_glob(pattern: str) -> PathGlob:
    """The pattern compiled for matching, or `GlobError` naming the limit it breaks."""
    if not pattern:
        raise GlobError("an empty pattern")
    if len(pattern) > MAX_GLOB_CHARS:
        raise GlobError(f"limit max_glob_chars: a pattern longer than {MAX_GLOB_CHARS} characters")
    if "[" in pattern or "\\" in pattern:
        raise GlobError("limit glob_syntax: character classes ([...]) and escapes (\\) are not supported")
    texts = pattern.split("/")
    absolute = texts[0] == "" and len(texts) > 1
    if absolute:
        texts = texts[1:]
    if any(text == "" for text in texts):
        raise GlobError("limit glob_syntax: an empty segment (// or a trailing /)")
    if len(texts) > MAX_GLOB_SEGMENTS:
        raise GlobError(f"limit max_glob_segments: more than {MAX_GLOB_SEGMENTS} segments")
    wildcards = sum(1 if text == "**" else len(re.findall(r"\*+|\?", text)) for text in texts)
    if wildcards > MAX_GLOB_WILDCARDS:
        raise GlobError(f"limit max_glob_wildcards: more than {MAX_GLOB_WILDCARDS} wildcards")
    segments: list[_Segment | None] = [_Segment("", None, False)] if absolute else []
    for text in texts:
        if text != "**":
            segments.append(_segment(text))
        elif not segments or segments[-1] is not _GLOBSTAR:  # `**/**` spans what `**` spans
            segments.append(_GLOBSTAR)
    literals = frozenset(s.literal for s in segments if s is not None and s.literal is not None)
    return PathGlob(pattern, tuple(segments), literals, wildcards)
