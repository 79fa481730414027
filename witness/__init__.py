"""A C2SP `tlog-witness`: its own process, its own Ed25519 key and its own storage.

It cosigns a log's checkpoint only when it is consistent with the last one it
cosigned for that log, so a log cut back or forked after a witness saw it cannot
get a cosignature again. `citeledger witness init|add-log|serve|vkey`.
"""
