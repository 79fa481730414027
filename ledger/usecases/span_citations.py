"""How the documents of an OpenTelemetry retrieval span become a receipt's citations
(`span_ingest` records them; `docs/otlp.md` "Cited documents" is the rule in prose).

Each document the span reports is cited as:
- the ledger's chunk the span names (`document.id` written `<document_id>/<chunk_id>`, or
  metadata `document_id` + `chunk_id`, or metadata `source` + `path` + `chunk_id`) when the
  text it carries, if any, occurs in that chunk;
- else a chunk of the ledger document its metadata names by source and path (`source` +
  `path`/`file_path`; or a path alone: `file_path`, `path`, or LangChain's `source`), chosen
  by `best_chunk`;
- else the text the span carries, recorded first as a document of the per-service source
  `otlp.<service>` (sealed, erasable, under the tenant's retention rules like any chunk);
- else an unverifiable citation on the receipt (`UnverifiedCitation`): never dropped.

A chunk the token may not see (restricted, without `knowledge.restricted.read`) is refused as
on `POST /v1/retrievals`: a signed `AccessDenied` entry, the span not recorded, its text never
compared nor copied (`CitationDenied`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from ledger.domain.events import UnverifiedCitation
from ledger.domain.fields import IDENTIFIER_PATTERN
from ledger.domain.path_names import normalise
from ledger.retrieval.chunking import chunk_markdown, stable_chunk_ids
from ledger.retrieval.otlp_spans import RetrievalSpan, SpanDocument
from ledger.schemas.field_rules import MAX_SNIPPET_CHARS
from ledger.schemas.requests import DocumentIn
from ledger.storage.claims import DocumentClaims
from ledger.usecases.context import Caller, UseCaseContext
from ledger.usecases.documents import default_document_id, ingest_document
from ledger.usecases.ports import ChunkState
from ledger.usecases.retrievals import ChunkTexts, hidden_chunks, unknown_chunk
from ledger.usecases.visibility import may_see
from ledger.writing.sealing import KeyDestroyed

_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)
_SPACE = re.compile(r"\s+")
# The source `POST /v1/documents` records under when none is named.
API_SOURCE = DocumentIn.model_fields["source"].default
# Metadata keys naming a document's path: OpenInference's own, LlamaIndex's, LangChain's (its
# loaders put the file's path in `source`).
PATH_KEYS = ("path", "file_path", "source")
MAX_PATH_CHARS = 4096
# Sources one export may name (each is one read of its paths).
MAX_SOURCES_PER_REQUEST = 64
# Past the log's end: a document's chunks "as of" it are its live ones.
_LIVE = 2**62


class CitationDenied(Exception):
    """A document named a chunk (or a document) the token may not see: refused as
    `POST /v1/retrievals` refuses it, `denied` the (resource type, id) to record `AccessDenied` for."""

    def __init__(self, message: str, denied: Sequence[tuple[str, str]]) -> None:
        super().__init__(message)
        self.message, self.denied = message, list(denied)


class Unrecordable(Exception):
    pass


def claimed_ref(document: SpanDocument) -> tuple[str, str] | None:
    """The (document id, chunk id) a span's document names by ids, if it names one."""
    meta = document.metadata
    doc_id, chunk_id = meta.get("document_id"), meta.get("chunk_id")
    if isinstance(doc_id, str) and isinstance(chunk_id, str):
        return doc_id, chunk_id
    if document.id is not None and document.id.count("/") == 1:
        doc_id, chunk_id = document.id.split("/")
        return doc_id, chunk_id
    return None


def _squash(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def best_chunk(
    chunks: Sequence[tuple[ChunkState, str]], content: str | None
) -> tuple[ChunkState, str] | None:
    """Which chunk of a document (in document order, with its text) a span's document cites,
    and the snippet (always text of that chunk, as `POST /v1/retrievals` requires):
    1. the first chunk holding the carried text: the carried text is the snippet;
    2. else the first holding it up to whitespace: the chunk's text is the snippet;
    3. else the longest chunk whose text the carried text holds (up to whitespace; the span's
       document spans several of the ledger's chunks): its text is the snippet;
    4. no carried text: the document's first chunk with text, its text the snippet.
    None when the carried text shares no whole chunk with the document (it is then recorded
    as carried text). Snippets are cut at the snippet limit."""
    usable = [(chunk, text) for chunk, text in chunks if text.strip()]
    if content is None or not content.strip():
        return (usable[0][0], usable[0][1][:MAX_SNIPPET_CHARS]) if usable else None
    for chunk, text in usable:
        if content in text:
            return chunk, content[:MAX_SNIPPET_CHARS]
    squashed = _squash(content)
    for chunk, text in usable:
        if squashed in _squash(text):
            return chunk, text[:MAX_SNIPPET_CHARS]
    inside = [(chunk, text) for chunk, text in usable if _squash(text) in squashed]
    if not inside:
        return None
    chunk, text = max(inside, key=lambda pair: len(pair[1]))  # max keeps the first of equals
    return chunk, text[:MAX_SNIPPET_CHARS]


def _relative(path: str, root: str) -> str | None:
    """`path` inside `root` as a source's relative path, or None."""
    try:
        inside = PurePosixPath(path).relative_to(PurePosixPath(root))
    except ValueError:
        return None
    return str(inside) if inside.parts and ".." not in inside.parts else None


def _plain_path(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_PATH_CHARS or "\0" in value:
        return None
    path = PurePosixPath(normalise(value.strip()))
    return None if ".." in path.parts else str(path)


class SpanCitations:
    """Turns a span's documents into cited entries, for one request. `source_roots` are the
    tenant's synced sources (name -> root path as registered). Chunk texts unsealed here are
    kept for this request only and shared with the record path (one unseal each)."""

    def __init__(
        self, ctx: UseCaseContext, claims: DocumentClaims, caller: Caller, source_roots: Mapping[str, str]
    ) -> None:
        self.ctx, self.claims, self.caller = ctx, claims, caller
        self.roots = dict(source_roots)
        self.texts: ChunkTexts = {}
        self.found: dict[tuple[str, str], ChunkState] = {}
        self._paths: dict[str, dict[str, str]] = {}  # source -> path -> document id
        self._recorded_content: dict[tuple[str, str], tuple[str, str, str]] = {}
        self._documents: dict[str, dict[tuple[str, str], ChunkState]] = {}  # live chunks, in order

    def _source_paths(self, source: str) -> dict[str, str]:
        if source not in self._paths:
            if len(self._paths) >= MAX_SOURCES_PER_REQUEST:
                return {}  # a bound on the reads one export can cause; the rest are not matched
            self._paths[source] = self.ctx.lookups.source_documents(self.caller.tenant_id, source)
        return self._paths[source]

    def _document_at(self, source: str, path: str) -> str | None:
        """The live document at `path` (relative, or absolute under the source's root) of `source`."""
        root = self.roots.get(source)
        if path.startswith("/"):
            relative = _relative(path, root) if root else None
            return self._source_paths(source).get(relative) if relative else None
        return self._source_paths(source).get(path)

    def document_named(self, document: SpanDocument) -> str | None:
        """The ledger document a span's document names by source and path, if exactly one."""
        meta = document.metadata
        source = meta.get("source")
        paths = [p for key in PATH_KEYS if (p := _plain_path(meta.get(key))) is not None]
        if isinstance(source, str) and _IDENTIFIER.match(source):
            for path in paths:
                if path != source and (found := self._document_at(source, path)):
                    return found
        for path in paths:
            if path.startswith("/"):
                sources = [name for name, root in self.roots.items() if _relative(path, root)]
            else:
                sources = [name for name in [*self.roots, API_SOURCE] if path in self._source_paths(name)]
            found_ids = {doc for name in sources if (doc := self._document_at(name, path))}
            if len(found_ids) == 1:
                return found_ids.pop()
        return None

    def ref_of(self, document: SpanDocument) -> tuple[str, str] | None:
        """The ledger chunk a span's document names by ids, if it names one (not yet looked up)."""
        ref = claimed_ref(document)
        chunk_id = document.metadata.get("chunk_id")
        if ref is None and isinstance(chunk_id, str):
            doc_id = self.document_named(document)
            ref = (doc_id, chunk_id) if doc_id else None
        return ref if ref is not None and all(_IDENTIFIER.match(part) for part in ref) else None

    def look_up(self, spans: Sequence[RetrievalSpan]) -> None:
        """The chunks the spans name by ids, in one read."""
        refs = sorted({ref for span in spans for d in span.documents if (ref := self.ref_of(d)) is not None})
        if refs:
            self.found.update(self.ctx.lookups.chunks(self.caller.tenant_id, refs))

    def _chunk_text(self, chunk: ChunkState) -> str | None:
        if chunk.text is None:
            return None
        known = (self.caller.tenant_id, chunk.chunk_id, str(chunk.text.get("nonce")))
        if known not in self.texts:
            try:
                self.texts[known] = self.ctx.sealer.unseal(chunk.text, tenant_id=self.caller.tenant_id)
            except KeyDestroyed:
                return None
        return self.texts[known]

    def _hidden(self, chunks: Mapping[tuple[str, str], ChunkState]) -> bool:
        return any(not may_see(self.caller.scopes, chunk.sensitivity) for chunk in chunks.values())

    def _named_chunk(self, index: int, document: SpanDocument) -> tuple[str, str, str] | None:
        ref = self.ref_of(document)
        chunk = self.found.get(ref) if ref is not None else None
        if ref is None or chunk is None:
            return None
        if self._hidden({ref: chunk}):  # refused before its text is read, in the words of an unknown one
            raise CitationDenied(unknown_chunk(index, ref).message, hidden_chunks(self.caller, {ref: chunk}))
        text = self._chunk_text(chunk)
        if text is None or (document.content is not None and document.content not in text):
            return None
        snippet = (document.content or text)[:MAX_SNIPPET_CHARS]
        return (ref[0], ref[1], snippet) if snippet.strip() else None

    def _live_chunks(self, doc_id: str) -> dict[tuple[str, str], ChunkState]:
        """A document's live chunks in document order (read once per request)."""
        if doc_id not in self._documents:
            tenant = self.caller.tenant_id
            live = sorted(
                (c for c in self.ctx.lookups.document_chunks(tenant, doc_id, _LIVE) if c.live_to is None),
                key=lambda c: c.ordinal,
            )
            refs = [(doc_id, c.chunk_id) for c in live]
            states = self.ctx.lookups.chunks(tenant, refs)
            self._documents[doc_id] = {ref: states[ref] for ref in refs if ref in states}
        return self._documents[doc_id]

    def _chunk_of_document(self, index: int, document: SpanDocument) -> tuple[str, str, str] | None:
        doc_id = self.document_named(document)
        if doc_id is None:
            return None
        states = self._live_chunks(doc_id)
        if self._hidden(states):  # the chunk ids are the text's: only the document is named
            message = f"selected_entries[{index}]: no chunk at that source and path for this tenant"
            raise CitationDenied(message, [("document", doc_id)])
        texts = [(chunk, text) for chunk in states.values() if (text := self._chunk_text(chunk)) is not None]
        chosen = best_chunk(texts, document.content)
        if chosen is None:
            return None
        self.found[(doc_id, chosen[0].chunk_id)] = chosen[0]
        return doc_id, chosen[0].chunk_id, chosen[1]

    def _content_entry(self, span: RetrievalSpan, content: str) -> tuple[str, str, str]:
        """The carried text recorded as a document of the service's own source (unchanged text
        is not recorded twice): (document id, chunk id, snippet) of its first chunk."""
        source = f"otlp.{span.service}"
        digest = hashlib.sha256(content.encode("utf-8")).hexdigest()
        known = self._recorded_content.get((source, digest))
        if known is not None:
            return known
        path = f"spans/{digest[:32]}.md"
        pieces = chunk_markdown(content)
        if not pieces:
            raise Unrecordable("a document's content has no text")
        doc = DocumentIn(path=path, text=content, source=source)
        ingest_document(self.ctx, self.claims, self.caller, doc)
        document_id = default_document_id(self.caller.tenant_id, source, path)
        chunk_id = stable_chunk_ids(document_id, pieces)[0]
        found = (document_id, chunk_id, pieces[0].text[:MAX_SNIPPET_CHARS])
        self._recorded_content[(source, digest)] = found
        return found

    def entries(self, span: RetrievalSpan) -> tuple[list[dict[str, Any]], list[UnverifiedCitation]]:
        entries: list[dict[str, Any]] = []
        unverifiable: list[UnverifiedCitation] = []
        for index, document in enumerate(span.documents):
            cited = self._named_chunk(index, document) or self._chunk_of_document(index, document)
            if cited is None and document.content and document.content.strip():
                cited = self._content_entry(span, document.content)
            if cited is not None:
                entries.append(_entry(*cited, document.score))
                continue
            carried = document.id if document.id and _IDENTIFIER.match(document.id) else None
            unverifiable.append(
                UnverifiedCitation(
                    rank=index + 1,
                    carried_id=carried,
                    score=document.score,
                    reason="unknown_id_no_content" if document.id else "no_id_no_content",
                )
            )
        return entries, unverifiable


def _entry(document_id: str, chunk_id: str, snippet: str, score: str | None) -> dict[str, Any]:
    entry = {"document_id": document_id, "chunk_id": chunk_id, "snippet": snippet}
    return entry if score is None else {**entry, "score": score}
