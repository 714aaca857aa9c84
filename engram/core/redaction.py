"""What is never stored: secrets (redacted in place) and <private> spans (removed), one pass per text.

The known token formats come from Yelp's detect-secrets (1.5.0, Apache-2.0). Its fork
bc-detect-secrets (Bridgecrew, 1.5.52) releases more often, but for Checkov's needs: it lacks the
GitLab, OpenAI, PyPI, Telegram and Discord detectors, adds a dependency (unidiff), and was no
faster on free text (2.0 ms against 1.7 ms of wall time for a 300-character line through every
plugin, measured side by side). Both are built to scan files line by line through every plugin,
which costs 208 µs of CPU for a 200-character memory and 12 ms per 10 kB of command output; so
this runs only the format detectors' own compiled patterns (`RegexBasedDetector.denylist`), and
only on the lines holding a candidate token (a run of 12+ token characters that is not a hex
SHA, UUID or hash): 37 µs and 3.8 ms (benchmarks/secrets_eval.py). The library's Shannon entropy
judges the value of a name that only may be secret (`SORT_KEY=created_at` stays,
`STRIPE_KEY=x9F...` goes) and a long random token on a line that speaks of a secret. Its keyword
and high-entropy plugins are left out: they are tuned for source files and flag hashes, base64
fixtures and SHAs, which a memory must keep byte for byte.

What such detectors miss in free text is matched here: a password inside a URL (the user and host
are kept: `postgres://deploy:[REDACTED]@db.internal:5432/app`), `NAME=value`, `NAME: value` and
`--name value` when the name says secret (the name is kept: `STRIPE_KEY=[REDACTED]`),
Authorization / Cookie headers and bearer tokens, JWTs, PEM private-key blocks, and the formats
newer than the library (Anthropic, Hugging Face, Google, GitHub fine-grained, ...).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Iterable

REDACTED = "[REDACTED]"
RECENT_KEPT, RECENT_MAX_CHARS = 512, 20_000

# The library's format detectors left out: a public IP address is not a secret, and these three
# match shapes (any long word after "key", any "AKC..." word) that identifiers have too.
_SKIPPED_DETECTORS = {"IPPublicDetector", "ArtifactoryDetector", "BasicAuthDetector"}

PRIVATE_SPAN = re.compile(r"<private>[\s\S]*?(?:</private>|\Z)", re.IGNORECASE)

# Formats the library does not know (or knows only in an older shape).
PEM_BLOCK = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
    r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)"
)
FORMATS: tuple[str, ...] = (
    r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b",  # AWS access key id
    r"(?i)(?<=aws_secret_access_key)[\"']?\s*[=:]\s*[\"']?[A-Za-z0-9/+=]{40}",
    r"\bsk-ant-[A-Za-z0-9_\-]{20,}",  # Anthropic
    r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",  # OpenAI
    r"\bgh[pousr]_[A-Za-z0-9]{36,}\b",  # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{22,}\b",
    r"\bglpat-[A-Za-z0-9_\-]{20,}",  # GitLab
    r"\bhf_[A-Za-z0-9]{30,}\b",  # Hugging Face
    r"\bAIza[0-9A-Za-z_\-]{35}\b",  # Google API key
    r"\bGOCSPX-[A-Za-z0-9_\-]{20,}",  # Google OAuth client secret
    r"\bya29\.[A-Za-z0-9_\-]{20,}",  # Google OAuth access token
    r"\bnpm_[A-Za-z0-9]{36}\b",  # npm
    r"\bpypi-[A-Za-z0-9_\-]{50,}",  # PyPI
    r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{20,}\b",  # Stripe
    r"\bwhsec_[A-Za-z0-9]{24,}\b",  # Stripe webhook secret
    r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",  # Slack
    r"https://hooks\.slack\.com/services/[A-Za-z0-9/]+",  # Slack webhook
    r"\bSG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}\b",  # SendGrid
    r"\b(?:AC|SK)[0-9a-f]{32}\b",  # Twilio
    r"(?i)(?<=AccountKey=)[A-Za-z0-9+/=]{40,}",  # Azure storage
    r"(?i)(?<=SharedAccessSignature=)[^;\s\"']+|(?<=[?&]sig=)[A-Za-z0-9%+/=]{20,}",  # Azure SAS
    r"\bdop_v1_[a-f0-9]{64}\b",  # DigitalOcean
    r"\bshp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}\b",  # Shopify
    r"\bdapi[a-f0-9]{32}\b",  # Databricks
    r"\bAGE-SECRET-KEY-1[0-9A-Z]{58}\b",  # age
    r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*",  # JWT
)

# Names that say their value is secret, as the last part of a name split at _ - . and case
# (PGPASSWORD, DB_PASS, authToken, --api-key); "key" alone only with one of KEY_OWNERS before it.
_SECRET_WORDS = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "credential",
    "credentials",
    "auth",
    "apikey",
    "pwd",
    "cookie",
    "sessionid",
    "dsn",
)
_EXACT_WORDS = {"pass", "pw", "creds"}
_KEY_OWNERS = {
    "api",
    "private",
    "access",
    "secret",
    "session",
    "signing",
    "master",
    "encryption",
    "client",
    "service",
    "account",
    "admin",
    "auth",
    "app",
    "license",
    "webhook",
    "deploy",
}
_NOT_SECRET_NAMES = {
    "pwd",
    "oldpwd",
    "tokens",
    "max_tokens",
    "token_type",
    "token_count",
    "auth_type",
    "author",
    "keyboard",
    "password_hash",
    "token_url",
    "auth_url",
    "secret_name",
    "tokenizer",
    "tokenizers_parallelism",
    "credential_helper",
}
_PLACEHOLDERS = {
    "",
    "none",
    "null",
    "nil",
    "true",
    "false",
    "yes",
    "no",
    "required",
    "optional",
    "redacted",
    "xxx",
    "changeme",
    "example",
    "your_password",
    "your_token",
    "undefined",
}

_NAME = r"(?<![\w.-])(--?[A-Za-z][\w.-]*|[A-Za-z_][\w.-]*)"
_VALUE = r"(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'`,;)}\]]+)"
ASSIGNED = re.compile(_NAME + r"([\"']?\s*(?:=|:=|:)[ \t]*)" + _VALUE)
FLAG_VALUE = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)([ \t]+)" + r"(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'`-][^\s\"'`]*)")
URL_CREDENTIALS = re.compile(r"\b([a-z][a-z0-9+.\-]*://[^\s:/@\"'<>]+:)([^\s@/\"'<>]+)(@[\w.\-\[\]]+)", re.IGNORECASE)
HEADER = re.compile(r"(?i)\b((?:proxy-)?authorization|cookie|set-cookie)(\s*:\s*)([^\r\n\"']+)")
BEARER = re.compile(r"(?i)\b((?:bearer|token|basic)\s+)([A-Za-z0-9_\-.=+/~]{12,})")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# A line with no run of 16 token characters (12 holding a digit) holds no format token.
_CANDIDATE = re.compile(r"(?=[A-Za-z_\-+=]*[0-9])[A-Za-z0-9_\-+=]{12,}|[A-Za-z0-9_\-+=]{16,}")
# A line naming a secret (or carrying a header or a URL with a user) is where the context rules run.
_SECRET_CUE = re.compile(
    r"(?i)pass|pwd|pw\b|secret|token|auth|credential|creds|key|cookie|dsn|session|bearer|"
    r"://[^\s/@]+:[^\s/@]*@"
)
_RANDOM_TOKEN = re.compile(r"(?<![\w/.+=-])[A-Za-z0-9_\-+]{20,}={0,2}(?![\w/.+=-])")
_HEXISH = re.compile(r"[0-9a-fA-F-]+")
WINDOW_GAP = 200  # lines this close are scanned as one window (fewer calls per pattern)


def secret_name(name: str) -> str:
    """ "strong" when the name says its value is secret, "key" when it may be (FOO_KEY), else ""."""
    bare = name.lstrip("-").strip("\"'")
    low = bare.lower()
    if low in _NOT_SECRET_NAMES or low.endswith(
        ("_url", "_path", "_file", "_dir", "_type", "_count", "_length", "_len", "_ttl", "_expiry", "_expires", "_id")
    ):
        return ""
    parts = [p for p in re.split(r"[_.\-]+", _CAMEL.sub("_", bare).lower()) if p]
    if not parts:
        return ""
    last = parts[-1]
    if last in _EXACT_WORDS or (last.endswith(_SECRET_WORDS) and not (len(parts) == 1 and last == "pwd")):
        return "strong"
    if last in ("key", "keys"):
        return "strong" if len(parts) > 1 and parts[-2] in _KEY_OWNERS else "key" if len(parts) > 1 else ""
    if last.endswith("key") and last[:-3] in _KEY_OWNERS:  # apikey, privatekey
        return "strong"
    return ""


def looks_random(value: str, least: float = 3.0) -> bool:
    """A value shaped like a generated secret: long, letters and digits mixed, high entropy (the
    library's Shannon entropy, bits per character)."""
    if len(value) < 12 or not re.search(r"[0-9]", value) or not re.search(r"[A-Za-z]", value):
        return False
    return _entropy()(value) > least


# detect-secrets is imported on first need (it imports requests: some 70 ms): most texts, and
# most of what a hook logs, hold no token, and `engram hook` runs at every prompt.
@cache
def _entropy():
    from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString

    return Base64HighEntropyString().calculate_shannon_entropy


def _windows(text: str, cue: re.Pattern) -> list[tuple[int, int]]:
    """(start, end) of the lines holding a match of `cue`, neighbours merged: where a rule runs."""
    out: list[list[int]] = []
    for m in cue.finditer(text):
        if (out and m.start() < out[-1][1]) or (cue is _CANDIDATE and _HEXISH.fullmatch(m.group())):
            continue  # a SHA, a UUID or a content hash is no format's token
        a = text.rfind("\n", 0, m.start()) + 1
        b = text.find("\n", m.end())
        b = len(text) if b < 0 else b
        if out and a <= out[-1][1] + WINDOW_GAP:
            out[-1][1] = b
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def plain_value(value: str, strong: bool) -> bool:
    """True when a value assigned to a secret-looking name is not itself a secret (a placeholder,
    a reference to another variable, a path, a number, a word in a sentence)."""
    v = value.strip("\"'")
    if v.lower() in _PLACEHOLDERS or "REDACTED" in v or set(v) <= set("*x.-_<>"):
        return True
    if v.startswith(("$", "%", "<", "{", "@", "process.env", "os.environ")) or v.endswith((">", "}")):
        return True
    if v.startswith(("/", "./", "~/", "../")) or re.fullmatch(r"[0-9]{1,5}", v):
        return True
    if re.fullmatch(r"[A-Za-z_]\w*\(.*", v):  # a call: get_secret(...)
        return True
    return not strong and not looks_random(v)


@cache
def _library_patterns() -> tuple[re.Pattern, ...]:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import BasePlugin, RegexBasedDetector

    pats: list[re.Pattern] = []
    # Its signature returns a TypeVar's type that nothing binds (which a checker reads as Never).
    detectors: Iterable[type[BasePlugin]] = get_mapping_from_secret_type_to_class().values()
    for detector in detectors:
        if issubclass(detector, RegexBasedDetector) and detector.__name__ not in _SKIPPED_DETECTORS:
            pats.extend(detector().denylist)
    return tuple(pats)


class Redactor:
    """`Redactor(extra, allow)(text)`: the text with every secret replaced by [REDACTED] and every
    <private> span removed. `extra`: the user's own regexes (the whole match is redacted); `allow`:
    values never redacted, wherever a rule finds them."""

    def __init__(self, extra: Iterable[str] = (), allow: Iterable[str] = ()):
        own = []
        for p in extra:
            try:
                own.append(re.compile(p))
            except re.error as e:
                raise ValueError(f"ENGRAM_REDACT_PATTERNS: invalid pattern {p!r}: {e}") from None
        self._formats = [re.compile(p) for p in FORMATS]
        self._own = own  # the user's patterns run over the whole text: no gate knows their shape
        self._allow = {a for a in allow if a}
        # Texts this redactor returned lately: the store's funnel sees again what the engine
        # redacted a moment before (engram.store.redacting), and redaction is idempotent.
        self._recent: dict[str, None] = {}

    def __call__(self, text: str) -> str:
        if not isinstance(text, str) or not text or text in self._recent:
            return text
        out = self._redact(text)
        if len(out) <= RECENT_MAX_CHARS:
            if len(self._recent) >= RECENT_KEPT:
                self._recent.clear()
            self._recent[out] = None
        return out

    def _redact(self, text: str) -> str:
        if "<" in text:
            text = PRIVATE_SPAN.sub("", text)
        spans: list[tuple[int, int]] = []
        if "PRIVATE KEY" in text:
            spans.extend(m.span() for m in PEM_BLOCK.finditer(text))
        # The token patterns (ours and the library's) run only on the lines holding a candidate
        # token: most of a command's output and all of a chat turn hold none.
        for start, end in _windows(text, _CANDIDATE):
            for r in self._formats:
                spans.extend(m.span() for m in r.finditer(text, start, end))
            for r in _library_patterns():
                for m in r.finditer(text, start, end):
                    # A pattern with a group marks the secret as that group (the library's findall).
                    g = next((i for i in range(1, r.groups + 1) if m.group(i)), 0)
                    spans.append(m.span(g) if g and len(m.group(g)) >= 8 else m.span())
        for r in self._own:
            spans.extend(m.span() for m in r.finditer(text))
        for start, end in _windows(text, _SECRET_CUE):
            spans.extend(self._contextual(text, start, end))
        return self._apply(text, spans)

    def _contextual(self, text: str, start: int, end: int) -> Iterable[tuple[int, int]]:
        """Spans of values a name, a flag, a header or a URL says are secret, in text[start:end]."""
        for m in URL_CREDENTIALS.finditer(text, start, end):
            yield m.span(2)
        for m in HEADER.finditer(text, start, end):
            yield m.span(3)
        for m in BEARER.finditer(text, start, end):
            if m.group(1).lower().startswith("bearer") or looks_random(m.group(2)):
                yield m.span(2)
        for r in (ASSIGNED, FLAG_VALUE):
            pos = start
            while (said := r.search(text, pos, end)) is not None:
                pos = said.start(3)  # the value may itself be NAME=value: "env: PGPASSWORD=..."
                kind = secret_name(said.group(1))
                if not kind or (r is FLAG_VALUE and kind == "key") or plain_value(said.group(3), kind == "strong"):
                    continue
                if ":" in said.group(2) and "=" not in said.group(2) and re.fullmatch(r"[A-Za-z]{1,11}", said.group(3)):
                    continue  # "the token: expired ...": prose, not a value
                a, b = said.span(3)
                if text[a] in "\"'":
                    a, b = a + 1, b - 1
                pos = said.end()
                yield a, b
        # The keyword and entropy heuristic: on a line that speaks of a secret, a long token that
        # looks generated (not a hash, not a UUID, not a path) is one.
        for m in _RANDOM_TOKEN.finditer(text, start, end):
            v = m.group()
            if not _HEXISH.fullmatch(v) and "/" not in v and "." not in v and looks_random(v, 3.5):
                yield m.span()

    def _apply(self, text: str, spans: list[tuple[int, int]]) -> str:
        merged: list[list[int]] = []
        for start, end in sorted(spans):
            if start >= end:
                continue
            if merged and start < merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        out, pos = [], 0
        for start, end in merged:
            found = text[start:end]
            out.append(text[pos:start])
            out.append(found if found in self._allow or found == REDACTED else REDACTED)
            pos = end
        return "".join(out) + text[pos:]

    def value(self, v):
        """Redact strings inside JSON-like values (metadata, lists)."""
        if isinstance(v, str):
            return self(v)
        if isinstance(v, list | tuple):
            return type(v)(self.value(x) for x in v)
        if isinstance(v, dict):
            return {k: self.value(x) for k, x in v.items()}
        return v
