"""Search quality on documentation the ranker was not written against: dev sets from the
markdown that Python packages ship in their sdists, the ledger's engines against whole-file
bm25s, in one run.

Each set is `scripts/eval_sets/<package>.yaml` (questions written before any ranker ran on
the corpus; `role: tuning` or `held_out`). The corpus is every `*.md` of the package's sdist,
fetched with `pip download --no-binary :all: --no-deps <package>==<version>` (the package
registry, nothing else) into `--cache`: nothing of the corpora is committed, the sets pin the
versions; a set may name other `suffixes` (pip and flask add `.rst`). Each set's `role` says
whether it was tuned on (every set some round has run is `tuning`; each file's comment says
since when) or is held out (written and committed before any ranker ran on it, run once). The
golden set (tests/golden over tests/corpus) is a tuning row too. Baselines: bm25s (Lucene
BM25) and rank-bm25 (BM25Okapi) over whole files, the ledger's tokenizer.

For every set and engine: recall@5 and MRR@10 over the answerable questions (distinct cited
paths, `top_k` 10), no_hit precision (of the `no_hit` answers, the share that are questions the
corpus does not answer) and no_hit recall (of those, the share answered `no_hit`), and the
misses. Whole-file bm25s (Lucene BM25, the ledger's tokenizer) never says `no_hit`.

    python scripts/eval_search.py [--sets click,click-word-forms,starlette,attrs,...,griffe]
        [--engines @3,@4] [--golden]
        [--cache ~/.cache/citeledger-eval] [--misses]
        [--variant no-forms|file-0.5|file-2.0|unknown-0.3|saturation-2.0|...]

`--variant` measures one of `@3`/`@4`'s choices against its alternative (tuning sets only):
`fusion-W` sets `@4`'s whole-file share (`ranking_v4.FUSION_WEIGHT`), `boost-G` `@7`'s scale
on the title, heading and file name boosts (`ranking_v7.FIELD_BOOST_SCALE`), `near-R` and
`window-W` `@8`'s share of the bar and proximity window (`ranking_v8`), `change-log-W` `@9`'s
weight on a change log's score (`ranking_v9`), `near10-S` and `words10-N` `@10`'s share of the bar
and known words a near first file needs (`ranking_v10`),
`no-forms` turns the word-form fold off, `file-W` sets the whole-file BM25 weight to W,
`coverage-C` the share of the question one document must cover, `oov-max` weighs an unknown
word as the question's most specific known word (`@2`'s weight) instead of the average one;
several join with `+` (`oov-max+file-1.5`, the candidate docs/benchmarks/search.md reports).
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import cast

import yaml
from rank_bm25 import BM25Okapi

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bootstrap import ledger_context  # noqa: E402
from ledger.config import LedgerConfig  # noqa: E402
from ledger.domain.events import SearchRequest  # noqa: E402
from ledger.policy.policy_rules import NO_POLICY  # noqa: E402
from ledger.retrieval.search_text import terms  # noqa: E402
from ledger.schemas.requests import DocumentIn  # noqa: E402
from ledger.storage.claims import DocumentClaims  # noqa: E402
from ledger.usecases.context import Caller, UseCaseContext  # noqa: E402
from ledger.usecases.documents import ingest_batch  # noqa: E402
from ledger.usecases.ranking import rank  # noqa: E402
from ledger.writing.application import Ledger  # noqa: E402
from tests.golden_support import (  # noqa: E402
    GoldenQuery,
    Quality,
    WholeFileBm25s,
    corpus_files,
    load_queries,
    measure,
)

SETS = ROOT / "scripts" / "eval_sets"
CALLER = Caller("eval", "eval", frozenset({"retrieval.write"}))
TOP_K = 10
BATCH = 50
CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def pip_command() -> list[str]:
    """This interpreter's pip, else the first `python3` on the PATH with one (a uv-made
    virtual environment has no pip; only `pip download` is asked of it)."""
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    python3 = shutil.which("python3")
    if python3 is None:
        raise SystemExit("no pip: install pip or put a python3 with pip on the PATH")
    return [python3, "-m", "pip"]


def sdist_files(
    package: str, version: str, cache: Path, suffixes: tuple[str, ...] = (".md",)
) -> dict[str, str]:
    """Every file of the package's sdist whose name ends in one of `suffixes` (markdown unless
    the set says otherwise; reST is ingested as text, the chunker knows `#` headings only)
    (path inside the sdist -> text)."""
    cache.mkdir(parents=True, exist_ok=True)

    def archives_in_cache() -> list[Path]:
        # An sdist's file name may spell the project name normalised (`pymdown_extensions`).
        names = {package, package.replace("-", "_")}
        return sorted(path for name in names for path in cache.glob(f"{name}-{version}.tar.gz"))

    archives = archives_in_cache()
    if not archives:
        subprocess.run(
            [
                *pip_command(),
                "download",
                "-q",
                "--no-binary",
                ":all:",
                "--no-deps",
                *(f"{package}=={version}", "-d", str(cache)),
            ],
            check=True,
        )
        archives = archives_in_cache()
    files: dict[str, str] = {}
    with tarfile.open(archives[0]) as archive:
        for member in archive.getmembers():
            if member.isfile() and member.name.lower().endswith(suffixes):
                handle = archive.extractfile(member)
                assert handle is not None
                relative = member.name.split("/", 1)[1]
                files[relative] = _printable(handle.read().decode("utf-8", errors="replace"))
    return dict(sorted(files.items()))


def _printable(text: str) -> str:
    """The text with control characters the ledger refuses (all but tab, LF, CR) as U+FFFD, for
    every ranker alike: Python-Markdown's extension API page quotes its STX/ETX placeholders."""
    return CONTROL.sub("\ufffd", text)


def load_set(name: str) -> tuple[dict[str, object], list[GoldenQuery]]:
    raw = yaml.safe_load((SETS / f"{name}.yaml").read_text(encoding="utf-8"))
    queries = [
        GoldenQuery(q["query"], tuple(q.get("expect", [])), bool(q.get("absent", False)))
        for q in raw["queries"]
    ]
    return raw, queries


def ingest(ctx: UseCaseContext, files: dict[str, str], source: str) -> None:
    claims = DocumentClaims(ctx.ledger.store)
    docs = [DocumentIn(path=path, text=text, source=source) for path, text in files.items() if text.strip()]
    for start in range(0, len(docs), BATCH):
        ingest_batch(ctx, claims, CALLER, docs[start : start + BATCH])


def ledger_ranker(ctx: UseCaseContext, engine: str) -> Callable[[str], tuple[str, list[str]]]:
    assert ctx.search_index is not None
    position = ctx.search_index.refresh()

    def ranked(query: str) -> tuple[str, list[str]]:
        request = SearchRequest(top_k=TOP_K, corpus_position=position)
        run = rank(ctx, CALLER.tenant_id, query, request, NO_POLICY, CALLER.scopes, None, engine=engine)
        return run.status, list(dict.fromkeys(hit.path for hit in run.hits))

    return ranked


def okapi_ranker(files: dict[str, str]) -> Callable[[str], tuple[str, list[str]]]:
    """rank-bm25's BM25Okapi over whole files, the ledger's tokenizer (as scripts/bench_search.py)."""
    paths = list(files)
    okapi = BM25Okapi([[t.text for t in terms(text) if t.score] for text in files.values()])

    def ranked(query: str) -> tuple[str, list[str]]:
        scores = okapi.get_scores([t.text for t in terms(query) if t.score])
        order = sorted(range(len(paths)), key=lambda i: (-scores[i], paths[i]))
        return "ok", [paths[i] for i in order[:TOP_K] if scores[i] > 0]

    return ranked


def evaluate(
    files: dict[str, str], queries: list[GoldenQuery], engines: list[str], work: Path
) -> dict[str, Quality]:
    ledger = Ledger(LedgerConfig(data_dir=work, run_checkpointer=False))
    try:
        ctx = ledger_context(ledger)
        ingest(ctx, files, "docs")
        out = {
            f"citeledger-bm25{e}": measure(queries, ledger_ranker(ctx, f"citeledger-bm25{e}"))
            for e in engines
        }
        bare = WholeFileBm25s(files)
        out["bm25s, whole files"] = measure(queries, lambda q: ("ok", bare.search(q, TOP_K)))
        out["rank-bm25, whole files"] = measure(queries, okapi_ranker(files))
        return out
    finally:
        ledger.close()


def apply_variant(variant: str) -> None:
    """Swap some of `@3`'s choices in this process (measurement only)."""
    from ledger.usecases import (
        ranking,
        ranking_v3,
        ranking_v4,
        ranking_v6,
        ranking_v7,
        ranking_v8,
        ranking_v9,
        ranking_v10,
    )

    for part in [p for p in variant.split("+") if p]:
        if part == "no-forms":
            vars(ranking)["query_forms"] = lambda query, term: (term.text,)
        elif part.startswith("file-"):
            vars(ranking)["FILE_WEIGHT_V3"] = float(part.removeprefix("file-"))
        elif part.startswith("fusion-"):
            ranking_v4.FUSION_WEIGHT = float(part.removeprefix("fusion-"))
        elif part.startswith("coverage-"):
            ranking_v3.DOC_COVERAGE = float(part.removeprefix("coverage-"))
        elif part.startswith("boost-"):  # @7: the field boosts' scale against @6's
            ranking_v7.FIELD_BOOST_SCALE = float(part.removeprefix("boost-"))
        elif part.startswith("near-"):  # @8: the share of the bar a document whose words stand together needs
            ranking_v8.NEAR_SHARE = float(part.removeprefix("near-"))
        elif part.startswith("window-"):  # @8: how close (search terms) those words must stand
            ranking_v8.PROXIMITY_WINDOW = int(part.removeprefix("window-"))
        elif part.startswith("change-log-"):  # @9: a change log's share of its score
            ranking_v9.CHANGE_LOG_WEIGHT = float(part.removeprefix("change-log-"))
        elif part.startswith("near10-"):  # @10: the share of the bar a near first file must hold
            ranking_v10.NEAR_SHARE = float(part.removeprefix("near10-"))
        elif part.startswith("words10-"):  # @10: the known words it must hold
            ranking_v10.MIN_WORDS = int(part.removeprefix("words10-"))
        elif part.startswith("saturation-"):  # @6: the most one word weighs in the no-hit rule
            ranking_v6.GATE_SATURATION = float(part.removeprefix("saturation-"))
        elif part == "oov-max":
            vars(ranking)["needed_document_coverage"] = _needed_oov_max
        elif part.startswith("unknown-"):  # @4/@5: an unknown word weighs C x the least known idf
            vars(ranking)["needed_document_coverage_v4"] = partial(_needed_unknown, float(part[8:]))
        else:
            raise SystemExit(f"unknown variant {part}")


def _needed_oov_max(known: list[float], missing: list[str]) -> float:
    """`ranking_v3.needed_document_coverage` with an unknown content word weighing as the
    largest known idf, not the mean."""
    from ledger.usecases import ranking_v3
    from ledger.usecases.ranking_steps import QUESTION_FORM_STEMS

    if not known:
        return float("inf")
    content = [term for term in missing if term not in QUESTION_FORM_STEMS]
    total = sum(known) + len(content) * max(known)
    return ranking_v3.DOC_COVERAGE * total + (1e-9 if content else 0.0)


def _needed_unknown(weight: float, known: list[float], missing: list[str]) -> float:
    """`ranking_v4.needed_document_coverage_v4` with an unknown content word weighing
    `weight` times the least known idf (`@4`: 1.0)."""
    from ledger.usecases.ranking_steps import QUESTION_FORM_STEMS

    if not known:
        return float("inf")
    content = [term for term in missing if term not in QUESTION_FORM_STEMS]
    return 0.5 * (sum(known) + weight * len(content) * min(known))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--sets",
        default="click,click-word-forms,starlette,attrs,black,structlog,markdown,pymdown-extensions,hatch,griffe",
    )
    parser.add_argument("--engines", default="@3,@4")
    parser.add_argument("--golden", action="store_true", help="add the golden set (tuning)")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "citeledger-eval")
    parser.add_argument("--misses", action="store_true")
    parser.add_argument("--variant", default="")
    args = parser.parse_args()
    apply_variant(args.variant)
    engines = args.engines.split(",")
    rows: list[tuple[str, str, int, int, int, str, Quality]] = []
    with tempfile.TemporaryDirectory() as tmp:
        plan: list[tuple[str, str, dict[str, str], list[GoldenQuery]]] = []
        if args.golden:
            plan.append(("golden (tests/corpus)", "tuning", corpus_files(), load_queries()))
        for name in [s for s in args.sets.split(",") if s]:
            meta, queries = load_set(name)
            suffixes = tuple(str(s) for s in cast(list[str], meta.get("suffixes", [".md"])))
            files = sdist_files(str(meta["package"]), str(meta["version"]), args.cache, suffixes)
            plan.append((f"{name} {meta['version']}", str(meta["role"]), files, queries))
        for index, (label, role, files, queries) in enumerate(plan):
            answerable = sum(not q.absent for q in queries)
            for ranker, quality in evaluate(files, queries, engines, Path(tmp) / str(index)).items():
                rows.append((label, role, len(files), answerable, len(queries) - answerable, ranker, quality))
    print(
        "| set | role | files | answerable / absent | ranker | recall@5 | MRR@10 | false no_hit | "
        "absent → no_hit | no_hit precision | no_hit recall |"
    )
    print("|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for role in ("tuning", "held_out"):
        for label, row_role, files_count, answerable, absent, ranker, q in rows:
            if row_role != role:
                continue
            baseline = "whole files" in ranker  # cannot say no_hit
            no_hit = "–" if baseline else f"{q.no_hit_precision:.3f}"
            recall = "–" if baseline else f"{q.no_hit_recall:.3f}"
            print(
                f"| {label} | {role} | {files_count} | {answerable} / {absent} | {ranker} | "
                f"{q.recall_at_5:.3f} | {q.mrr:.3f} | {q.present_no_hit}/{answerable} | "
                f"{q.absent_no_hit}/{q.absent_total} | {no_hit} | {recall} |"
            )
    if args.misses:
        for label, _role, _f, _a, _b, ranker, q in rows:
            for miss in q.misses:
                print(f"{label} {ranker}: {miss}")


if __name__ == "__main__":
    main()
