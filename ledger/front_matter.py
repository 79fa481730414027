"""Per-file rules: a markdown file's YAML front matter may narrow its source's sensitivity
and retention, never widen them.

Front matter is the block between a first line `---` and the next `---` (or `...`), at most
`MAX_FRONT_MATTER_BYTES`, read with the bounded loader of `ledger.policy_yaml`. Only `sensitivity` and
`retention_days` mean anything to the ledger; other keys are left alone. The block stays in
the recorded text (it is part of the file: the content hash and every line number stay the
file's own, so a locator points at the line an auditor opens).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ledger.events import MAX_RETENTION_DAYS
from ledger.policy_yaml import BundleLimitError, load_bundle_yaml

MAX_FRONT_MATTER_BYTES = 4096
SENSITIVITY_RANK = {"public": 0, "internal": 1, "restricted": 2}
DEFAULT_SENSITIVITY = "internal"


class FrontMatterRefused(ValueError):
    """The file's front matter cannot be used; `reason` is the sync's skip reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class FileRules:
    """A file's effective sensitivity and retention, and which rule set each: `source`
    (`sources add --sensitivity/--retention-days`), `front_matter`, or `default`."""

    sensitivity: str
    sensitivity_origin: str
    retention_days: int | None
    retention_origin: str


def front_matter(text: str) -> dict[str, Any]:
    """The front matter mapping ({} when the file has none). Raises FrontMatterRefused."""
    if not text.startswith("---\n") and not text.startswith("---\r\n"):
        return {}
    lines = text.splitlines(keepends=True)
    size = len(lines[0])
    for index, line in enumerate(lines[1:], start=1):
        size += len(line.encode("utf-8"))
        if size > MAX_FRONT_MATTER_BYTES:
            raise FrontMatterRefused(
                "bad_front_matter", f"front matter longer than {MAX_FRONT_MATTER_BYTES} bytes"
            )
        if line.rstrip("\r\n") in ("---", "..."):
            block = "".join(lines[1:index])
            break
    else:
        return {}  # a rule line, not front matter: no closing marker
    try:
        # The bounded loader of policy bundles: a file's author is not trusted either (no
        # aliases, so no "billion laughs" in 4 KiB; nodes, depth and sizes bounded).
        value = load_bundle_yaml(block)
    except BundleLimitError as exc:
        raise FrontMatterRefused("bad_front_matter", f"front matter: {exc}"[:200]) from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise FrontMatterRefused("bad_front_matter", "front matter is not a mapping")
    return value


def file_rules(
    text: str, source_sensitivity: str | None, source_retention_days: int | None, default_retention_days: int
) -> FileRules:
    """The rules a synced file gets: its source's, narrowed by its front matter. Raises
    FrontMatterRefused (`bad_front_matter`, `front_matter_widens`)."""
    front = front_matter(text)
    sensitivity = source_sensitivity or DEFAULT_SENSITIVITY
    sensitivity_origin = "source" if source_sensitivity else "default"
    asked = front.get("sensitivity")
    if asked is not None:
        if asked not in SENSITIVITY_RANK:
            raise FrontMatterRefused("bad_front_matter", "sensitivity must be public, internal or restricted")
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
        if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_RETENTION_DAYS:
            raise FrontMatterRefused(
                "bad_front_matter", f"retention_days must be a whole number from 1 to {MAX_RETENTION_DAYS}"
            )
        ceiling = source_retention_days or default_retention_days
        if days > ceiling:
            raise FrontMatterRefused(
                "front_matter_widens",
                f"front matter retention_days {days} is longer than the source's {ceiling}",
            )
        if days != retention:
            retention, retention_origin = days, "front_matter"
    return FileRules(sensitivity, sensitivity_origin, retention, retention_origin)
