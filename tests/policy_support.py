"""The worst policy bundles for cost tests and `scripts/bench_search_policy.py`: 500 rules
and 2,000 patterns (the limits), wildcard-heavy patterns with no literal segment to rule them
out cheaply, deny rules first (a denied candidate does not fill a search's window, so a
search judges every candidate)."""

from __future__ import annotations

import json

from ledger.policy.policy_rules import MAX_BUNDLE_PATTERNS, MAX_BUNDLE_WILDCARDS, MAX_RULES
from ledger.usecases.policy import MAX_PUBLISHED_BUNDLE_BYTES

_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_ACTIONS = ["redact", "allow", "boost\n    factor: '1.1'", "downrank\n    factor: '0.9'"]


def _heavy(i: int) -> tuple[str, int]:
    """A pattern of 16 wildcards (14 for the last shape), and its count."""
    c, d = _LETTERS[i % 26], _LETTERS[(i // 26) % 26]
    return [
        ("*" + "*".join(c * 15) + "*", 16),
        ("/".join(["**", f"*{c}*"] * 5) + "/**", 16),
        ("/".join(["*"] * 16), 16),
        (f"**/?*/**/*{d}?/**/*?*/**/*?{c}*", 14),
    ][i % 4]


def _deny(i: int) -> list[tuple[str, int]]:
    c, d = _LETTERS[i % 26], _LETTERS[(i + 7) % 26]
    return [(f"**/*{c}*?*?*?*?*?*?*", 15), (f"**/*{c}*{d}*", 4), (f"*/*{c}*", 3), (f"**/?*{c}*", 4)]


def worst_bundle(tag: str, wildcard_budget: int | None = MAX_BUNDLE_WILDCARDS) -> str:
    """`wildcard_budget` None: every pattern wildcard-heavy (what the limits allowed before
    `max_bundle_wildcards` and the published-bundle byte limit); else heavy patterns until the
    budget is spent, then literal ones, and rules only while the bundle fits the byte limit a
    receipt's entry leaves it (`MAX_PUBLISHED_BUNDLE_BYTES`): the worst bundle publishing admits."""
    left = wildcard_budget
    lines = [f"version: worst-{tag}", "rules:"]
    per_rule = MAX_BUNDLE_PATTERNS // MAX_RULES
    number = 0
    for i in range(MAX_RULES):
        patterns = []
        wanted = _deny(i) if i < 5 else [_heavy(number + j) for j in range(per_rule)]
        for pattern, count in wanted:
            number += 1
            if left is not None and count > left:
                pattern, count = f"lit{number}/{_LETTERS[i % 26]}/n{number}.md", 0
            if left is not None:
                left -= count
            patterns.append(pattern)
        action = "deny" if i < 5 else _ACTIONS[i % 4]
        rule = [f"  - id: r{i}-{tag}", f"    action: {action}"]  # new ids: nothing cached
        rule.append(f"    match: {{paths: [{', '.join(repr(p) for p in patterns)}]}}")
        if wildcard_budget is not None and _entry_bytes([*lines, *rule]) > MAX_PUBLISHED_BUNDLE_BYTES:
            break
        lines += rule
    return "\n".join(lines) + "\n"


def _entry_bytes(lines: list[str]) -> int:
    # As a log entry holds the YAML: a JSON string, escaped (the publish check measures the same).
    return len(json.dumps("\n".join(lines) + "\n", ensure_ascii=False).encode("utf-8")) - 2
