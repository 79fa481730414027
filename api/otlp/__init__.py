"""OTLP/HTTP trace ingestion (`POST /v1/traces`): the route, the decoding and its limits side by side."""
