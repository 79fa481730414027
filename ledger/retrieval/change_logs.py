"""Change logs, and questions about changes: `citeledger-bm25@9`'s two judgements
(`ledger.usecases.ranking_v9`), pure functions of a path and of a question.

A change log is a list of unrelated entries, one per change: one entry that holds a
question's words says the project once changed that, not how to do it. A document is one
when its file is named as change logs are (CHANGELOG, CHANGES, HISTORY, NEWS, release notes,
an upgrading or migration guide, which is organised by version too; case, `-`, `_` and
spaces ignored, any extension) or when it sits in a folder named for them (`history/`,
`releases/`, `changelog/`, ...). A question asks about changes when it names a version
number or uses a word of releases and upgrades (`CHANGE_WORDS`, as search terms).

Both lists are `@9`'s rule: a receipt ranked under it replays under the same lists, so a
later change to them is a new engine, never an edit here.
"""

from __future__ import annotations

import re

from ledger.retrieval.search_text import query_terms, scoring_stem

# File names (before the first dot, folded by `_folded_name`) that are change logs.
CHANGE_LOG_FILES = frozenset(
    {
        "changelog",
        "changes",
        "history",
        "news",
        "releasenotes",
        "whatsnew",
        "oldchangelog",
        "changelogold",
        "upgrading",
        "migrating",
        "migration",
        "migrations",
    }
)
# Folders whose every file is a change log (release notes one file per version).
CHANGE_LOG_FOLDERS = frozenset({"changelog", "changelogs", "history", "releases", "releasenotes", "news"})
# The words by which a question asks what changed between versions (as search terms). Not "added"
# or "removed": their stems are the everyday verbs of how-to questions ("add a css class").
CHANGE_WORDS = frozenset(
    stem
    for word in (
        "version versions release releases released changelog history upgrade upgrading upgraded "
        "deprecated deprecation dropped migrate migrating migration"
    ).split()
    if (stem := scoring_stem(word)) is not None
)
_NOT_NAME = re.compile(r"[-_\s]+")


def _folded_name(name: str) -> str:
    return _NOT_NAME.sub("", name.lower())


def is_change_log(path: str) -> bool:
    """Whether the document at `path` (`/`-separated, relative to its source) is a change log."""
    *folders, file = path.split("/")
    if _folded_name(file.split(".", 1)[0]) in CHANGE_LOG_FILES:
        return True
    return any(_folded_name(folder) in CHANGE_LOG_FOLDERS for folder in folders)


def asks_about_changes(query: str) -> bool:
    """Whether the question names a version number or asks about releases and upgrades."""
    return any(term.text in CHANGE_WORDS or term.text.isdigit() for term in query_terms(query))
