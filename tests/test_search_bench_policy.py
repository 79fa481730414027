"""`scripts/bench_search.py` publishes "the largest policy the limits allow" and times searches
under it. Its policy once grew past a limit set later (15,500 wildcards against
`MAX_BUNDLE_WILDCARDS` 4,000) and the benchmark stopped in its policy step: the policy must
publish through the product's own check and use the limits to the full."""

from __future__ import annotations

import json

import yaml

from bootstrap import ledger_context
from ledger.policy.policy_rules import (
    MAX_BUNDLE_PATTERNS,
    MAX_BUNDLE_WILDCARDS,
    MAX_RULES,
    bundle_wildcards,
    rules_from_bundle,
)
from ledger.schemas.requests import PolicyBundleIn, SearchIn
from ledger.usecases.context import Caller
from ledger.usecases.policy import MAX_PUBLISHED_BUNDLE_BYTES, publish_policy
from ledger.usecases.search import search
from ledger.writing.application import Ledger
from scripts.bench_search import largest_policy
from tests.test_search import ACME

ADMIN = Caller("acme", "bench-admin", frozenset({"admin"}))


def test_the_benchmarks_largest_policy_is_at_the_limits_and_publishes(ledger: Ledger) -> None:
    text = largest_policy()
    rules = rules_from_bundle(yaml.safe_load(text)).rules
    assert len(rules) == MAX_RULES
    assert sum(len(rule.globs) for rule in rules) == MAX_BUNDLE_PATTERNS
    assert bundle_wildcards(rules) == MAX_BUNDLE_WILDCARDS
    # With the run's tag the benchmark appends, still within the published-bundle bytes.
    tagged = f"{text}# size 10000\n"
    assert len(json.dumps(tagged, ensure_ascii=False).encode("utf-8")) - 2 <= MAX_PUBLISHED_BUNDLE_BYTES
    ctx = ledger_context(ledger)
    published = publish_policy(ctx, ADMIN, PolicyBundleIn(bundle_yaml=tagged)).body
    assert published["policy_version"] == "largest"
    body = search(ctx, ACME, SearchIn.model_validate({"input": {"query": "salary bands", "top_k": 5}})).body
    assert body["status"] == "no_hit"  # an empty corpus, searched under the published policy
    receipt = ledger.get(body["position"])
    assert receipt is not None
    assert receipt.payload["policy_snapshot"]["bundle_hash"] == published["bundle_sha256"]
