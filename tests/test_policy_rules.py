"""Policy bundle rules: parsing refusals name the rule, and the verdict on a chunk
follows the documented order (first deny/allow wins, factors multiply, redact marks)."""

from __future__ import annotations

import decimal

import pytest
import yaml

from ledger.policy.policy_rules import NO_POLICY, ChunkFacts, PolicyRuleError, rules_from_bundle
from ledger.usecases.errors import Invalid
from ledger.usecases.policy import bundle_rules

BUNDLE = """
version: pol-1
limits: {max_top_k: 7}
rules:
  - id: hr-private
    action: deny
    match: {paths: ["hr/**"]}
  - id: restricted-scope
    action: deny
    match: {sensitivity: [restricted]}
    unless_scope: knowledge.restricted.read
  - id: public-ok
    action: allow
    match: {sensitivity: [public]}
  - id: handbook-first
    action: boost
    factor: "1.5"
    match: {paths: ["handbook/**"]}
  - id: drafts-last
    action: downrank
    factor: "0.5"
    match: {paths: ["**/drafts/**"]}
  - id: finance-redact
    action: redact
    match: {paths: ["finance/*.md"]}
"""


def chunk(path: str, sensitivity: str = "internal") -> ChunkFacts:
    return ChunkFacts(chunk_id="c1", document_id="d1", path=path, sensitivity=sensitivity)


def test_verdicts_follow_rule_order() -> None:
    rules = rules_from_bundle(yaml.safe_load(BUNDLE))
    assert rules.max_top_k == 7
    none: frozenset[str] = frozenset()

    hr = rules.judge(chunk("hr/pay.md", "public"), none)
    assert hr.denied and hr.applied == (("hr-private", "deny"),)  # first access rule wins over public-ok

    restricted = rules.judge(chunk("kb/a.md", "restricted"), none)
    assert restricted.denied and restricted.applied == (("restricted-scope", "deny"),)
    scoped = rules.judge(chunk("kb/a.md", "restricted"), frozenset({"knowledge.restricted.read"}))
    assert not scoped.denied and scoped.applied == ()

    boosted = rules.judge(chunk("handbook/drafts/x.md"), none)
    assert boosted.factor == decimal.Decimal("0.75")
    assert boosted.applied == (("handbook-first", "boost"), ("drafts-last", "downrank"))
    assert rules.judge(chunk("drafts/x.md"), none).factor == decimal.Decimal("0.5")  # ** spans zero segments

    finance = rules.judge(chunk("finance/q3.md"), none)
    assert finance.redacted and not finance.denied
    assert not rules.judge(chunk("finance/2026/q3.md"), none).redacted  # * stays in one segment


def test_no_policy_allows_everything_unchanged() -> None:
    verdict = NO_POLICY.judge(chunk("hr/pay.md", "restricted"), frozenset())
    assert not verdict.denied and not verdict.redacted and verdict.factor == 1 and verdict.applied == ()


@pytest.mark.parametrize(
    ("rules_yaml", "names"),
    [
        ("rules: {}", "rules: must be a list"),
        ("rules: [{action: deny}]", "rules[0].id"),
        ("rules: [{id: a, action: explode}]", "rules[0].action"),
        ("rules: [{id: a, action: boost}]", "rules[0].factor"),
        ("rules: [{id: a, action: boost, factor: 1.5}]", "rules[0].factor"),  # a float, not a decimal string
        ("rules: [{id: a, action: downrank, factor: '2'}]", "rules[0].factor"),
        ("rules: [{id: a, action: deny, factor: '2'}]", "rules[0].factor"),
        ("rules: [{id: a, action: deny, match: {sensitivity: [secret]}}]", "rules[0].match.sensitivity"),
        ("rules: [{id: a, action: deny, match: {owner: bob}}]", "rules[0].match"),
        ("rules: [{id: a, action: deny, colour: red}]", "rules[0]: unknown field"),
        ("rules: [{id: a, action: deny}, {id: a, action: allow}]", "unique"),
        ("limits: {max_top_k: 0}", "limits.max_top_k"),
        ("limits: {max_top_k: true}", "limits.max_top_k"),
    ],
)
def test_bad_rules_are_refused_naming_the_field(rules_yaml: str, names: str) -> None:
    with pytest.raises(PolicyRuleError, match=names.replace("[", r"\[").replace("]", r"\]")):
        rules_from_bundle(yaml.safe_load(rules_yaml))
    with pytest.raises(Invalid) as refused:  # publishing refuses it the same way (422)
        bundle_rules(rules_yaml)
    assert refused.value.code == "invalid_policy_bundle"
