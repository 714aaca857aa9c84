"""Secrets redaction applied before anything is written."""

from __future__ import annotations

import re
from typing import Iterable

REDACTED = "[REDACTED]"

DEFAULT_PATTERNS: tuple[str, ...] = (
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
    r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b",          # AWS access key id
    r"(?i)aws_secret_access_key\s*[=:]\s*[A-Za-z0-9/+=]{40}",
    r"\bsk-ant-[A-Za-z0-9_\-]{20,}",                                        # Anthropic
    r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",                  # OpenAI
    r"\bgh[pousr]_[A-Za-z0-9]{36,}\b",                                      # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{22,}\b",
)


class Redactor:
    def __init__(self, extra: Iterable[str] = ()):
        pats = list(DEFAULT_PATTERNS)
        for p in extra:
            try:
                re.compile(p)
            except re.error as e:
                raise ValueError(f"ENGRAM_REDACT_PATTERNS: invalid pattern {p!r}: {e}") from None
            pats.append(p)
        self._res = [re.compile(p) for p in pats]

    def __call__(self, text: str) -> str:
        for r in self._res:
            text = r.sub(REDACTED, text)
        return text

    def value(self, v):
        """Redact strings inside JSON-like values (metadata, lists)."""
        if isinstance(v, str):
            return self(v)
        if isinstance(v, list | tuple):
            return type(v)(self.value(x) for x in v)
        if isinstance(v, dict):
            return {k: self.value(x) for k, x in v.items()}
        return v
