"""HTTP API and command line: adapters over the ledger."""
