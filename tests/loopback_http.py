"""httpx for the tests' own calls to their loopback servers, with one TLS context per process.

httpx builds a new `SSLContext` (loading certifi's CA bundle: ~10-20 ms of CPU) for every
`Client` and every top-level `httpx.get`/`post`, even for a plain `http://127.0.0.1` URL; the
suite's polls and load loops made thousands of them. These take the same context httpx makes
by default, made once; every other setting and every exception is httpx's own."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import httpx

TLS = httpx.create_ssl_context()


def get(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.get(url, verify=TLS, **kwargs)


def post(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.post(url, verify=TLS, **kwargs)


def put(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.put(url, verify=TLS, **kwargs)


def delete(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.delete(url, verify=TLS, **kwargs)


def request(method: str, url: str, **kwargs: Any) -> httpx.Response:
    return httpx.request(method, url, verify=TLS, **kwargs)


def stream(method: str, url: str, **kwargs: Any) -> AbstractContextManager[httpx.Response]:
    return httpx.stream(method, url, verify=TLS, **kwargs)


def client(**kwargs: Any) -> httpx.Client:
    return httpx.Client(verify=TLS, **kwargs)
