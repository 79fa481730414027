"""The field types request bodies are made of, each carrying its rules once: size bounds,
whole numbers for JSON's one number type, no control characters (prose may hold tab, line feed
and carriage return), and document paths as relative `/`-separated names. A field breaking a
text rule fails with an error type of `RULE_ERRORS`: well formed, refused by a ledger rule (422).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import (
    BeforeValidator,
    Field,
    StringConstraints,
)
from pydantic_core import PydanticCustomError

from ledger.domain.fields import (
    MAX_SEALED_TEXT_BYTES,
    MAX_TOP_K,
    DeadlineMs,
    Identifier,
    RetentionDays,
    SourcePath,
)
from ledger.domain.path_names import PATH_RULES, normalise, path_problem

MAX_DOCUMENT_CHARS = 2 * 1024 * 1024
MAX_QUERY_CHARS = 16 * 1024
MAX_SNIPPET_CHARS = MAX_SEALED_TEXT_BYTES
MAX_SEARCH_QUERY_CHARS = 2_000
MAX_HOLD_TARGETS = 1_000
MAX_LEGAL_BASIS_CHARS = 4_000


def _whole(value: object) -> object:
    # JSON has one number type: 5.0 is the integer 5, as JSON Schema's `integer` says; 5.5, "5"
    # and true stay refused by the strict model.
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
        return int(value)
    return value


# The bounds come before the validator: placed after it, pydantic cannot attach them to the
# integer and publishes them as raw `ge`/`le` keys no JSON Schema reader knows.
Days = Annotated[RetentionDays, BeforeValidator(_whole)]
Milliseconds = Annotated[DeadlineMs, BeforeValidator(_whole)]
TopK = Annotated[int, Field(ge=1, le=MAX_TOP_K), BeforeValidator(_whole)]
Engine = Annotated[str, StringConstraints(pattern=r"^external:[a-z0-9._-]{1,64}$")]

# -- text rules ---------------------------------------------------------------------------
CONTROL_CHARACTER = "control_character"
UNSAFE_PATH = "unsafe_path"
RULE_ERRORS = frozenset({CONTROL_CHARACTER, UNSAFE_PATH, *PATH_RULES})

_CONTROLS = r"\x00-\x1f\x7f"
_PROSE_CONTROLS = r"\x00-\x08\x0b\x0c\x0e-\x1f\x7f"  # all but tab, line feed, carriage return
_CONTROL = re.compile(f"[{_CONTROLS}]")
_PROSE_CONTROL = re.compile(f"[{_PROSE_CONTROLS}]")


def _no_controls(value: object) -> object:
    # Before the field's own checks (strict type, pattern), so a control character is named
    # as such whatever else the field requires; a value that is no string is theirs to refuse.
    if isinstance(value, str) and _CONTROL.search(value):
        raise PydanticCustomError(
            CONTROL_CHARACTER, "must not contain control characters (U+0000-U+001F, U+007F)"
        )
    return value


def _prose_controls(value: object) -> object:
    if isinstance(value, str) and _PROSE_CONTROL.search(value):
        raise PydanticCustomError(
            CONTROL_CHARACTER,
            "must not contain control characters other than tab, line feed and carriage return",
        )
    return value


def unsafe_path_rule(path: str) -> str | None:
    """Why `path` is no relative path of `/`-separated names, or None: a document path is a
    label inside its source, never a way out of it (`..`), an absolute path or a Windows one."""
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path):
        return "must be relative (no leading / or drive letter)"
    if "\\" in path:
        return "must separate folders with /, not \\"
    if any(part in ("", ".", "..") for part in path.split("/")):
        return "must not have empty, . or .. segments"
    return None


def _document_path(value: object) -> object:
    value = _no_controls(value)
    if isinstance(value, str) and value:
        value = normalise(value)  # NFC: one spelling per name (`ledger.domain.path_names`)
        if (rule := unsafe_path_rule(value)) is not None:
            raise PydanticCustomError(UNSAFE_PATH, f"a document path {rule}")
        if (problem := path_problem(value)) is not None:
            raise PydanticCustomError(problem[0], f"a document path {problem[1]}")
    return value


def _folder_path(value: object) -> object:
    # A folder or prefix is compared with stored (NFC) paths: the same spelling and rules,
    # except that a prefix may end inside a name.
    value = _no_controls(value)
    if isinstance(value, str) and value:
        value = normalise(value)
        if (problem := path_problem(value, whole_names=False)) is not None:
            raise PydanticCustomError(problem[0], f"a path {problem[1]}")
    return value


_NO_CONTROLS = BeforeValidator(_no_controls)
PROSE = BeforeValidator(_prose_controls)
_NO_CONTROLS_SCHEMA = {"pattern": f"^[^{_CONTROLS}]*$"}
PROSE_SCHEMA = {"pattern": f"^[^{_PROSE_CONTROLS}]*$"}

Id = Annotated[Identifier, _NO_CONTROLS]
Label = Annotated[str, Field(max_length=256, json_schema_extra=_NO_CONTROLS_SCHEMA), _NO_CONTROLS]
FolderPath = Annotated[SourcePath, BeforeValidator(_folder_path)]  # the use case judges where it leads
DocumentPath = Annotated[
    SourcePath,
    Field(
        description="A relative path of /-separated names: no leading /, no \\, no empty, . or .. segment; "
        "stored in NFC; no invisible, bidirectional-control or look-alike /, \\ or . character, "
        "no name that begins or ends with a space"
    ),
    BeforeValidator(_document_path),
]


# Free text: lines and tabs, never other control characters. The size bounds come first:
# placed after the validator, pydantic would check them as a generic length, another error.
DocumentText = Annotated[
    str, Field(min_length=1, max_length=MAX_DOCUMENT_CHARS, json_schema_extra=PROSE_SCHEMA), PROSE
]
QueryText = Annotated[
    str, Field(min_length=1, max_length=MAX_QUERY_CHARS, json_schema_extra=PROSE_SCHEMA), PROSE
]
SearchQueryText = Annotated[
    str, Field(min_length=1, max_length=MAX_SEARCH_QUERY_CHARS, json_schema_extra=PROSE_SCHEMA), PROSE
]
SnippetText = Annotated[
    str, Field(min_length=1, max_length=MAX_SNIPPET_CHARS, json_schema_extra=PROSE_SCHEMA), PROSE
]
ExplanationText = Annotated[str, Field(max_length=4096, json_schema_extra=PROSE_SCHEMA), PROSE]
LegalBasisText = Annotated[
    str, Field(min_length=1, max_length=MAX_LEGAL_BASIS_CHARS, json_schema_extra=PROSE_SCHEMA), PROSE
]
BundleText = Annotated[
    str, Field(min_length=1, json_schema_extra=PROSE_SCHEMA), PROSE
]  # size: the use case's 413
