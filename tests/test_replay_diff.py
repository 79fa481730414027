"""The diff envelope as pure functions: matching by chunk id and by (rule_id, chunk_id, action)."""

from __future__ import annotations

from typing import Any

from ledger.retrieval.replay_diff import Outcome, diff, summary


def _entry(chunk: str, score: str) -> dict[str, Any]:
    return {
        "chunk_id": chunk,
        "document_id": "doc-" + chunk,
        "path": f"docs/{chunk}.md",
        "score": score,
        "locator": {"start_line": 1, "end_line": 2},
    }


def test_reranked_entry_is_common_with_old_and_new_rank_and_score() -> None:
    before = Outcome("a" * 64, (_entry("c1", "2.0"), _entry("c2", "1.0"), _entry("c3", "0.5")), ())
    after = Outcome("b" * 64, (_entry("c2", "3.0"), _entry("c1", "2.0"), _entry("c4", "0.1")), ())
    envelope = diff(before, after)
    assert envelope["context_hash"] == {"original": "a" * 64, "replay": "b" * 64, "changed": True}
    entries = envelope["selected_entries"]
    assert [(e["chunk_id"], e["rank"]) for e in entries["added"]] == [("c4", 3)]
    assert [(e["chunk_id"], e["rank"], e["score"]) for e in entries["removed"]] == [("c3", 3, "0.5")]
    assert entries["common"] == 2
    moved = {e["chunk_id"]: e for e in entries["common_entries"]}
    assert (moved["c1"]["old_rank"], moved["c1"]["new_rank"], moved["c1"]["moved"]) == (1, 2, True)
    assert (moved["c2"]["old_score"], moved["c2"]["new_score"]) == ("1.0", "3.0")
    assert entries["added"][0]["locator"] == {"start_line": 1, "end_line": 2}


def test_filters_match_on_rule_chunk_and_action() -> None:
    before = Outcome("a" * 64, (), (("r1", "c1", "deny"), ("r2", "c2", "boost")))
    after = Outcome("a" * 64, (), (("r1", "c1", "deny"), ("r2", "c2", "downrank"), ("r3", "c9", "redact")))
    envelope = diff(before, after)
    assert envelope["context_hash"]["changed"] is False
    assert envelope["filters_applied"]["added"] == [
        {"rule_id": "r2", "chunk_id": "c2", "action": "downrank"},
        {"rule_id": "r3", "chunk_id": "c9", "action": "redact"},
    ]
    assert envelope["filters_applied"]["removed"] == [{"rule_id": "r2", "chunk_id": "c2", "action": "boost"}]
    counts = summary(envelope)
    assert (counts.filters_added, counts.filters_removed, counts.entries_common) == (2, 1, 0)


def test_identical_outcomes_have_an_empty_diff() -> None:
    same = Outcome("c" * 64, (_entry("c1", "1.5"),), (("r1", "c1", "boost"),))
    envelope = diff(same, same)
    assert envelope["selected_entries"]["added"] == envelope["selected_entries"]["removed"] == []
    assert envelope["selected_entries"]["common_entries"][0]["moved"] is False
    assert envelope["filters_applied"] == {"added": [], "removed": []}
    assert summary(envelope).context_hash_changed is False


def test_score_movement_alone_is_reported_apart_from_membership_order_and_text() -> None:
    before = Outcome("a" * 64, (_entry("c1", "2.0"), _entry("c2", "1.0")), ())
    after = Outcome("a" * 64, (_entry("c1", "2.5"), _entry("c2", "1.0")), ())
    envelope = diff(before, after)
    assert envelope["changes"] == {"membership": False, "order": False, "text": False, "scores": True}
    assert envelope["score_changes"] == [
        {"chunk_id": "c1", "path": "docs/c1.md", "old_score": "2.0", "new_score": "2.5"}
    ]
    first = envelope["selected_entries"]["common_entries"][0]
    assert (first["moved"], first["score_changed"]) == (False, True)


def test_order_is_the_relative_order_of_common_entries() -> None:
    before = Outcome("a" * 64, (_entry("c0", "3.0"), _entry("c1", "2.0"), _entry("c2", "1.0")), ())
    dropped = Outcome("b" * 64, (_entry("c1", "2.0"), _entry("c2", "1.0")), ())
    # c1 and c2 move up a rank when c0 leaves, but keep their order: membership only.
    assert diff(before, dropped)["changes"] == {
        "membership": True,
        "order": False,
        "text": False,
        "scores": False,
    }
    swapped = Outcome("b" * 64, (_entry("c0", "3.0"), _entry("c2", "2.5"), _entry("c1", "2.0")), ())
    changes = diff(before, swapped)["changes"]
    assert (changes["membership"], changes["order"], changes["text"]) == (False, True, False)


def test_an_edited_section_and_a_new_snippet_span_are_text_changes() -> None:
    old = {**_entry("c1", "2.0"), "document_id": "doc-a", "snippet_span": {"start": 0, "end": 10}}
    new = {**_entry("c9", "2.0"), "document_id": "doc-a", "snippet_span": [0, 12]}
    edited = diff(Outcome("a" * 64, (old,), ()), Outcome("b" * 64, (new,), ()))["changes"]
    assert (edited["membership"], edited["text"]) == (True, True)
    respanned = {**old, "snippet_span": [2, 10]}
    changes = diff(Outcome("a" * 64, (old,), ()), Outcome("b" * 64, (respanned,), ()))["changes"]
    assert (changes["membership"], changes["text"]) == (False, True)
    other_document = {**_entry("c9", "2.0"), "document_id": "doc-b"}
    changes = diff(Outcome("a" * 64, (old,), ()), Outcome("b" * 64, (other_document,), ()))["changes"]
    assert (changes["membership"], changes["text"]) == (True, False)
