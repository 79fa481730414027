"""12 console Proofs checks at once over real HTTP, and searches meanwhile (median and max),
on a store made by `scripts/bench_console_proofs.py --dir DIR`. Runs on any checkout
(PYTHONPATH=that checkout) so before and after can be compared on the same store.

    PYTHONPATH=. python scripts/bench_console_proofs_http.py --dir DIR
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from pathlib import Path

import httpx

from ledger.config import LedgerConfig
from ledger.domain.entries import utc_now
from ledger.tlog.checkpoints import make_checkpoint
from tests.api_support import LoopbackServer, api_config, make_tokens

CHECKS = 12


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", type=Path, required=True)
    args = parser.parse_args()
    config = api_config(LedgerConfig(data_dir=args.dir / "big", run_checkpointer=False))
    tokens = make_tokens(config)
    server = LoopbackServer(config)
    server.thread.start()
    started = time.perf_counter()
    while not server.server.started:  # a first start builds the read models: minutes
        if not server.thread.is_alive() or time.perf_counter() - started > 1800:
            raise RuntimeError("the server did not start")
        time.sleep(0.2)
    try:
        base, services = server.base_url, server.app.state.services
        while services.projection_health()[1] > 0:
            time.sleep(1)
        ledger = services.ledger
        note = make_checkpoint(
            seq=1, origin=ledger.origin, tree_size=1000, root=ledger.tree.root(1000),
            issued_at=utc_now(), key=ledger.signing_key(),
        ).note  # fmt: skip
        origin = {"Origin": base}
        with httpx.Client(base_url=base, timeout=120) as http:
            form = {"token": tokens["admin"], "next": "/console/proofs"}
            assert http.post("/console/sign-in", data=form, headers=origin).status_code == 303
            csrf = http.get("/console/proofs").text.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
            cookies = dict(http.cookies)

        def search() -> float:
            began = time.perf_counter()
            answer = httpx.post(
                base + "/v1/search",
                json={"input": {"query": "audit logs kept", "top_k": 3}},
                headers={"Authorization": f"Bearer {tokens['admin']}"},
                timeout=120,
            )
            assert answer.status_code in (200, 201), answer.text
            return time.perf_counter() - began

        alone = [search() for _ in range(15)]
        statuses: list[int] = []

        def check() -> None:
            with httpx.Client(base_url=base, timeout=120, cookies=cookies) as client:
                data = {"checkpoint": note, "csrf_token": csrf}
                statuses.append(client.post("/console/proofs", data=data, headers=origin).status_code)

        began = time.perf_counter()
        threads = [threading.Thread(target=check) for _ in range(CHECKS)]
        for thread in threads:
            thread.start()
        during = []
        while any(thread.is_alive() for thread in threads):
            during.append(search())
        for thread in threads:
            thread.join()
        print(
            f"entries {ledger.size}: search alone median {statistics.median(alone) * 1000:.0f} ms; "
            f"during {CHECKS} checks median {statistics.median(during) * 1000:.0f} ms, "
            f"max {max(during) * 1000:.0f} ms; checks answered {sorted(statuses)} "
            f"in {time.perf_counter() - began:.1f} s"
        )
    finally:
        server.__exit__(None, None, None)


if __name__ == "__main__":
    main()
