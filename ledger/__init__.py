"""Write side of citeledger: signed domain events, Merkle checkpoints, the ledger."""
