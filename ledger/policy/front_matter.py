"""Per-file rules: a markdown file's YAML front matter may narrow its source's sensitivity
and retention, never widen them.

Front matter fails closed: a file that looks as if it opens front matter is either read
completely or skipped with a reason, never recorded under its source's (weaker) rules.
It opens when the first line that is not blank (after an optional byte-order mark) is `---`
(trailing spaces allowed); it closes at the next line that is `---` or `...` at the start
of the line, within `MAX_FRONT_MATTER_BYTES`. Refused (`bad_front_matter`): an opener that
never closes, a first line starting with `---` that is not the opener alone, TOML front
matter (`+++`), YAML the bounded loader of `ledger.policy.policy_yaml` refuses (aliases, a key
given twice, merge keys), a block that is not a mapping, keys that are not text, a key
that looks like a ledger key but is not spelt as one (`Sensitivity`, `retention-days`,
`retention`, a ledger key nested below another key), and values of the wrong type or out
of range (`FrontMatterFields`). Other keys (title, tags, ...) are the file's own, left
alone. The block stays in the recorded text (it is part of the file: the content hash and
every line number stay the file's own, so a locator points at the line an auditor opens).
Messages name keys and types, never a value (values are document text).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ledger.domain.fields import MAX_RETENTION_DAYS
from ledger.policy.policy_yaml import BundleLimitError, load_bundle_yaml

MAX_FRONT_MATTER_BYTES = 4096
SENSITIVITY_RANK = {"public": 0, "internal": 1, "restricted": 2}
DEFAULT_SENSITIVITY = "internal"
LEDGER_KEYS = ("sensitivity", "retention_days")
# Keys an author may have meant as a ledger rule; read as nothing, they would fail open.
_MEANT_AS_RULES = frozenset(
    {"retention", "retain", "classification", "confidentiality", "restricted", "citeledger", "ledger"}
)
_SHOWN_KEY = re.compile(r"^[A-Za-z0-9_. -]{1,40}$")
BAD = "bad_front_matter"


class FrontMatterRefused(ValueError):
    """The file's front matter cannot be used; `reason` is the sync's skip reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class FrontMatterFields(BaseModel):
    """The keys the ledger reads, their types and allowed values (strict: `"30"` is not a
    number of days, `true` is not one, `Restricted` is not a sensitivity)."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    sensitivity: Literal["public", "internal", "restricted"] | None = None
    retention_days: int | None = Field(default=None, ge=1, le=MAX_RETENTION_DAYS)

    @field_validator("sensitivity", "retention_days", mode="before")
    @classmethod
    def _not_empty(cls, value: Any) -> Any:
        if value is None:  # `sensitivity:` with nothing after it: asked for, but what?
            raise ValueError("is empty")
        return value


@dataclass(frozen=True)
class FileRules:
    """A file's effective sensitivity and retention, and which rule set each: `source`
    (`sources add --sensitivity/--retention-days`), `front_matter`, or `default`."""

    sensitivity: str
    sensitivity_origin: str
    retention_days: int | None
    retention_origin: str


def _block(text: str) -> str | None:
    """The YAML between the markers, None when the file has no front matter."""
    lines = text.removeprefix("\ufeff").splitlines(keepends=True)
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return None
    opener = lines[first].strip()
    if opener == "+++":
        raise FrontMatterRefused(
            BAD, "TOML front matter (+++) is not read; write it as YAML between --- lines"
        )
    if not opener.startswith("---"):
        return None
    if opener != "---":
        raise FrontMatterRefused(BAD, "front matter must open with a line holding --- alone")
    size = 0
    for index in range(first + 1, len(lines)):
        line = lines[index]
        size += len(line.encode("utf-8", "surrogatepass"))
        if size > MAX_FRONT_MATTER_BYTES:
            break
        # Closing markers start the line: an indented `---` belongs to a block scalar.
        if line.rstrip() in ("---", "..."):
            return "".join(lines[first + 1 : index])
    if size > MAX_FRONT_MATTER_BYTES:
        raise FrontMatterRefused(BAD, f"front matter longer than {MAX_FRONT_MATTER_BYTES} bytes")
    raise FrontMatterRefused(BAD, "front matter opened with --- is never closed (--- or ...)")


def _name(key: str) -> str:
    return repr(key) if _SHOWN_KEY.match(key) else "a key"


def _normal(key: str) -> str:
    return re.sub(r"[^a-z0-9]", "", key.casefold())


def _looks_like_a_rule(key: str) -> bool:
    normal = _normal(key)
    targets = [_normal(k) for k in LEDGER_KEYS]
    if normal in _MEANT_AS_RULES or normal.startswith(("sensitiv", "retention")):
        return True
    return bool(difflib.get_close_matches(normal, targets, n=1, cutoff=0.75))


def _nested_keys(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for key, inner in value.items():
            yield key
            yield from _nested_keys(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _nested_keys(inner)


def front_matter(text: str) -> dict[str, Any]:
    """The front matter mapping ({} when the file has none). Raises FrontMatterRefused."""
    block = _block(text)
    if block is None:
        return {}
    try:
        # The bounded loader of policy bundles: a file's author is not trusted either (no
        # aliases, so no "billion laughs" in 4 KiB; nodes, depth and sizes bounded).
        value = load_bundle_yaml(block, unique_keys=True)
    except BundleLimitError as exc:
        raise FrontMatterRefused(BAD, f"front matter: {exc}"[:200]) from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise FrontMatterRefused(BAD, f"front matter is not a mapping (a {_kind(value)})")
    for key, inner in value.items():
        if not isinstance(key, str):
            raise FrontMatterRefused(BAD, f"front matter keys must be text (a {_kind(key)} key)")
        if key not in LEDGER_KEYS and _looks_like_a_rule(key):
            raise FrontMatterRefused(
                BAD,
                f"front matter key {_name(key)} is not read; the ledger reads sensitivity and retention_days",
            )
        for nested in _nested_keys(inner):
            if isinstance(nested, str) and (nested in LEDGER_KEYS or _looks_like_a_rule(nested)):
                raise FrontMatterRefused(
                    BAD,
                    f"front matter key {_name(nested)} under {_name(key)} is not read: rules are top-level",
                )
    try:
        FrontMatterFields.model_validate(value)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(map(str, error["loc"]))
        raise FrontMatterRefused(BAD, f"front matter {field}: {_message(field, error['msg'])}") from None
    return value


def _message(field: str, pydantic_message: str) -> str:
    if field == "sensitivity" and "empty" not in pydantic_message:
        return "must be one of public, internal, restricted (lower case, a single value)"
    if field == "retention_days" and "empty" not in pydantic_message:
        return f"must be a whole number of days from 1 to {MAX_RETENTION_DAYS}"
    return pydantic_message.removeprefix("Value error, ")


def _kind(value: Any) -> str:
    kinds: dict[type, str] = {dict: "mapping", list: "list", str: "string"}
    return kinds.get(type(value), type(value).__name__)


def file_rules(
    text: str, source_sensitivity: str | None, source_retention_days: int | None, default_retention_days: int
) -> FileRules:
    """The rules a synced file gets: its source's, narrowed by its front matter. Raises
    FrontMatterRefused (`bad_front_matter`, `front_matter_widens`)."""
    front = front_matter(text)
    sensitivity = source_sensitivity or DEFAULT_SENSITIVITY
    sensitivity_origin = "source" if source_sensitivity else "default"
    asked = front.get("sensitivity")  # types and values checked by `FrontMatterFields`
    if asked is not None:
        if SENSITIVITY_RANK[asked] < SENSITIVITY_RANK[sensitivity]:
            raise FrontMatterRefused(
                "front_matter_widens",
                f"front matter sensitivity {asked} is wider than the source's {sensitivity}",
            )
        if asked != sensitivity:
            sensitivity, sensitivity_origin = asked, "front_matter"
    retention = source_retention_days
    retention_origin = "source" if source_retention_days else "default"
    days = front.get("retention_days")
    if days is not None:
        ceiling = source_retention_days or default_retention_days
        if days > ceiling:
            raise FrontMatterRefused(
                "front_matter_widens",
                f"front matter retention_days {days} is longer than the source's {ceiling}",
            )
        if days != retention:
            retention, retention_origin = days, "front_matter"
    return FileRules(sensitivity, sensitivity_origin, retention, retention_origin)
