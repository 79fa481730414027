"""The read models a projection runner maintains unless told otherwise, in the order
it applies them."""

from __future__ import annotations

from projections.base import Projection
from projections.citations import CitationsProjection
from projections.corpus import CorpusProjection
from projections.history import HistoryProjection
from projections.question_index import QuestionIndexProjection
from projections.receipt_index import ReceiptsProjection
from projections.search_index import SearchIndexProjection
from projections.writeside import WriteSideProjection


def default_projections() -> list[Projection]:
    return [
        HistoryProjection(),
        ReceiptsProjection(),
        CitationsProjection(),
        CorpusProjection(),
        WriteSideProjection(),
        SearchIndexProjection(),
        QuestionIndexProjection(),
    ]
