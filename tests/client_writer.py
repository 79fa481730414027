"""A service process for the client tests: records retrievals through the client with a
spool, printing each acknowledged task id (recorded or spooled) as one line, flushed.

    python -m tests.client_writer BASE_URL TOKEN SPOOL_DIR DOC_ID CHUNK_ID PREFIX THREADS SECONDS
"""

from __future__ import annotations

import sys
import threading
import time

from client import Client, RetrievalReceipt, Spooled


def main() -> None:
    base_url, token, spool_dir, doc_id, chunk_id, prefix = sys.argv[1:7]
    threads, seconds = int(sys.argv[7]), float(sys.argv[8])
    lock = threading.Lock()
    ledger = Client(
        base_url, token, spool_dir=spool_dir, drain_interval_s=None, backoff_base_s=0.01, max_attempts=2,
        breaker_threshold=3, breaker_cooldown_s=0.5,
    )  # fmt: skip
    stop = time.monotonic() + seconds

    def work(worker: int) -> None:
        n = 0
        while time.monotonic() < stop:
            task = f"{prefix}-{worker}-{n}"
            n += 1
            body = {
                "query": f"query {task}",
                "engine": "external:client-test",
                "task": {"task_id": task},
                "selected_entries": [
                    {"document_id": doc_id, "chunk_id": chunk_id, "score": "1.5",
                     "snippet": "Audit logs are kept for 180 days."}
                ],
            }  # fmt: skip
            result = ledger.record_retrieval(body)
            kind = (
                "R" if isinstance(result, RetrievalReceipt) else "S" if isinstance(result, Spooled) else "?"
            )
            with lock:
                sys.stdout.write(f"{kind} {task}\n")
                sys.stdout.flush()

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    ledger.close()


if __name__ == "__main__":
    main()
