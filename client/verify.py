"""Offline verification of a receipt bundle: no server, only the ledger's root public key."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from ledger.evidence.bundle import BundleError
from ledger.evidence.bundle import verify_bundle as _verify

__all__ = ["BundleError", "verify_bundle"]


def _key_bytes(root_public_key: bytes | str) -> bytes:
    if isinstance(root_public_key, bytes):
        return root_public_key
    text = root_public_key.strip()
    try:
        return bytes.fromhex(text)
    except ValueError:
        return base64.b64decode(text, validate=True)


def verify_bundle(bundle: dict[str, Any] | str | Path, root_public_key: bytes | str) -> dict[str, Any]:
    """Check a bundle (a dict, or a path to its JSON file) against the root public key
    (raw 32 bytes, hex or base64). Returns the verified entry; raises BundleError."""
    data = bundle if isinstance(bundle, dict) else json.loads(Path(bundle).read_text())
    if isinstance(data.get("bundle"), dict):
        data = data["bundle"]  # as GET /v1/receipts/{id}/bundle answers it
    return _verify(data, _key_bytes(root_public_key))
