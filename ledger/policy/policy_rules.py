"""Policy bundle rules: what a bundle's YAML says about which chunks a search may
return, and how it ranks them. Pure functions over plain values, so a search and
its replay (under a receipt's frozen `policy_snapshot`) decide the same way.

A bundle is a YAML mapping; its `rules` are checked in order against each
candidate chunk:

    version: pol-2026-11
    limits: {max_top_k: 10}
    rules:
      - id: hr-private            # access rules: the first matching deny/allow wins
        action: deny
        match: {paths: ["hr/**"], sensitivity: [restricted]}
      - id: restricted-scope      # deny unless the task carries the scope
        action: deny
        match: {sensitivity: [restricted]}
        unless_scope: knowledge.restricted.read
      - id: handbook-first        # ranking rules: factors multiply
        action: boost
        factor: "1.5"
        match: {paths: ["handbook/**"]}
      - id: drafts-last
        action: downrank
        factor: "0.5"
        match: {paths: ["**/drafts/**"]}
      - id: no-salary-snippets    # the chunk may rank, its snippet is withheld
        action: redact
        match: {paths: ["finance/**"]}

Within `match`, every given condition must hold; a list matches when any of its
items does. Paths are glob patterns (`*` within a segment, `**` across
segments; `ledger.policy.path_glob`, compiled once per bundle and matched without
backtracking) against the document's path. A rule without `match` matches every
chunk. Factors are decimal strings, never floats, so the same bundle gives the
same scores on every machine.

Judging one chunk costs one linear pass of RE2 over its path for all the patterns
together (`RuleMatcher`, remembered per path), then one test per rule (`MAX_RULES`).
"""

from __future__ import annotations

import decimal
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ledger.domain.fields import IDENTIFIER_PATTERN, MAX_TOP_K
from ledger.domain.path_names import normalise, path_problem
from ledger.policy.glob_set import GlobSet
from ledger.policy.path_glob import GlobError, PathGlob, SplitPath, compile_glob, split_path

RuleAction = Literal["deny", "allow", "boost", "downrank", "redact"]
_ACTIONS: frozenset[str] = frozenset({"deny", "allow", "boost", "downrank", "redact"})
_SENSITIVITIES = frozenset({"public", "internal", "restricted"})
_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)
_FACTOR = re.compile(r"^\d{1,6}(\.\d{1,6})?$")
MAX_RULES = 500
MAX_PATTERNS_PER_RULE = 64
MAX_BUNDLE_PATTERNS = 2_000  # path patterns in all rules together
# Wildcards (`*`, `?`, `**`) in all patterns together, checked when a bundle is published
# (bundles recorded before still load): set from the measured cost of judging a path
# (docs/benchmarks/search.md, "worst allowed bundle"). 2,000 patterns of 16 wildcards cost
# ~15 ms a new path even in one RE2 pass; 4,000 wildcards in all ~1 ms.
MAX_BUNDLE_WILDCARDS = 4_000


def bundle_wildcards(rules: Sequence[Rule]) -> int:
    return sum(glob.wildcards for rule in rules for glob in rule.globs)


class PolicyRuleError(ValueError):
    """A bundle's rules do not follow the format; the message names the rule and field."""


@dataclass(frozen=True)
class ChunkFacts:
    """What a rule may look at: metadata only, never the chunk's text."""

    chunk_id: str
    document_id: str
    path: str
    sensitivity: str


@dataclass(frozen=True)
class Rule:
    rule_id: str
    action: RuleAction
    paths: tuple[str, ...] = ()
    sensitivity: frozenset[str] = frozenset()
    unless_scope: str | None = None
    factor: decimal.Decimal = decimal.Decimal(1)
    globs: tuple[PathGlob, ...] = field(default=(), compare=False)  # `paths`, compiled

    def __post_init__(self) -> None:
        if len(self.globs) != len(self.paths):  # built without its compiled paths
            object.__setattr__(self, "globs", tuple(compile_glob(pattern) for pattern in self.paths))

    def matches(
        self,
        chunk: ChunkFacts,
        scopes: frozenset[str],
        path: SplitPath | None = None,
        paths_match: bool | None = None,
    ) -> bool:
        """`paths_match`: whether one of `paths` matches, when the caller already knows."""
        if self.unless_scope is not None and self.unless_scope in scopes:
            return False
        if self.sensitivity and chunk.sensitivity not in self.sensitivity:
            return False
        if not self.globs:
            return True
        if paths_match is not None:
            return paths_match
        split = path if path is not None else split_path(chunk.path)
        return any(glob.matches_split(split) for glob in self.globs)


@dataclass(frozen=True)
class Verdict:
    """A policy's decision on one chunk, and the rules that took effect (in rule order)."""

    denied: bool = False
    redacted: bool = False
    factor: decimal.Decimal = decimal.Decimal(1)
    applied: tuple[tuple[str, RuleAction], ...] = ()


class RuleMatcher:
    """Which rules' path patterns match a path: every pattern of the bundle in one RE2 pass
    (`ledger.policy.glob_set`), remembered per path (a path's answer never changes under a bundle).
    The RE2 set is built when first needed (after a publish is recorded, or by the first
    search of a process), not while the bundle is checked: a publish's checks stay as fast
    as they were."""

    _REMEMBERED = 100_000

    def __init__(self, rules: Sequence[Rule]) -> None:
        self._globs = [glob for rule in rules for glob in rule.globs]
        self._rule_of = [index for index, rule in enumerate(rules) for _ in rule.globs]
        self.pathless = frozenset(index for index, rule in enumerate(rules) if not rule.globs)
        self._set: GlobSet | None = None
        self._lock = threading.Lock()
        self._known: dict[str, frozenset[int]] = {}
        self._answers: dict[frozenset[int], frozenset[int]] = {}

    def _glob_set(self) -> GlobSet:
        with self._lock:
            if self._set is None:
                self._set = GlobSet(self._globs)
            return self._set

    def rules_matching(self, path: str, split: SplitPath) -> frozenset[int]:
        known = self._known.get(path)
        if known is None:
            matched = self._glob_set().matching(split) if self._globs else frozenset()
            known = frozenset(self._rule_of[i] for i in matched)
            if len(self._known) >= self._REMEMBERED:
                self._known.clear()
                self._answers.clear()
            # Many paths share an answer: one object each (memory ~ paths, not paths x rules).
            known = self._answers.setdefault(known, known)
            self._known[path] = known
        return known


@dataclass(frozen=True)
class PolicyRules:
    rules: tuple[Rule, ...] = ()
    max_top_k: int = MAX_TOP_K
    sha256: str | None = field(default=None, compare=False)
    declared_version: str | None = field(default=None, compare=False)  # the bundle's `version`
    matcher: RuleMatcher = field(init=False, compare=False, repr=False)
    _hash: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "matcher", RuleMatcher(self.rules))
        # Searches key their verdict cache by the rules: hashing 500 rules each time cost ~0.3 ms.
        object.__setattr__(self, "_hash", hash((self.rules, self.max_top_k)))

    def __hash__(self) -> int:
        return self._hash

    def judge(self, chunk: ChunkFacts, scopes: frozenset[str]) -> Verdict:
        access_decided = denied = redacted = False
        factor = decimal.Decimal(1)
        applied: list[tuple[str, RuleAction]] = []
        path = split_path(chunk.path)  # once for every pattern of every rule
        # Only the rules whose paths match (or that name none) can apply: in rule order.
        matching = self.matcher.rules_matching(chunk.path, path) | self.matcher.pathless
        for index in sorted(matching):
            rule = self.rules[index]
            if not rule.matches(chunk, scopes, path, True):
                continue
            if rule.action in ("deny", "allow"):
                if access_decided:
                    continue
                access_decided = True
                denied = rule.action == "deny"
            elif rule.action == "redact":
                redacted = True
            else:
                factor *= rule.factor
            applied.append((rule.rule_id, rule.action))
        return Verdict(denied=denied, redacted=redacted, factor=factor, applied=tuple(applied))


NO_POLICY = PolicyRules()


def rules_from_bundle(bundle: Mapping[str, Any]) -> PolicyRules:
    """The rules of a parsed bundle (see `ledger.usecases.policy.parse_bundle`)."""
    raw_rules = bundle.get("rules", [])
    if raw_rules is None:
        raw_rules = []
    if not isinstance(raw_rules, list):
        raise PolicyRuleError("rules: must be a list")
    if len(raw_rules) > MAX_RULES:
        raise PolicyRuleError(f"rules: limit max_rules: at most {MAX_RULES} rules")
    patterns = sum(len(_match_paths(raw)) for raw in raw_rules)
    if patterns > MAX_BUNDLE_PATTERNS:
        raise PolicyRuleError(
            f"rules: limit max_patterns: at most {MAX_BUNDLE_PATTERNS} path patterns in all"
        )
    rules = tuple(_rule(index, raw) for index, raw in enumerate(raw_rules))
    ids = [rule.rule_id for rule in rules]
    if len(set(ids)) != len(ids):
        raise PolicyRuleError("rules: rule ids must be unique")
    declared = bundle.get("version") or bundle.get("policy_version")
    return PolicyRules(
        rules=rules,
        max_top_k=_max_top_k(bundle.get("limits")),
        declared_version=str(declared) if declared is not None else None,
    )


def _match_paths(raw: Any) -> list[Any]:
    """The path patterns a raw rule lists, for counting before anything is compiled."""
    match = raw.get("match") if isinstance(raw, dict) else None
    paths = match.get("paths") if isinstance(match, dict) else None
    return paths if isinstance(paths, list) else []


def _max_top_k(limits: Any) -> int:
    if limits is None:
        return MAX_TOP_K
    if not isinstance(limits, dict) or set(limits) - {"max_top_k"}:
        raise PolicyRuleError("limits: only max_top_k is supported")
    value = limits.get("max_top_k", MAX_TOP_K)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOP_K:
        raise PolicyRuleError(f"limits.max_top_k: an integer from 1 to {MAX_TOP_K}")
    return value


def _rule(index: int, raw: Any) -> Rule:
    where = f"rules[{index}]"
    if not isinstance(raw, dict):
        raise PolicyRuleError(f"{where}: must be a mapping")
    unknown = set(raw) - {"id", "action", "match", "unless_scope", "factor", "description"}
    if unknown:
        raise PolicyRuleError(f"{where}: unknown field {sorted(map(str, unknown))[0]!r}")
    rule_id = raw.get("id")
    if not isinstance(rule_id, str) or not _IDENTIFIER.match(rule_id):
        raise PolicyRuleError(f"{where}.id: an identifier ({IDENTIFIER_PATTERN})")
    action = raw.get("action")
    if action not in _ACTIONS:
        raise PolicyRuleError(f"{where}.action: one of {', '.join(sorted(_ACTIONS))}")
    match = raw.get("match") or {}
    if not isinstance(match, dict) or set(match) - {"paths", "sensitivity"}:
        raise PolicyRuleError(f"{where}.match: a mapping of paths and/or sensitivity")
    # Stored paths are NFC (`ledger.domain.path_names`): a glob typed in NFD would silently match nothing.
    paths = [normalise(p) for p in _strings(match.get("paths", []), f"{where}.match.paths")]
    globs = []
    for number, pattern in enumerate(paths):
        if (problem := path_problem(pattern, whole_names=False)) is not None:
            raise PolicyRuleError(f"{where}.match.paths[{number}]: {problem[0]}: a glob {problem[1]}")
        try:
            globs.append(compile_glob(pattern))
        except GlobError as exc:
            raise PolicyRuleError(f"{where}.match.paths[{number}]: {exc}") from None
    sensitivity = _strings(match.get("sensitivity", []), f"{where}.match.sensitivity")
    if set(sensitivity) - _SENSITIVITIES:
        raise PolicyRuleError(f"{where}.match.sensitivity: each one of public, internal, restricted")
    unless_scope = raw.get("unless_scope")
    if unless_scope is not None and (
        not isinstance(unless_scope, str) or not _IDENTIFIER.match(unless_scope)
    ):
        raise PolicyRuleError(f"{where}.unless_scope: a scope name")
    factor = decimal.Decimal(1)
    if action in ("boost", "downrank"):
        text = raw.get("factor")
        if not isinstance(text, str) or not _FACTOR.match(text):
            raise PolicyRuleError(f'{where}.factor: a decimal string such as "1.5"')
        factor = decimal.Decimal(text)
        if (action == "boost" and factor < 1) or (action == "downrank" and not 0 <= factor <= 1):
            raise PolicyRuleError(f"{where}.factor: a boost is >= 1, a downrank between 0 and 1")
    elif "factor" in raw:
        raise PolicyRuleError(f"{where}.factor: only boost and downrank take a factor")
    return Rule(
        rule_id=rule_id,
        action=action,
        paths=tuple(paths),
        sensitivity=frozenset(sensitivity),
        unless_scope=unless_scope,
        factor=factor,
        globs=tuple(globs),
    )


def _strings(value: Any, where: str) -> Sequence[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise PolicyRuleError(f"{where}: a list of non-empty strings")
    if len(value) > MAX_PATTERNS_PER_RULE:
        raise PolicyRuleError(f"{where}: limit max_patterns_per_rule: at most {MAX_PATTERNS_PER_RULE} items")
    return value
