"""What is never stored: secrets (redacted in place) and <private> spans (removed), one pass per text.

The known token formats come from Yelp's detect-secrets (1.5.0, Apache-2.0). Its fork
bc-detect-secrets (Bridgecrew, 1.5.52) releases more often, but for Checkov's needs: it lacks the
GitLab, OpenAI, PyPI, Telegram and Discord detectors, adds a dependency (unidiff), and was no
faster on free text (2.0 ms against 1.7 ms of wall time for a 300-character line through every
plugin, measured side by side). Both are built to scan files line by line through every plugin,
which costs 208 µs of CPU for a 200-character memory and 12 ms per 10 kB of command output; so
this runs only the format detectors' own compiled patterns (`RegexBasedDetector.denylist`), and
only on the lines holding a candidate token (a run of 12+ token characters that is not a hex
SHA, UUID or hash): 31 µs and 3.9 ms (benchmarks/secrets_eval.py, issue 46). The library's
Shannon entropy judges the value of a name that only may be secret (`SORT_KEY=created_at` stays,
`STRIPE_KEY=x9F...` goes) and a long random token on a line that speaks of a secret. Its keyword
and high-entropy plugins are left out: they are tuned for source files and flag hashes, base64
fixtures and SHAs, which a memory must keep byte for byte.

What such detectors miss in free text is matched here: a password inside a URL (the user and host
are kept: `postgres://deploy:[REDACTED]@db.internal:5432/app`), `NAME=value`, `NAME: value` and
`--name value` when the name says secret (the name is kept: `STRIPE_KEY=[REDACTED]`),
Authorization / Cookie headers and bearer tokens, JWTs, PEM private-key blocks, and the formats
newer than the library (Anthropic, Hugging Face, Google, GitHub fine-grained, Google refresh
tokens, ...); and in engram.core.secret_phrases, credentials as people write them: named in a
sentence with the value after or before the name, of any alphabet, hex included ("the NewsAPI key
[REDACTED]"), a URL's credential query parameter (`&appid=[REDACTED]&units=metric`), a value in a
JSON object under a secret's name, `curl -u`, database clients and expect scripts. What a name and
a value say (engram.core.secret_values) uses the library's filters and entropy to keep look-alikes:
digests after `sha256:` or `sha512-`, short SHAs, UUID keys, base64 fixtures, paths, versions.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Iterable

from engram.core.secret_phrases import after_an_api, in_sentences, in_urls_and_commands
from engram.core.secret_values import DIGEST_PREFIX, inside_random_run, looks_random, plain_value, secret_name

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
    r"(?i)(?<=aws.secret.access.key)(?: \[\w*\])?[\"']?\s*[=:]\s*[\"']?([A-Za-z0-9/+=]{40})",  # `aws configure` too
    r"\bsk-ant-[A-Za-z0-9_\-]{20,}",  # Anthropic
    r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",  # OpenAI
    r"\bgh[pousr]_[A-Za-z0-9]{36,}\b",  # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{22,}\b",
    r"\bglpat-[A-Za-z0-9_\-]{20,}",  # GitLab
    r"\bhf_[A-Za-z0-9]{30,}\b",  # Hugging Face
    r"\bAIza[0-9A-Za-z_\-]{35}\b",  # Google API key
    r"\bGOCSPX-[A-Za-z0-9_\-]{20,}",  # Google OAuth client secret
    r"\bya29\.[A-Za-z0-9_\-]{20,}",  # Google OAuth access token
    r"(?<![\w/])1//0[0-9A-Za-z_\-]{40,}",  # Google OAuth refresh token (`firebase login:ci`)
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

# Not after ? or &: a URL's query parameter is QUERY_PARAM's (its value ends at the next &); not
# after /: inside a run of base64 ("…/GaeoIoofcPw==" is no PW=). After + it is: a diff's added line.
_NAME = r"(?<![\w.?&/-])(--?[A-Za-z][\w.-]*|[A-Za-z_][\w.-]*)"
_VALUE = r"(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'`,;)}\]]+)"
ASSIGNED = re.compile(_NAME + r"([\"']?\s*(?:=|:=|:)[ \t]*)" + _VALUE)
FLAG_VALUE = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)([ \t]+)" + r"(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'`-][^\s\"'`]*)")
# The password runs to the last @ before the host: people paste `app:Pizza8110@@localhost` unencoded.
URL_CREDENTIALS = re.compile(r"\b([a-z][a-z0-9+.\-]*://[^\s:/@\"'<>]*:)([^\s/\"'<>]+)(@[\w.\-\[\]]+)", re.IGNORECASE)
HEADER = re.compile(r"(?i)\b((?:proxy-)?authorization|cookie|set-cookie)(\s*:\s*)([^\r\n\"']+)")
BEARER = re.compile(r"(?i)\b((?:bearer|token|basic)\s+)([A-Za-z0-9_\-.=+/~]{12,})")
_DIGEST_BEFORE = re.compile(r"(?i)(?:sha(?:1|224|256|384|512)|md5|blake2[bs]?|sha3|\bh1)[-:_]\Z")
# A line with no run of 16 token characters (12 holding a digit) holds no format token.
_CANDIDATE = re.compile(r"(?=[A-Za-z_\-+=]*[0-9])[A-Za-z0-9_\-+=]{12,}|[A-Za-z0-9_\-+=]{16,}")
# A line naming a secret (or carrying a header or a URL with a user) is where the context rules run.
_SECRET_CUE = re.compile(
    r"(?i)pass|assword|pwd|pw\b|secret|token|auth|credential|creds|key|cookie|dsn|session|bearer|appid|app_id|sig|"
    r"://[^\s/@]*:[^\s/@]*@|-u\b|--user|mysql|mariadb|redis-cli|chave|senha|\bcl[eé]f?\b|mot de passe|clave|"
    r"contraseña|passwort|schlüssel"
)
_SECRET_CUE_LOWER = re.compile(_SECRET_CUE.pattern.removeprefix("(?i)"))
_RANDOM_TOKEN = re.compile(r"(?<![\w/.+=%-])[A-Za-z0-9_\-+]{20,}={0,2}(?![\w/.+=-])")
_HEXISH = re.compile(r"[0-9a-fA-F-]+")
WINDOW_GAP = 200  # lines this close are scanned as one window (fewer calls per pattern)


def _windows(text: str, cue: re.Pattern) -> list[tuple[int, int]]:
    """(start, end) of the lines holding a match of `cue`, neighbours merged: where a rule runs."""
    out: list[list[int]] = []
    scan = text
    if cue is _SECRET_CUE and text.isascii():  # a case-sensitive search of the lowered text: 4x faster
        scan, cue = text.lower(), _SECRET_CUE_LOWER
    pos = 0
    while (m := cue.search(scan, pos)) is not None:
        pos = m.end()
        if cue is _CANDIDATE and _HEXISH.fullmatch(m.group()):
            continue  # a SHA, a UUID or a content hash is no format's token
        if cue is not _CANDIDATE and inside_random_run(text, m.start(), m.end()):
            continue  # "…Kf336PwdEPEm1…" in a base64 fixture names no password
        a = text.rfind("\n", 0, m.start()) + 1
        b = text.find("\n", m.end())
        b = len(text) if b < 0 else b
        if out and a <= out[-1][1] + WINDOW_GAP:
            out[-1][1] = b
        else:
            out.append([a, b])
        pos = max(pos, b)  # the rest of this line is in the window already
    return [(a, b) for a, b in out]


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
        before, out = text, self._redact(text)
        for _ in range(3):  # a redaction can make a word of what was part of one: redact to a fixed point
            if out == before:
                break
            before, out = out, self._redact(out)
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
            for r in self._formats:  # a pattern with a group marks the secret as that group
                spans.extend(m.span(1 if r.groups else 0) for m in r.finditer(text, start, end))
            for r in _library_patterns():
                for m in r.finditer(text, start, end):
                    # A pattern with a group marks the secret as that group (the library's findall).
                    g = next((i for i in range(1, r.groups + 1) if m.group(i)), 0)
                    spans.append(m.span(g) if g and len(m.group(g)) >= 8 else m.span())
        for r in self._own:
            spans.extend(m.span() for m in r.finditer(text))
        for start, end in _windows(text, _SECRET_CUE):
            spans.extend(self._contextual(text, start, end))
        if "api" in text or "API" in text:
            spans.extend(after_an_api(text))
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
        yield from in_urls_and_commands(text, start, end)
        yield from in_sentences(text, start, end)
        for r in (ASSIGNED, FLAG_VALUE):
            pos = start
            while (said := r.search(text, pos, end)) is not None:
                pos = said.start(3)  # the value may itself be NAME=value: "env: PGPASSWORD=..."
                kind = secret_name(said.group(1))
                if r is FLAG_VALUE and re.search(r"[0-9]", said.group(1)):
                    continue  # "-pS3cret db": a value attached to its flag (TOOL_PASSWORD's)
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
            if DIGEST_PREFIX.match(v) or _DIGEST_BEFORE.search(text, max(m.start() - 8, 0), m.start()):
                continue  # sha512-… (an integrity hash), SHA256:… (a key's fingerprint)
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
            return {self._field_name(k, x): self.value(x) for k, x in v.items()}
        return v

    def _field_name(self, name, value):
        """A field's name redacted: a secret's format ({"ghp_…": …}), or a random name its value
        says is a key ({"8d2f…": "the TMDB key"}, read as "the TMDB key 8d2f…")."""
        if not isinstance(name, str):
            return name
        out = self(name)
        if out == name and isinstance(value, str) and len(name) >= 8 and name not in self(f"{value} {name}"):
            return REDACTED
        return out
