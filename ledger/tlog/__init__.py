"""The transparency-log core: RFC 9162 Merkle math, C2SP notes, checkpoints, cosignatures, tlog-
tiles paths, COSE receipts, canonical JSON and Ed25519 signing.

Pure: imports nothing of ledger/ outside this package, no store, no web framework, no network
client.
"""
