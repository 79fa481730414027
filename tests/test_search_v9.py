"""`citeledger-bm25@9` (issue 32, round 12): `@8` whose change logs weigh half unless the
question asks about changes. A CHANGELOG entry that holds a how-to question's words closely
ranks above the guide that answers under `@8` and below it under `@9`; a question about
versions keeps the change log first; the discount is a part of the citation's reason."""

from __future__ import annotations

import pytest

from bootstrap import ledger_context
from ledger.retrieval.change_logs import asks_about_changes, is_change_log
from ledger.usecases.context import Caller, UseCaseContext
from ledger.usecases.ranking import ENGINE
from ledger.usecases.replay import replay
from ledger.usecases.search_run import ENGINE_V8, ENGINE_V9, ENGINE_V10, SearchRun
from ledger.writing.application import Ledger
from tests.test_search import _search, corpus_context
from tests.test_search_v5 import _run  # a page of 10

FILES = {
    "CHANGELOG.md": "# Changelog\n\n"
    + "".join(
        f"## 2.{minor}.0\n\n- The exporter writes {topic} faster.\n\n"
        for minor, topic in enumerate(["csv files", "json lines", "parquet", "spreadsheets"])
    )
    + "## 2.4.0\n\n- Rotate signing keys without downtime.\n",
    "docs/keys.md": "# Managing keys\n\nThe ledger signs every entry with its signing key, kept on disk. "
    "To rotate the signing keys, run the rotation command; verifiers keep accepting the old key "
    "for a day, so nothing stops while the new signing key takes over. Back up the keys first.\n",
    "docs/export.md": "# Exports\n\nThe exporter writes csv files and json lines.\n",
}
# The near-rule's case (`ranking_v8`): two known words of five, together in a change log entry
# (first under `@8`), scattered in the guide that `@9`'s order puts first.
FILLER = " ".join(f"w{i}" for i in range(30))
NEAR_FILES = {
    "CHANGES.md": "# Changes\n\n"
    + "".join(f"## 1.{minor}.0\n\n- Faster startup on day {minor}.\n\n" for minor in range(4))
    + "## 1.4.0\n\n- A session no longer stops at an interactive prompt.\n",
    "docs/sessions.md": "# Sessions\n\nA session is interactive when stdin is a terminal, and an "
    f"interactive session reads from it. {FILLER}. Answer the prompt to continue.\n",
    **{
        f"notes/day-{d}.md": f"# Day {d}\n\nThe services ran and the logs were read on day {d}.\n"
        for d in range(6)
    },
}
NEAR_QUESTION = "jenkins gitlab hangs on an interactive prompt"
HOW_TO = "rotate the signing keys without downtime"
ABOUT_CHANGES = "which version can rotate signing keys without downtime"
CALLER = Caller("acme", "svc-search", frozenset({"retrieval.write", "replay.run"}))
pytestmark = pytest.mark.parametrize("backend", ["sqlite"])  # the index's view, alike on both stores


@pytest.fixture
def ctx(ledger: Ledger) -> UseCaseContext:
    return corpus_context(ledger, FILES)


def _paths(run: SearchRun) -> list[str]:
    return list(dict.fromkeys(hit.path for hit in run.hits))


def test_a_change_log_entry_ranks_below_the_guide_under_at9(ctx: UseCaseContext) -> None:
    assert ENGINE == ENGINE_V10  # `@10` orders pages as `@9`
    assert _paths(_run(ctx, HOW_TO, ENGINE_V8))[:2] == ["CHANGELOG.md", "docs/keys.md"]
    at9 = _run(ctx, HOW_TO, ENGINE_V9)
    assert _paths(at9)[:2] == ["docs/keys.md", "CHANGELOG.md"]
    # The discount is the change log's own part of its reason; the parts still sum to the score.
    for hit in at9.hits:
        parts = dict(hit.score_breakdown)
        assert ("change_log" in parts) == (hit.path == "CHANGELOG.md")
        assert abs(sum(float(v) for v in parts.values()) - float(hit.score)) < 1e-5
    [entry] = [h for h in at9.hits if h.path == "CHANGELOG.md"]
    values = {k: float(v) for k, v in entry.score_breakdown}
    assert values["change_log"] < 0 and abs(values["change_log"] + float(entry.score)) < 1e-5  # half


def test_a_question_about_versions_keeps_the_change_log_at_its_weight(ctx: UseCaseContext) -> None:
    at8, at9 = _run(ctx, ABOUT_CHANGES, ENGINE_V8), _run(ctx, ABOUT_CHANGES, ENGINE_V9)
    assert _paths(at9)[0] == "CHANGELOG.md"
    assert [(h.chunk_id, h.score) for h in at9.hits] == [(h.chunk_id, h.score) for h in at8.hits]


def test_whether_a_page_is_shown_is_at8s_decision_over_at8s_order(ledger: Ledger) -> None:
    """The change-log discount orders the page; it never turns `@8`'s answer into a `no_hit`
    (`@8`'s near-rule reads its first-ranked file, here the change log)."""
    ctx = corpus_context(ledger, NEAR_FILES)
    at8, at9 = _run(ctx, NEAR_QUESTION, ENGINE_V8), _run(ctx, NEAR_QUESTION, ENGINE_V9)
    assert at8.status == "ok" and _paths(at8)[0] == "CHANGES.md"
    assert at9.status == "ok" and _paths(at9)[:2] == ["docs/sessions.md", "CHANGES.md"]


def test_a_live_at9_receipt_replays_with_the_same_context(ledger: Ledger) -> None:
    ctx = corpus_context(ledger, FILES)
    searched = _search(ledger_context(ledger), CALLER, HOW_TO, top_k=3)
    assert [c["path"] for c in searched["output"]["citations"]][:2] == ["docs/keys.md", "CHANGELOG.md"]
    body = replay(ctx, CALLER, searched["receipt_id"]).body
    assert body["engine"] == ENGINE_V10 and body["integrity"] == "ok"
    assert body["diff"]["data_drift"]["context_hash"]["changed"] is False


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("CHANGELOG.md", True),
        ("CHANGES.rst", True),
        ("docs/HISTORY.md", True),
        ("NEWS", True),
        ("docs/Release Notes.md", True),
        ("docs/whats_new.rst", True),
        (".github/OLD_CHANGELOG.md", True),
        ("docs/upgrading.rst", True),
        ("docs/history/hatch.md", True),
        ("docs/about/releases/9.0.md", True),
        ("docs/gauging_changes.md", False),
        ("docs/contributing/release_process.md", False),
        ("docs/news-feed/setup.md", False),
        ("docs/keys.md", False),
    ],
)
def test_which_paths_are_change_logs(path: str, expected: bool, backend: str) -> None:
    assert is_change_log(path) is expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("when was support for python 3.7 dropped", True),
        ("what changed when upgrading", True),
        ("which release deprecated the old api", True),
        ("add a css class to a heading", False),
        ("remove html comments from the output", False),
        ("rotate the signing keys", False),
    ],
)
def test_which_questions_ask_about_changes(query: str, expected: bool, backend: str) -> None:
    assert asks_about_changes(query) is expected
