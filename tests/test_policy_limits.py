"""The pieces under the policy hardening, on their own: path globs agree with the wcmatch
globs bundles were written for (so a replay under an old snapshot decides the same way),
the bounded YAML loader refuses before expanding, a deadline is either claimed by a write
or expired by its waiter, never both, and CPU-heavy loading stops at the deadline."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wcmatch import glob

from ledger.deadline import Deadline, DeadlineExceeded
from ledger.policy.glob_set import GlobSet, encode
from ledger.policy.path_glob import GlobError, compile_glob, split_path
from ledger.policy.policy_yaml import BundleLimitError, load_bundle_yaml

_WCMATCH = glob.GLOBSTAR | glob.DOTGLOB
_SEGMENT = st.one_of(st.just("**"), st.text(alphabet="ab.*?!{},-", min_size=1, max_size=5))
_PATTERN = st.builds(
    lambda absolute, segments: ("/" if absolute else "") + "/".join(segments),
    st.booleans(),
    st.lists(_SEGMENT, min_size=1, max_size=5),
)
_PATH = st.text(alphabet="ab./!{", max_size=14)


@settings(max_examples=3_000, suppress_health_check=list(HealthCheck), deadline=None)
@given(_PATTERN, _PATH)
def test_globs_match_exactly_what_wcmatch_matched(pattern: str, path: str) -> None:
    try:
        compiled = compile_glob(pattern)
    except GlobError:
        return
    assert compiled.matches(path) == glob.globmatch(path, pattern, flags=_WCMATCH), (pattern, path)


@settings(max_examples=3_000, suppress_health_check=list(HealthCheck), deadline=None)
@given(
    st.lists(_PATTERN, min_size=1, max_size=4), st.one_of(_PATH, st.text("ab./é\n *?\x01\ud800", max_size=14))
)
def test_a_bundles_globs_in_one_re2_set_match_exactly_what_wcmatch_matched(
    patterns: list[str], path: str
) -> None:
    # The set answers for all of a bundle's patterns at once (linear time); it must agree
    # with the automata and wcmatch glob by glob, and so must its one-by-one fallback.
    globs = []
    for pattern in patterns:
        try:
            globs.append(compile_glob(pattern))
        except GlobError:
            continue
    if not globs:
        return
    expected = frozenset(i for i, compiled in enumerate(globs) if glob_wcmatch(path, compiled.pattern))
    matcher = GlobSet(globs)
    split = split_path(path)
    assert matcher.matching(split) == expected, (patterns, path)
    encoded = encode(split)
    if encoded is not None:
        assert matcher.one_by_one(encoded) == expected, (patterns, path)


def glob_wcmatch(path: str, pattern: str) -> bool:
    """wcmatch, the reference. Its own patterns end in `$`, which Python's `re` also matches
    before a final newline, so it takes a segment ".\n" for "." (and refuses to span it). A
    newline is a plain character to a glob (the generated patterns hold none), so it is asked
    about the same path with another plain character in its place."""
    return bool(glob.globmatch(path.replace("\n", "\x02"), pattern, flags=_WCMATCH))


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("hr/**", "hr", False),  # a trailing /** needs something after its folder
        ("hr/**", "hr/", True),
        ("hr/**", "hr/./a", False),  # ** never spans . or ..
        ("hr/**", "hr/.git/a", True),  # hidden folders are spanned (DOTGLOB)
        ("a/**/b", "a/b", True),
        ("**/b", "/b", True),
        ("*", "..", False),
        (".*", "..", True),
        ("a/b", "a//b/", True),
        ("finance/*.md", "finance/2026/q3.md", False),
        ("**", ".\n", True),  # a name, not "." (wcmatch alone says otherwise: see glob_wcmatch)
    ],
)
def test_glob_corners(pattern: str, path: str, expected: bool) -> None:
    assert compile_glob(pattern).matches(path) is expected
    assert glob_wcmatch(path, pattern) is expected


def test_a_glob_that_backtracks_in_wcmatch_is_answered_here() -> None:
    # wcmatch needs O(n^k) steps for k globstars; here at most segments x segments tests.
    pattern = "/".join(["**", "a"] * 7) + "/b"
    assert not compile_glob(pattern).matches("a/" * 500 + "c")
    assert compile_glob(pattern).matches("a/" * 500 + "b")


@pytest.mark.parametrize(
    ("pattern", "limit"),
    [
        ("a" * 257, "max_glob_chars"),
        ("/".join("a" * 17), "max_glob_segments"),
        ("*a" * 17, "max_glob_wildcards"),
        ("hr/[ab]", "glob_syntax"),
        ("hr\\*", "glob_syntax"),
        ("hr//a", "glob_syntax"),
        ("hr/", "glob_syntax"),
    ],
)
def test_globs_outside_the_limits_are_refused_naming_them(pattern: str, limit: str) -> None:
    with pytest.raises(GlobError, match=limit):
        compile_glob(pattern)


def test_an_alias_bomb_is_refused_at_its_first_anchor() -> None:
    bomb = (
        "a: &a ["
        + ",".join(["x"] * 9)
        + "]\n"
        + "".join(
            f"{b}: &{b} [{','.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi", strict=True)
        )
    )
    with pytest.raises(BundleLimitError, match="no_aliases") as refused:
        load_bundle_yaml(bomb)
    assert refused.value.limit == "no_aliases" and "line 1" in str(refused.value)
    # Merge keys need an alias too: refused the same way, not expanded.
    with pytest.raises(BundleLimitError, match="no_aliases"):
        load_bundle_yaml("base: &b {x: 1}\nrule: {<<: *b}\n")


@pytest.mark.parametrize(
    "text",
    [
        "a: \x91\n",
        "a: [1\n",
        "a: 1\n---\nb: 2\n",
        "a: !!python/name:os.system x\n",
        "a: !!int x\n",
        "a: !!bool x\n",
        "a: !!timestamp 2020-13-45\n",
    ],
)
def test_text_that_is_not_safe_yaml_is_a_refusal_not_a_crash(text: str) -> None:
    with pytest.raises(BundleLimitError, match="does not parse as YAML"):
        load_bundle_yaml(text)


def test_loading_stops_at_the_deadline() -> None:
    passed = Deadline(0.0)
    with pytest.raises(DeadlineExceeded):
        load_bundle_yaml("x: [" + ",".join("1" for _ in range(1_000)) + "]\n", passed)
    assert not passed.claim()  # stopped work has expired its deadline: it can never write


def _race(deadline: Deadline) -> dict[str, bool]:
    """`claim` and `expire` called at the same moment from two threads."""
    start, results = threading.Barrier(2), {}

    def run(name: str, step: Callable[[], bool]) -> None:
        start.wait()
        results[name] = step()

    threads = [
        threading.Thread(target=run, args=("claim", deadline.claim)),
        threading.Thread(target=run, args=("expire", deadline.expire)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_claim_and_expire_exclude_each_other_under_a_race() -> None:
    for _ in range(200):
        deadline = Deadline(60.0)
        results = _race(deadline)
        assert results["claim"] != results["expire"]  # exactly one side wins
        assert deadline.claim() is results["claim"] and deadline.expire() is results["expire"]  # for good


def test_a_passed_deadline_cannot_be_claimed_and_a_claimed_one_never_expires() -> None:
    passed = Deadline(0.0)
    assert not passed.claim() and passed.expire()
    claimed = Deadline(0.0)
    fresh = Deadline(60.0)
    assert fresh.claim() and not fresh.expire()
    fresh.check()  # claimed work is owed its answer: the cooperative check lets it finish
    with pytest.raises(DeadlineExceeded):
        claimed.check()
