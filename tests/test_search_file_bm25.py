"""`@2`'s `file_bm25` component: FILE_WEIGHT times the BM25 of the chunk's whole file (its
live chunks' texts together), equal to bm25s over those files; `@3`'s the same with
FILE_WEIGHT_V3 (these queries have no word forms to fold); `@1` has no such component."""

from __future__ import annotations

import bm25s
import numpy as np
import orjson
import pytest

from bootstrap import ledger_context
from ledger.domain.events import SearchRequest
from ledger.policy.policy_rules import NO_POLICY
from ledger.usecases.ranking import ENGINE_V1, ENGINE_V2, ENGINE_V3, FILE_WEIGHT, K1, B, rank
from ledger.usecases.ranking_v3 import FILE_WEIGHT_V3
from ledger.writing.application import Ledger
from tests.golden_support import bm25s_tokenizer, corpus_files, ingest_corpus
from tests.test_search import ACME


@pytest.mark.parametrize(("engine", "weight"), [(ENGINE_V2, FILE_WEIGHT), (ENGINE_V3, FILE_WEIGHT_V3)])
def test_file_bm25_equals_bm25s_over_whole_files(ledger: Ledger, engine: str, weight: float) -> None:
    ctx = ledger_context(ledger)
    files = corpus_files()
    ingest_corpus(
        ctx, ACME, {p: t for p, t in files.items() if p.startswith(("handbook/", "policies/", "zh/"))}
    )
    assert ctx.search_index is not None
    position = ctx.search_index.refresh()
    rows = ledger.store.rows(
        f"SELECT * FROM {ledger.store.table('citeledger_rm_corpus')} WHERE tenant_id='acme' "
        "AND live_to_position IS NULL ORDER BY live_from_position, ordinal"
    )
    texts: dict[str, list[str]] = {}
    for row in rows:
        texts.setdefault(row["document_id"], []).append(
            ledger.sealer.unseal(orjson.loads(row["text"]), tenant_id="acme")
        )
    documents = list(texts)
    tokenizer = bm25s_tokenizer()
    model = bm25s.BM25(method="lucene", k1=K1, b=B, dtype="float64")
    corpus = ["\n".join(parts) for parts in texts.values()]
    model.index(tokenizer.tokenize(corpus, return_as="tuple", show_progress=False), show_progress=False)
    compared = 0
    for query in ["parental leave weeks", "hotel limit per night", "annual leave days", "远程办公设备补贴"]:
        request = SearchRequest(top_k=10, corpus_position=position)
        run = rank(ctx, "acme", query, request, NO_POLICY, ACME.scopes, None, engine=engine)
        assert run.status == "ok"
        ids = tokenizer.tokenize([query], return_as="ids", update_vocab=False, show_progress=False)[0]
        reference = np.asarray(model.get_scores(ids), dtype=np.float64)
        for hit in run.hits:
            ours = float(dict(hit.score_breakdown)["file_bm25"])
            expected = weight * reference[documents.index(hit.document_id)]
            assert abs(ours - expected) < 2e-6, (query, hit.path)
            assert abs(float(hit.score) - sum(float(v) for _, v in hit.score_breakdown)) < 1e-5
            compared += 1
        old = rank(ctx, "acme", query, request, NO_POLICY, ACME.scopes, None, engine=ENGINE_V1)
        assert all("file_bm25" not in dict(hit.score_breakdown) for hit in old.hits)
    assert compared >= 10
