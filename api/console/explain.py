"""What the console says about a record beside its raw fields: why a receipt cites nothing,
which rule redacted a snippet, each cited part's own rank by score, what an `AccessDenied`
denied, and an entry's fields as a page. Plain functions over signed payloads and read-model
views; they name paths only to a caller who may see the document, and never read text."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from ledger.usecases.scopes import RESTRICTED_SCOPE
from ledger.usecases.visibility import may_see

MAX_FIELD_CHARS = 300  # a payload value longer than this is left to the raw JSON below it


def _score(entry: Mapping[str, Any]) -> Decimal | None:
    try:
        return Decimal(str(entry["score"])) if entry.get("score") is not None else None
    except InvalidOperation:
        return None


def score_ranks(entries: Sequence[Mapping[str, Any]]) -> list[int | None]:
    """Each entry's rank by its own score (1 = highest), in the receipt's order: a file's parts
    are listed in reading order under the citation, so the order alone does not rank them."""
    scored = sorted(
        ((s, i) for i, e in enumerate(entries) if (s := _score(e)) is not None), key=lambda p: (-p[0], p[1])
    )
    ranks: list[int | None] = [None] * len(entries)
    for rank, (_, index) in enumerate(scored, start=1):
        ranks[index] = rank
    return ranks


def redactions(filters: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Chunk id -> the rule that redacted its snippet."""
    return {str(f["chunk_id"]): str(f["rule_id"]) for f in filters if f.get("action") == "redact"}


def empty_receipt(payload: Mapping[str, Any], filters: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Why a receipt cites nothing, from what it recorded: where the search looked, the rule
    that withheld the matches, how many parts the task's scopes could not see, and the gaps
    those facts leave open (the words that matched nothing are in the sealed search answer)."""
    search = payload.get("search") or {}
    roots = list(search.get("target_roots") or [])
    narrowed = search.get("filters") or {}
    denies = list(dict.fromkeys(str(f["rule_id"]) for f in filters if f.get("action") == "deny"))
    withheld = payload.get("withheld") or 0
    gaps: list[str] = []
    if roots:
        gaps.append(f"only {', '.join(roots)} was searched: a document elsewhere was not considered")
    if narrowed.get("path_prefixes") or narrowed.get("sensitivity"):
        gaps.append("the search was narrowed by its filters")
    if denies:
        gaps.append(f"policy rule {', '.join(denies)} withheld every match it applied to")
    if withheld:
        gaps.append(f"{withheld} part(s) were out of the task's scopes")
    if not gaps and payload.get("status") == "no_hit":
        gaps.append("no document in the corpus at that position matched enough of the question")
    return {
        "status": payload.get("status"),
        "target_roots": roots,
        "filters": narrowed,
        "rules": denies,
        "withheld": withheld,
        "top_k": search.get("top_k"),
        "corpus_position": search.get("corpus_position"),
        "gaps": gaps,
    }


def denial(payload: Mapping[str, Any], path: str | None, sensitivity: str | None, scopes: Any) -> str:
    """One line saying what an `AccessDenied` entry denied: the resource, its path when the reader
    may see the document, the reason and the scope it needed (never the text)."""
    kind = str(payload.get("resource_type", "resource"))
    what = f"{kind} {str(payload.get('resource_id', ''))[:16]}"
    if path is not None and (sensitivity is None or may_see(scopes, sensitivity)):
        what += f" of {path}"
    elif path is not None:
        what += f" of a restricted document (its path needs {RESTRICTED_SCOPE})"
    reason = str(payload.get("reason", "")).replace("_", " ")
    return f"{what}: {reason}; needs {payload.get('required_scope', '-')}"


def fields(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    """An entry's payload as (name, value) rows: nested objects flattened with dotted names,
    short lists joined, sealed values and long ones pointed to the raw JSON."""
    rows: list[tuple[str, str]] = []
    if isinstance(value, Mapping):
        if "ciphertext" in value:
            return [(prefix, "sealed (ciphertext)")]
        for key, inner in value.items():
            rows += fields(inner, f"{prefix}.{key}" if prefix else str(key))
        return rows
    if isinstance(value, list):
        if not value:
            return [(prefix, "none")]
        if all(not isinstance(v, Mapping | list) for v in value):
            text = ", ".join(str(v) for v in value)
            return [
                (prefix, text if len(text) <= MAX_FIELD_CHARS else f"{len(value)} values (see the raw entry)")
            ]
        return [(prefix, f"{len(value)} item(s) (see the raw entry)")]
    text = "-" if value is None else str(value)
    return [(prefix, text if len(text) <= MAX_FIELD_CHARS else f"{len(text)} characters (see the raw entry)")]
