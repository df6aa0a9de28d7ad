"""Keep API keys out of every text ecgtrace prints or stores.

A server may echo the caller's credentials back (a 401 saying ``Incorrect API
key provided: Bearer sk-...``, a 500 body repeating the request headers). Every
error text that reaches stderr, a checkpoint, ``samples.jsonl`` or a report
passes through :func:`redact` first, which removes

* every key an examinee read from the environment (:func:`register_secret`,
  called where the key is read), wherever it appears;
* any ``Authorization:`` / ``Bearer`` value and ``api_key=...`` style field,
  whatever the key (a key the process never read, e.g. a proxy's).
"""

from __future__ import annotations

import re
import threading

#: What replaces a secret.
MASK = "[redacted]"
#: Shorter values are not treated as secrets (a placeholder such as "x" would mask every x).
MIN_SECRET_CHARS = 8

_SECRETS: set[str] = set()
_LOCK = threading.Lock()
_PATTERNS = (
    re.compile(r"(?i)(\bbearer\s+)(?!\[redacted\])[^\s\"',;)}\]]+"),
    re.compile(r"(?i)(\bauthorization\b[\"']?\s*[:=]\s*[\"']?)(?:(?:basic|token|digest)\s+)?(?!bearer\b|\[redacted\])[^\s\"',;)}\]]+"),
    re.compile(r"(?i)(\b(?:x-)?api[-_]?key\b[\"']?\s*[:=]\s*[\"']?)(?!\[redacted\])[^\s\"',;)}\]]+"),
)


def register_secret(value: str | None) -> None:
    """Remember ``value`` (an API key read from the environment) so that :func:`redact` removes it everywhere."""
    if value and len(value) >= MIN_SECRET_CHARS:
        with _LOCK:
            _SECRETS.add(value)


def redact(text: str, *, patterns: bool = True) -> str:
    """``text`` without any registered secret and (``patterns``) without credential-looking values.

    Error texts get both; a model's own words (``patterns=False``, e.g. a whole
    samples.jsonl line) only lose registered keys, so "the bearer of bad news"
    stays as it was said.
    """
    if not text:
        return text
    with _LOCK:
        secrets = sorted(_SECRETS, key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    if patterns:
        for pattern in _PATTERNS:
            text = pattern.sub(lambda m: m.group(1) + MASK, text)
    return text
