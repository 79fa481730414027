"""Document paths as people read them: one spelling per name, and nothing in a name that hides,
reorders or imitates the path's structure. Pure: every place a path enters (the commands'
path types, so `POST /v1/documents`, uploads, MCP and search roots; the source scanner; policy
globs) calls `normalise` and `path_problem`.

- Unicode has two spellings of `é` (one code point, or `e` + a combining accent); file systems
  keep whichever they were given. A path is stored in NFC, so both name one document.
- Refused, each with its own rule name (the 422 code, the sync's skip reason):
  `bidi_control` (U+202E and the other Bidi_Control characters reorder what a reader sees:
  `txt.md` can display as `dm.txt`); `invisible_character` (format characters such as
  U+200B zero-width space and U+200D joiner, the other default-ignorable code points, line and
  paragraph separators, lone surrogates, U+2800 blank);
  `unusual_space` (a space other than U+0020: U+00A0, U+3000, ...);
  `lookalike_separator` (a character that reads as `/`, `\\` or `.` but is not one: U+FF0F, U+2215,
  U+2044, the dot leaders U+2024-U+2026, ...); `segment_whitespace` (a name that begins or
  ends with a space: `a.md ` beside `a.md`).
- Unassigned and private-use code points stay allowed (they show, as a box at worst, and this
  Python's Unicode tables are older than the newest emoji), except the ones Unicode reserves
  as default-ignorable.
- Letters of other scripts stay allowed (`а` Cyrillic beside `a` Latin): telling them apart is
  a script question, not a path-structure one, and documents are named in every script.
"""

from __future__ import annotations

import unicodedata

BIDI_CONTROL = "bidi_control"
INVISIBLE_CHARACTER = "invisible_character"
UNUSUAL_SPACE = "unusual_space"
LOOKALIKE_SEPARATOR = "lookalike_separator"
SEGMENT_WHITESPACE = "segment_whitespace"
PATH_RULES = frozenset(
    {BIDI_CONTROL, INVISIBLE_CHARACTER, UNUSUAL_SPACE, LOOKALIKE_SEPARATOR, SEGMENT_WHITESPACE}
)

# Unicode's Bidi_Control property (PropList.txt): ALM, LRM, RLM, LRE..RLO, LRI..PDI.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# Default_Ignorable_Code_Point (DerivedCoreProperties.txt) outside category Cf, its reserved
# (unassigned) parts included, plus U+2800, which renders as blank.
_IGNORABLE = (
    frozenset([0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180F, 0x2065])
    | frozenset([0x2800, 0x3164, 0xFFA0])
    | frozenset(range(0xFE00, 0xFE10))
    | frozenset(range(0xFFF0, 0xFFF9))
    | frozenset(range(0xE0000, 0xE1000))
)
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
# Characters that read as `/`, `\` or `.` with no compatibility mapping to them (so NFKC does
# not reveal them): the symbols among Unicode's confusables (confusables.txt) of the three.
_LOOKALIKES = frozenset(
    "\u2041\u2044\u2215\u2571\u27cb\u29f8\u1735\u0337\u0338"  # / (and the overlays that draw one)
    "\u2216\u2572\u27cd\u29f5\u29f9"  # \
    "\u0701\u0702\ua60e\U00010a50\U0001d16d"  # .
)
_STRUCTURE = frozenset("/\\.")


def normalise(path: str) -> str:
    """The one spelling a path is stored and compared in (NFC)."""
    return unicodedata.normalize("NFC", path)


def _character_problem(char: str) -> tuple[str, str] | None:
    point = f"U+{ord(char):04X}"
    if char in _BIDI:
        return BIDI_CONTROL, f"must not contain bidirectional control characters ({point})"
    category = unicodedata.category(char)
    if category == "Zs" and char != " ":
        return UNUSUAL_SPACE, f"must not contain spaces other than U+0020 ({point})"
    if category in _INVISIBLE_CATEGORIES or ord(char) in _IGNORABLE:
        return INVISIBLE_CHARACTER, f"must not contain invisible characters ({point})"
    if char in _LOOKALIKES or (
        ord(char) > 0x7F and _STRUCTURE.intersection(unicodedata.normalize("NFKC", char))
    ):
        return LOOKALIKE_SEPARATOR, f"must not contain characters that imitate /, \\ or . ({point})"
    return None


def path_problem(path: str, *, whole_names: bool = True) -> tuple[str, str] | None:
    """(rule, message) for the first thing that makes `path` (already NFC) deceptive, or None.
    The message names the rule and the code point, never the path. `whole_names`: each segment
    is a complete name (a document path), so none may begin or end with a space; a prefix may
    end inside a name."""
    for char in path:
        if char.isascii() and char.isprintable():
            continue  # the common case; ASCII controls are the control-character rule's
        problem = _character_problem(char)
        if problem is not None:
            return problem
    if whole_names:
        segments = path.split("/")
        if any(segment != segment.strip(" ") for segment in segments):
            return SEGMENT_WHITESPACE, "must not have a name that begins or ends with a space"
    return None
