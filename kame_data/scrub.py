"""The one scrubber every error text from a server or an engine passes through before it reaches
a log, progress.json, rejects.jsonl, the manifest or the terminal: a server that echoes a request
(its Authorization header, its key) must not leak the key into a dataset folder."""

from __future__ import annotations

import logging
import re
import threading

REDACTED = "[redacted]"
_SECRETS: set[str] = set()
_LOCK = threading.Lock()

_PATTERNS = [
    # Authorization: Bearer xyz / authorization=xyz
    (re.compile(r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)(?:(?:bearer|basic|token)\s+)?[^\s,;\"'}]+"),
     r"\1" + REDACTED),
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{4,}"), "Bearer " + REDACTED),
    # api_key=..., "token": "...", x-api-key: ...
    (re.compile(r"(?i)\b((?:x-)?(?:api[_-]?key|access[_-]?token|auth[_-]?token|secret|password|token)[\"']?\s*[:=]\s*"
                r"[\"']?)[^\s,;\"'}&]+"), r"\1" + REDACTED),
    # key-like strings of the usual providers: sk-…, hf_…, ghp_…, xoxb-…, AKIA…
    (re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{12,}"), REDACTED),
    (re.compile(r"\b(?:hf|ghp|gho|ghs|ghu|github_pat|gsk|glpat)_[A-Za-z0-9_-]{12,}"), REDACTED),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), REDACTED),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), REDACTED),
]


def register_secret(value: str | None) -> None:
    """A value (the configured API key) that must never appear in any output."""
    if value and len(value) >= 6:
        with _LOCK:
            _SECRETS.add(value)


def scrub(text: object) -> str:
    """`text` with registered secrets, Authorization headers, bearer tokens and key-like strings
    replaced by [redacted]."""
    out = str(text)
    with _LOCK:
        secrets = sorted(_SECRETS, key=len, reverse=True)
    for value in secrets:
        out = out.replace(value, REDACTED)
    for pattern, repl in _PATTERNS:
        out = pattern.sub(repl, out)
    return out


class ScrubbingFormatter(logging.Formatter):
    """A log formatter whose every line (tracebacks included) goes through `scrub`."""

    def format(self, record: logging.LogRecord) -> str:
        return scrub(super().format(record))
