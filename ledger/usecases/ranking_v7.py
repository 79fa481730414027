"""`citeledger-bm25@7`: `@6` whose passage evidence weighs the question's words in the
document's title, the chunk's heading path and the file name `FIELD_BOOST_SCALE` (1.25) times
as much as before; nothing else changes.

A candidate chunk's score stays `@4`'s normalised fusion,
`chunk evidence / best chunk evidence + FUSION_WEIGHT * file BM25 / best file BM25` (times
one number per query), where the chunk evidence is the chunk's BM25, the three field boosts
(each the word's idf times its field weight) and the position bonus. Two of those parts count
the same body words (the chunk's BM25 and its whole file's); the boosts are what only the
ledger knows, where in the document's structure the question's words stand, and under `@6`
they were outweighed whenever one long passage repeated a word. Scaling them moves a section
whose heading names the question's subject above a passage that merely mentions its words,
the order whole-file rankers keep by accident of length on some questions and lose on others.

`FIELD_BOOST_SCALE` was chosen on the tuning sets only (`docs/benchmarks/search.md`, round 7):
every scale from 1.2 to 1.33 gives the same recall@5 and MRR@10 on every set, each level with or
above `@6`'s, and 4 of 18 sets below whole-file bm25s (`@6`: 6); 1.1, 1.4 and 1.5 leave 5.
The no-hit rule, the candidates and so every `no_hit` are `@6`'s (the boosts only order what
may be cited), and each citation's `reason` names the same parts, the field boosts as scaled
(they still sum to the score).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ledger.usecases.ranking_v6 import no_hit_evidence
from ledger.usecases.search_run import ENGINE_V4, ENGINE_V5, ENGINE_V6, ENGINE_V7

FIELD_BOOST_SCALE = 1.25  # the title, heading and file name boosts against `@6`'s
# The engines that fuse the whole-file BM25 on the passages' scale (`ranking_v4`).
FUSED_ENGINES = (ENGINE_V4, ENGINE_V5, ENGINE_V6, ENGINE_V7)
Array = np.ndarray[Any, Any]

__all__ = ["FIELD_BOOST_SCALE", "FUSED_ENGINES", "field_boosts", "no_hit_evidence"]


def field_boosts(engine: str, title: Array, heading: Array, filename: Array) -> tuple[Array, Array, Array]:
    """The title, heading and file name boosts (one per chunk) as `engine` weighs them: under
    `@7` each times `FIELD_BOOST_SCALE`, before it as given (the same arrays)."""
    if engine != ENGINE_V7:
        return title, heading, filename
    return title * FIELD_BOOST_SCALE, heading * FIELD_BOOST_SCALE, filename * FIELD_BOOST_SCALE
