"""`citeledger-bm25@4`: `@3` (word forms, the no-hit rule per document, the full page) with
the whole-file BM25 fused into each chunk's score by normalised score fusion, so that a file
that answers the question as a whole is not lost behind passages that repeat one word.

Each candidate chunk's score is

    chunk evidence + FUSION_WEIGHT * file BM25 * (best chunk evidence / best file BM25)

where the chunk evidence is `@3`'s chunk parts (BM25 of the chunk, title, heading and file
name boosts, position) and both maxima are taken over the query's candidates. That is
`chunk / best chunk + FUSION_WEIGHT * file / best file` (both on [0, 1]) times one positive
number per query, so the order is the normalised fusion's while every part of `reason` stays
a term of the score it explains (`file_bm25` is the rescaled whole-file part). `@3` added the
whole-file BM25 unscaled (weight 1.0): whichever of the two ran on the larger scale for a
query decided it; here the two meet on one scale and the whole-file part weighs
`FUSION_WEIGHT` times the passage part.
"""

from __future__ import annotations

from typing import Any

import numpy as np

FUSION_WEIGHT = 1.5  # the whole file's share against the best passage's (chosen on tuning sets)
Array = np.ndarray[Any, Any]


def fused_file_weight(chunk_evidence: Array, file_bm25: Array) -> float:
    """The factor on a candidate's whole-file BM25 (`file_bm25`, one per candidate) that puts
    it on the scale of the candidates' chunk evidence (`chunk_evidence`), times
    `FUSION_WEIGHT`. No file BM25 (a match in titles or file names only): 0."""
    best_file = float(file_bm25.max(initial=0.0))
    if best_file <= 0.0:
        return 0.0
    return FUSION_WEIGHT * float(chunk_evidence.max(initial=0.0)) / best_file
