"""The worst bundle the limits allow costs searches little (issue 26 item 2): 500 rules,
2,000 patterns, 4,000 wildcards in all (`max_bundle_wildcards`, checked at publish), heavy
patterns with no literal segment to rule them out cheaply, deny rules first so a search
judges every candidate (`tests/policy_support.py`). All of a bundle's patterns are matched
in one RE2 pass per path (`ledger.policy.glob_set`), with the same verdicts as pattern by pattern,
and the tenant's paths are judged when the bundle is published, not by its searches.

On the old code a path cost ~30 ms to judge under this bundle (each pattern's automaton in
Python): the 300 paths below took ~9 s, and each search over the corpus below judged every
candidate (seconds each)."""

from __future__ import annotations

import time
from pathlib import Path

from ledger.config import LedgerConfig
from ledger.policy.path_glob import split_path
from ledger.policy.policy_rules import ChunkFacts, PolicyRules
from ledger.retrieval.source_registry import SourceRegistry
from ledger.retrieval.sources import SourceLimits
from ledger.usecases.policy import bundle_rules
from ledger.usecases.sources import add_source
from tests import loopback_http
from tests.api_support import LoopbackServer, api_config, make_tokens
from tests.policy_support import worst_bundle


def _reference(rules: PolicyRules, path: str, sensitivity: str) -> tuple[object, ...]:
    """The verdict as judged before: every rule's patterns by their own automata."""
    split = split_path(path)
    chunk = ChunkFacts("", "d", path, sensitivity)
    denied = redacted = decided = False
    applied = []
    for rule in rules.rules:
        if rule.sensitivity and sensitivity not in rule.sensitivity:
            continue
        if rule.globs and not any(glob.matches_split(split) for glob in rule.globs):
            continue
        if rule.action in ("deny", "allow"):
            if decided:
                continue
            decided, denied = True, rule.action == "deny"
        redacted = redacted or rule.action == "redact"
        applied.append((rule.rule_id, rule.action))
    verdict = rules.judge(chunk, frozenset())
    assert (verdict.denied, verdict.redacted, verdict.applied) == (denied, redacted, tuple(applied)), path
    return verdict.applied


def test_the_worst_allowed_bundle_judges_a_path_in_one_pass_with_the_same_verdict() -> None:
    # Every pattern wildcard-heavy (30,820 wildcards): what a bundle recorded before the
    # wildcard limit may hold; it still loads, and is still judged in one pass.
    rules = bundle_rules(worst_bundle("unit", None))
    assert len(rules.rules) == 500 and sum(len(r.globs) for r in rules.rules) == 2_000
    paths = [f"team-{i % 7}/notes {i}/q{i}-zebra-quiz-{i * 7}.md" for i in range(300)]
    started = time.monotonic()
    for path in paths:
        rules.judge(ChunkFacts("", "d", path, "internal"), frozenset())
    took = time.monotonic() - started
    assert took < 3.0, took  # ~0.1 ms a path once warm; ~30 ms a path before
    deep = "/".join("abcdefghijklmnop") + "/x.md"
    for path in [*paths[:25], deep, "/abs/olute.md", "a/./b.md", "hr/", ".hidden/.x"]:
        _reference(rules, path, "internal")


def test_searches_under_the_worst_allowed_bundle_stay_fast(
    ledger_config: LedgerConfig, tmp_path: Path
) -> None:
    root = (tmp_path / "notes").resolve()
    for i in range(240):
        folder = root / f"team-{i % 12}" / f"q{i % 5}"
        folder.mkdir(parents=True, exist_ok=True)
        word = f"w{i % 20}x"
        (folder / f"note-{i}-zebra.md").write_text(f"# Note {i}\n\nThe shared rota and {word} live here.\n")
    add_source(SourceRegistry(ledger_config.data_dir), SourceLimits(), "notes", str(root), "acme")
    # Parsing the 2,000-pattern YAML alone takes seconds on a loaded machine (as before):
    # a long deadline, so what is measured is the searches' time, not whether they 408.
    config = api_config(ledger_config, request_deadline_s=60.0)
    tokens = make_tokens(config)
    headers = {"Authorization": f"Bearer {tokens['admin']}"}
    with (
        LoopbackServer(config) as server,
        loopback_http.client(base_url=server.base_url, headers=headers, timeout=30) as http,
    ):
        assert http.post("/v1/sources/notes/sync").status_code == 200

        def searches() -> float:
            started = time.monotonic()
            for i in range(20):
                body = {"input": {"query": f"shared rota w{i}x", "top_k": 5}}
                answer = http.post("/v1/search", json=body)
                assert answer.status_code == 200, answer.text  # never a 408
            return time.monotonic() - started

        without = searches()
        # Past the bundle-wide wildcard limit: refused naming it, nothing written.
        ledger = server.app.state.services.ledger
        ledger.sync()
        head = ledger.size
        refused = http.post("/v1/policy-bundles", json={"bundle_yaml": worst_bundle("over", None)})
        assert refused.status_code == 422, refused.text
        assert "max_bundle_wildcards" in refused.json()["error"]["message"]
        ledger.sync()
        assert ledger.size == head
        published = http.post("/v1/policy-bundles", json={"bundle_yaml": worst_bundle("http")})
        assert published.status_code == 201, published.text
        under = searches()
        assert under < max(3.0, 4 * without), (under, without)
