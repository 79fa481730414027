"""Loading a policy bundle's YAML within limits, before anything is built from it.

`yaml.safe_load` alone is not enough for text from outside: anchors and aliases let 342
bytes stand for a billion nodes ("billion laughs"), which any walk over the result then
pays for. Here the pure-Python safe loader is bounded while it *composes* (before any
object is constructed): an anchor or alias is refused at its first occurrence, and the
nodes, nesting depth, keys per mapping and scalar length are counted as they arrive, so a
refusal costs at most the limits, never the expansion. A policy is rules, not data: every
limit is far above what a real bundle needs.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.events import AliasEvent, ScalarEvent
from yaml.nodes import MappingNode, Node

from ledger.deadline import Deadline

MAX_BUNDLE_NODES = 20_000
MAX_BUNDLE_DEPTH = 32
MAX_MAPPING_KEYS = 128
MAX_SCALAR_CHARS = 4_096
_DEADLINE_EVERY = 256  # nodes between two deadline checks


class BundleLimitError(ValueError):
    """The bundle breaks a limit (`limit` names it) or is not YAML (`limit` is None)."""

    def __init__(self, message: str, limit: str | None = None, mark: Any = None) -> None:
        where = f" at line {mark.line + 1}" if mark is not None else ""
        super().__init__(f"{message}{where}")
        self.limit = limit


class _BoundedLoader(yaml.SafeLoader):
    def __init__(self, text: str, deadline: Deadline | None, unique_keys: bool = False) -> None:
        super().__init__(text)
        self.nodes = 0
        self.depth = 0
        self.deadline = deadline
        self.unique_keys = unique_keys

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        if self.unique_keys:
            # PyYAML keeps the last of two equal keys; where a key sets a rule, which one was
            # meant is unknowable, so the text is refused (merge keys `<<` likewise).
            seen: list[Any] = []
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    raise BundleLimitError(
                        "limit no_merge_keys: merge keys (<<) are not allowed",
                        "no_merge_keys",
                        key_node.start_mark,
                    )
                key = self.construct_object(key_node, deep=True)
                if key in seen:
                    raise BundleLimitError(
                        "limit unique_keys: a key given twice", "unique_keys", key_node.start_mark
                    )
                seen.append(key)
        return super().construct_mapping(node, deep)

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, AliasEvent) or getattr(event, "anchor", None) is not None:
            raise BundleLimitError(
                "limit no_aliases: anchors (&) and aliases (*) are not allowed",
                "no_aliases",
                event.start_mark,
            )
        self.nodes += 1
        if self.nodes > MAX_BUNDLE_NODES:
            raise BundleLimitError(
                f"limit max_nodes: more than {MAX_BUNDLE_NODES} nodes", "max_nodes", event.start_mark
            )
        if self.deadline is not None and self.nodes % _DEADLINE_EVERY == 0:
            self.deadline.check()
        if isinstance(event, ScalarEvent) and len(event.value) > MAX_SCALAR_CHARS:
            raise BundleLimitError(
                f"limit max_scalar_chars: a value longer than {MAX_SCALAR_CHARS} characters",
                "max_scalar_chars",
                event.start_mark,
            )
        if self.depth >= MAX_BUNDLE_DEPTH:
            raise BundleLimitError(
                f"limit max_depth: nests deeper than {MAX_BUNDLE_DEPTH} levels", "max_depth", event.start_mark
            )
        self.depth += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self.depth -= 1
        if isinstance(node, MappingNode) and len(node.value) > MAX_MAPPING_KEYS:
            raise BundleLimitError(
                f"limit max_keys: a mapping with more than {MAX_MAPPING_KEYS} keys",
                "max_keys",
                node.start_mark,
            )
        return node


def load_bundle_yaml(text: str, deadline: Deadline | None = None, *, unique_keys: bool = False) -> Any:
    """The document of `text` (safe types only), or `BundleLimitError` naming the limit.
    `unique_keys`: a mapping that gives a key twice (or uses a merge key) is refused."""
    try:
        loader = _BoundedLoader(text, deadline, unique_keys)  # the reader refuses unprintable characters here
    except yaml.YAMLError:
        raise BundleLimitError("does not parse as YAML (an unprintable character)") from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        try:
            return loader.construct_document(node)
        except (yaml.YAMLError, BundleLimitError):
            raise
        except Exception:  # noqa: BLE001 - a tagged value its type refuses (`!!int x`): bounded, pure
            raise BundleLimitError("does not parse as YAML (a value does not fit its tag)") from None
    except yaml.YAMLError as exc:
        raise BundleLimitError("does not parse as YAML", None, getattr(exc, "problem_mark", None)) from None
    finally:
        loader.dispose()
