"""The log as C2SP tlog-tiles, checked by an implementation no one here wrote for
the server (tests/independent_tlog.py, which imports nothing from the project):
the checkpoint's log signature and a witness's cosignature, the root rebuilt from
the served tiles, level-1 tiles against level-0 ones, the ledger's own inclusion
proofs against that root, entry bundles against the leaf tiles; immutable cache
headers; entry bundles for the operator token only."""

from __future__ import annotations

import base64
from pathlib import Path

from ledger.config import LedgerConfig
from ledger.writing.application import Ledger
from tests import independent_tlog as spec
from tests import loopback_http
from tests.api_support import LoopbackServer, api_config, make_tokens
from tests.factories import TENANT, retrieval_draft
from tests.witness_support import WitnessProcess


def test_tiles_checkpoint_and_cosignature_verify_independently(
    ledger_config: LedgerConfig, tmp_path: Path
) -> None:
    with Ledger(LedgerConfig(**{**ledger_config.__dict__, "run_checkpointer": False})) as first:
        log_vkey = first.vkey
    with WitnessProcess(tmp_path / "w1", "witness.test/w1", log_vkey) as witness:
        ledger_with_witness = LedgerConfig(
            **{**ledger_config.__dict__, "run_checkpointer": False, "witnesses": witness.setting}
        )
        config = api_config(ledger_with_witness)
        tokens = make_tokens(config)
        with LoopbackServer(config) as server:
            ledger = server.app.state.services.ledger
            for _ in range(6):
                ledger.append_batch([retrieval_draft(ledger) for _ in range(100)], tenant_id=TENANT)
            record = ledger.cosign(ledger.issue_checkpoint())
            assert record.tree_size == 601
            http = loopback_http.client(base_url=server.base_url + "/v1/tlog/", timeout=10)
            reader = {"Authorization": f"Bearer {tokens['reader']}"}

            served = http.get("checkpoint")
            assert served.status_code == 200 and served.headers["content-type"].startswith("text/plain")
            assert "no-cache" in served.headers["cache-control"]
            text = spec.verify_note(served.text, log_vkey)
            assert spec.verify_cosignature(served.text, witness.vkey) > 0
            latest = loopback_http.get(f"{server.base_url}/v1/checkpoints/latest", headers=reader).json()
            assert spec.verify_cosignature(latest["checkpoint"]["note"], witness.vkey) > 0
            origin, size, root = spec.checkpoint(text)
            assert size == 601 and origin == ledger.origin

            leaves: list[bytes] = []
            for n in range(size // 256 + 1):
                width = min(256, size - n * 256)
                got = http.get(spec.tile_url(0, n, width))
                assert got.status_code == 200, (n, width, got.text)
                assert "immutable" in got.headers["cache-control"]
                assert got.headers["content-type"] == "application/octet-stream"
                leaves += spec.split_hashes(got.content)
            assert spec.mth(leaves) == root  # the root, rebuilt from the tiles alone
            level1 = spec.split_hashes(http.get(spec.tile_url(1, 0, size // 256)).content)
            assert level1 == [spec.mth(leaves[i * 256 : (i + 1) * 256]) for i in range(size // 256)]

            for position in (2, 256, 257, 600, 601):
                answer = loopback_http.get(
                    f"{server.base_url}/v1/events/{position}/inclusion-proof",
                    params={"tree_size": size},
                    headers=reader,
                ).json()
                proof = [bytes.fromhex(h) for h in answer["inclusion_proof"]["hashes"]]
                assert proof == spec.path(position - 1, leaves)
                assert spec.root_from_inclusion(position - 1, size, leaves[position - 1], proof) == root

            operator = {"Authorization": f"Bearer {tokens['operator']}"}
            bundle = http.get(spec.tile_url("entries", 2, size - 512), headers=operator)
            assert bundle.status_code == 200 and "immutable" in bundle.headers["cache-control"]
            entries = spec.entries_of_bundle(bundle.content)
            assert [spec.leaf(entry) for entry in entries] == leaves[512:]
            assert http.get(spec.tile_url("entries", 0, 256)).status_code == 401
            admin = {"Authorization": f"Bearer {tokens['admin']}"}
            assert http.get(spec.tile_url("entries", 0, 256), headers=admin).status_code == 403

            assert http.get(spec.tile_url(0, 2, 90)).status_code == 404  # past the tree
            assert http.get("tile/0/x000/002.p/89").status_code == 404  # not the canonical path
            assert http.get("tile/0/002.p/089").status_code == 404
            assert http.get("tile/64/000").status_code == 404
            assert base64.b64encode(root).decode() in served.text
