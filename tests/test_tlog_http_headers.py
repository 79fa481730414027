"""What standard tlog clients read besides the bytes: every text/plain answer of the ledger
and of the witness names its charset once (`text/plain; charset=utf-8`, never the
`...; charset=utf-8; charset=utf-8` Litestar made of a type that already named it), the
witness's 409 is exactly `text/x.tlog.size`, and entry bundles are gzip-compressed when the
client asks (and only then). Real ledger server, real witness process, plain httpx."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import httpx
import pytest

from api.routes.tiles import wants_gzip
from ledger.config import LedgerConfig
from ledger.tlog.witness_protocol import format_add_checkpoint
from ledger.writing.application import Ledger
from tests import independent_tlog as spec
from tests import loopback_http
from tests.api_support import LoopbackServer, api_config, make_tokens
from tests.factories import TENANT, retrieval_draft
from tests.witness_support import WitnessProcess

TEXT = "text/plain; charset=utf-8"


def _only(response: httpx.Response, name: str = "content-type") -> str:
    values = response.headers.get_list(name)
    assert len(values) == 1, values
    return values[0]


@pytest.mark.parametrize("backend", ["sqlite"])  # headers of the HTTP layer, not of the store
def test_text_types_once_and_bundles_gzip_on_request(ledger_config: LedgerConfig, tmp_path: Path) -> None:
    with Ledger(LedgerConfig(**{**ledger_config.__dict__, "run_checkpointer": False})) as first:
        log_vkey = first.vkey
    with WitnessProcess(tmp_path / "w1", "witness.test/w1", log_vkey) as witness:
        config = api_config(
            LedgerConfig(
                **{**ledger_config.__dict__, "run_checkpointer": False, "witnesses": witness.setting}
            )
        )
        tokens = make_tokens(config)
        with LoopbackServer(config) as server:
            ledger = server.app.state.services.ledger
            ledger.append_batch([retrieval_draft(ledger) for _ in range(200)], tenant_id=TENANT)
            record = ledger.cosign(ledger.issue_checkpoint())
            size = record.tree_size
            base = server.base_url

            # The ledger's text answers.
            checkpoint = loopback_http.get(base + "/v1/tlog/checkpoint", timeout=10)
            assert checkpoint.status_code == 200 and _only(checkpoint) == TEXT
            metrics = loopback_http.get(base + "/v1/metrics", timeout=10)
            assert metrics.status_code == 200
            assert _only(metrics) == "text/plain; version=0.0.4; charset=utf-8"

            # The witness's: its key, its cosigned checkpoint, a cosignature, each refusal.
            vkey = loopback_http.get(witness.url + "/vkey", timeout=10)
            assert vkey.status_code == 200 and _only(vkey) == TEXT
            origin_hash = hashlib.sha256(ledger.origin.encode()).hexdigest()
            held = loopback_http.get(f"{witness.url}/{origin_hash}/checkpoint", timeout=10)
            assert held.status_code == 200 and _only(held) == TEXT, held.text
            unknown = loopback_http.get(f"{witness.url}/{'0' * 64}/checkpoint", timeout=10)
            assert unknown.status_code == 404 and _only(unknown) == TEXT
            again = loopback_http.post(
                witness.url + "/add-checkpoint",
                content=format_add_checkpoint(size, [], record.note),
                timeout=10,
            )
            assert again.status_code == 200 and _only(again) == TEXT, again.text
            behind = loopback_http.post(
                witness.url + "/add-checkpoint", content=format_add_checkpoint(0, [], record.note), timeout=10
            )
            assert behind.status_code == 409 and _only(behind) == "text/x.tlog.size"
            assert behind.text == f"{size}\n"
            garbage = loopback_http.post(witness.url + "/add-checkpoint", content=b"nonsense", timeout=10)
            assert garbage.status_code == 400 and _only(garbage) == TEXT

            # Entry bundles: gzip when asked, the same entries once decoded; identity otherwise.
            operator = {"Authorization": f"Bearer {tokens['operator']}"}
            url = base + "/v1/tlog/" + spec.tile_url("entries", 0, size)
            plain = loopback_http.get(url, headers={**operator, "Accept-Encoding": "identity"}, timeout=10)
            assert plain.status_code == 200 and "content-encoding" not in plain.headers
            assert "accept-encoding" in plain.headers["vary"].lower()
            leaves = spec.split_hashes(
                loopback_http.get(base + "/v1/tlog/" + spec.tile_url(0, 0, size), timeout=10).content
            )
            assert [spec.leaf(e) for e in spec.entries_of_bundle(plain.content)] == leaves
            for asked in ("gzip", "gzip, deflate, br", "br;q=1.0, gzip;q=0.5", "*"):
                with loopback_http.stream(
                    "GET", url, headers={**operator, "Accept-Encoding": asked}, timeout=10
                ) as zipped:
                    raw = b"".join(zipped.iter_raw())
                    assert zipped.status_code == 200 and _only(zipped, "content-encoding") == "gzip", asked
                    assert "accept-encoding" in zipped.headers["vary"].lower()
                    assert _only(zipped) == "application/octet-stream"
                assert gzip.decompress(raw) == plain.content, asked
                assert len(raw) < len(plain.content) / 2  # JSON entries: well under half
            for refused in ("gzip;q=0", "identity", "deflate", "*;q=0"):
                answer = loopback_http.get(url, headers={**operator, "Accept-Encoding": refused}, timeout=10)
                assert "content-encoding" not in answer.headers, refused
                assert answer.content == plain.content


def test_accept_encoding_parsing() -> None:
    assert wants_gzip("gzip") and wants_gzip("GZIP;Q=0.1") and wants_gzip("x-gzip") and wants_gzip("*")
    assert wants_gzip("identity, *;q=0.5") and not wants_gzip("gzip;q=bogus, *")
    assert not wants_gzip("") and not wants_gzip("gzip;q=0") and not wants_gzip("gzip;q=0.000")
    assert not wants_gzip("*, gzip;q=0") and not wants_gzip("br") and not wants_gzip("gzip;q=oops")
