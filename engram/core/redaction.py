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
`--name value` when the name says secret (the name is kept: `STRIPE_KEY=[REDACTED]`), a URL's
query parameter that names a credential (`?q=Lagos&appid=[REDACTED]&units=metric`: only the
value goes), `curl -u user:[REDACTED]` and the password flags of mysql, sshpass, redis-cli and
docker login, a key, token, secret or password named in a sentence with a generated-looking value
after or before it, of any alphabet, hex included ("the NewsAPI key [REDACTED]", "[REDACTED] is
the client secret"), Authorization / Cookie headers and bearer tokens, JWTs, PEM private-key
blocks, and the formats newer than the library (Anthropic, Hugging Face, Google, GitHub
fine-grained, ...). The library's own filters (`detect_secrets.filters.heuristic`: sequential
strings, UUIDs, templated values) keep a look-alike named like a secret; a digest after `sha256:`
or `sha512-`, a value after "commit", "hash" or "fingerprint", a path and a version are kept too.
"""

from __future__ import annotations

import math
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

# Not after ? or &: a URL's query parameter is QUERY_PARAM's (its value ends at the next &); not
# after / or +: inside a run of base64 ("…/GaeoIoofcPw==" is no PW=).
_NAME = r"(?<![\w.?&/+-])(--?[A-Za-z][\w.-]*|[A-Za-z_][\w.-]*)"
_VALUE = r"(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'`,;)}\]]+)"
ASSIGNED = re.compile(_NAME + r"([\"']?\s*(?:=|:=|:)[ \t]*)" + _VALUE)
FLAG_VALUE = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)([ \t]+)" + r"(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'`-][^\s\"'`]*)")
# The password runs to the last @ before the host: people paste `app:Pizza8110@@localhost` unencoded.
URL_CREDENTIALS = re.compile(r"\b([a-z][a-z0-9+.\-]*://[^\s:/@\"'<>]*:)([^\s/\"'<>]+)(@[\w.\-\[\]]+)", re.IGNORECASE)
HEADER = re.compile(r"(?i)\b((?:proxy-)?authorization|cookie|set-cookie)(\s*:\s*)([^\r\n\"']+)")
BEARER = re.compile(r"(?i)\b((?:bearer|token|basic)\s+)([A-Za-z0-9_\-.=+/~]{12,})")
# A URL's query parameter: the value ends at the next & or #, and only the value is redacted.
QUERY_PARAM = re.compile(r"[?&]([A-Za-z_][\w.\-\[\]]*)=([^&#\s\"'<>`\\)]+)")
# Query parameters that hold a credential though secret_name cannot tell from their name alone:
# OpenWeather's appid, Google's key, Azure SAS and S3 presigned-URL signatures.
_QUERY_KEY_NAMES = {"appid", "app_id", "key", "sig", "signature", "x-amz-signature", "jwt", "auth", "session"}
# `curl -u user:password`: the user is kept.
CURL_USER = re.compile(
    r"\b(?:curl|wget|xh|http|https)\b[^\n|;]*?\s(?:-u|--user|--proxy-user)(?:[ \t]+|=)[\"']?[^\s:\"']*:([^\s\"']+)"
)
# Tools whose password flag is a short one (-p is a port elsewhere): mysql's attached -pSECRET,
# sshpass -p, redis-cli -a, docker login -p.
TOOL_PASSWORD = re.compile(
    r"\b(?:(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\n|;]*?\s-p|sshpass[ \t]+-p[ \t]*|"
    r"redis-cli\b[^\n|;]*?\s-a[ \t]+|docker[ \t]+login\b[^\n|;]*?\s-p[ \t]+)"
    r"(\"[^\"\n]+\"|'[^'\n]+'|[^\s\"']+)"
)
# A credential named in a sentence: "the NewsAPI key 8388e4…", "client secret: …", "… is my token".
_PROSE_NOUN = re.compile(
    r"(?i)(?<![\w./$-])(?:(api|access|secret|client|app|private|auth|session|refresh|personal[ _-]access|"
    r"license|master|signing|bearer|bot|deploy|webhook|consumer|service)[ _-]?)?"
    r"(key|keys|token|tokens|secret|secrets|password|passwd|passphrase|passcode|credentials?|apikey|appid|app[ _]id|"
    r"clé|cle|clef|mot de passe|chave|senha|clave|contraseña|passwort|schlüssel)"
    r"(?![\w/-])"
)
_STRONG_NOUNS = {
    "token", "tokens", "secret", "secrets", "password", "passwd", "passphrase", "passcode", "apikey",
    "mot de passe", "senha", "contraseña", "passwort",
}  # fmt: skip
_PASSWORD_NOUNS = {"password", "passwd", "passphrase", "mot de passe", "senha", "contraseña", "passwort"}
# The word before "key" or "token" that says it is not a credential (a database's primary key, a
# cache key, an SSH host key, a pagination token, the count of an LLM's tokens).
_NOT_CREDENTIAL_OWNERS = {
    "public", "gpg", "pgp", "ssh", "host", "primary", "foreign", "sort", "partition", "cache", "composite",
    "unique", "idempotency", "dedup", "row", "hash", "lookup", "map", "dict", "object", "s3", "redis",
    "registry", "index", "shard", "join", "routing", "hot", "music", "page", "next", "continuation",
    "cancellation", "sync", "pagination", "max", "input", "output", "prompt", "completion", "design", "css",
    "csrf",
}  # fmt: skip
# Words between the name and a value that say the value is something else (a commit, a digest, an id).
_NOT_CREDENTIAL_WORDS = {
    "commit", "commits", "sha", "sha1", "sha256", "hash", "digest", "checksum", "fingerprint", "id", "ids",
    "uuid", "version", "build", "image", "ref", "revision", "rev", "tag", "branch", "file", "path", "name",
    "arn", "url", "length", "count", "size", "ttl", "expiry", "type", "format", "field", "header",
    "variable", "env", "column", "table", "prefix", "suffix", "hint", "rotation", "usage", "limit", "limits",
    "budget", "used", "spent",
}  # fmt: skip
# A word just before a value that says it is a commit or a digest ("commit 3f2a… is the key fix").
_NOT_CREDENTIAL_BEFORE = {
    "commit", "sha", "sha1", "sha256", "hash", "digest", "checksum", "fingerprint", "revision", "rev", "image",
    "tag", "ref", "uuid", "object", "blob", "tree",
}  # fmt: skip
_LINK_BEFORE = re.compile(r"\s*(?:[:=,(—–-]|->|=>|(?:is|was|as|this|that|are|being)\b)", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z0-9_\-+/.~!@#$%^*?]+={0,2}")  # a value in a sentence (not its = or &)
_DIGEST_PREFIX = re.compile(r"(?i)^(?:sha(?:1|224|256|384|512)|md5|blake2[bs]?|sha3|h1)[-:_]")  # h1: go.sum
_DIGEST_BEFORE = re.compile(r"(?i)(?:sha(?:1|224|256|384|512)|md5|blake2[bs]?|sha3|\bh1)[-:_]\Z")
_FILE_NAME = re.compile(
    r"(?i)\.(?:py|js|ts|tsx|jsx|json|ya?ml|md|txt|toml|lock|sh|go|rs|rb|java|kt|c|h|cpp|html|css|log|tar|gz|"
    r"zip|whl|png|jpe?g|svg|pdf|env|ini|cfg|conf|sql|db)$"
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# A line with no run of 16 token characters (12 holding a digit) holds no format token.
_CANDIDATE = re.compile(r"(?=[A-Za-z_\-+=]*[0-9])[A-Za-z0-9_\-+=]{12,}|[A-Za-z0-9_\-+=]{16,}")
# A line naming a secret (or carrying a header or a URL with a user) is where the context rules run.
_SECRET_CUE = re.compile(
    r"(?i)pass|pwd|pw\b|secret|token|auth|credential|creds|key|cookie|dsn|session|bearer|appid|app_id|sig|"
    r"://[^\s/@]*:[^\s/@]*@|-u\b|--user|mysql|mariadb|redis-cli|chave|senha|\bcl[eé]f?\b|mot de passe|clave|"
    r"contraseña|passwort|schlüssel"
)
_RANDOM_TOKEN = re.compile(r"(?<![\w/.+=%-])[A-Za-z0-9_\-+]{20,}={0,2}(?![\w/.+=-])")
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
    if last == "appid":  # OpenWeather's APPID
        return "key"
    return ""


def looks_random(value: str, least: float = 3.0) -> bool:
    """A value shaped like a generated secret: long, letters and digits mixed, high entropy (the
    library's Shannon entropy, bits per character)."""
    if len(value) < 12 or not re.search(r"[0-9]", value) or not re.search(r"[A-Za-z]", value):
        return False
    return _entropy()(value) > least


# detect-secrets is imported on first need (it imports requests: some 70 ms): most texts, and
# most of what a hook logs, hold no token, and `engram hook` runs at every prompt.
def is_potential_uuid(value: str) -> bool:
    from detect_secrets.filters.heuristic import is_potential_uuid as library_check

    return library_check(value)


@cache
def _entropy():
    from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString

    return Base64HighEntropyString().calculate_shannon_entropy


def generated(value: str, strong: bool, shortest: int = 8) -> bool:
    """A word of a sentence shaped like a generated credential, whatever its alphabet (hex
    included): letters and digits mixed, not a digest, path, file, version, URL, UUID, identifier or
    template. `strong`: the sentence named a token, secret or password (`shortest` characters are
    enough: 8, 7 for a password); else a key (16 and the library's entropy above 3 bits a character)."""
    from detect_secrets.filters.heuristic import is_sequential_string, is_templated_secret

    v = value.rstrip(".:!?")
    if len(v) < shortest or not re.search(r"[0-9]", v) or not re.search(r"[A-Za-z]", v):
        return False
    if len(v) < 16 and re.fullmatch(r"[0-9a-f]+", v):
        return False  # a short SHA: "* 0d97eae (HEAD -> main) Add password reset"
    if _DIGEST_PREFIX.match(v) or "://" in v or _FILE_NAME.search(v) or is_path(v) or v.startswith(("~", "$", "%")):
        return False
    if ("/" in v and not _random_run(v)) or re.fullmatch(r"v?\d+(?:\.\d+)+(?:[-+.]\w+)*", v) or "REDACTED" in v:
        return False
    if is_templated_secret(v) or is_sequential_string(v):
        return False
    if re.fullmatch(r"[a-z]+(?:[_-][a-z0-9]+)+|[A-Z]+(?:_[A-Z0-9]+)+|[a-z]+(?:[A-Z][a-z0-9]*)+", v):
        return False  # token_v2, MAX_TOKENS_4K, refreshToken2: identifiers
    if strong:  # a password people choose: "Summer2024!" has too few characters for entropy to tell
        return len(set(v)) >= 6
    return len(v) >= 16 and not is_potential_uuid(v) and _entropy()(v) > 3.0


def _prose(text: str, start: int, end: int) -> Iterable[tuple[int, int]]:
    """Spans of the values a sentence names as a credential: up to six words after the name
    ("the NewsAPI key 8388…", "client secret is …") or before it when a link joins them
    ("8388… is my NewsAPI key", "…, this is the session secret"); a word that says the value is
    something else ("commit", "hash", "id") stops the search."""
    for m in _PROSE_NOUN.finditer(text, start, end):
        if m.start() and text[m.start() - 1] in "?&":
            continue  # a URL's query parameter: QUERY_PARAM's
        noun = m.group(2).lower()
        strong = noun in _STRONG_NOUNS or (m.group(1) is not None and noun in ("key", "keys"))
        shortest = 7 if noun in _PASSWORD_NOUNS else 8  # people choose "Blue905!" and "hunter22"
        line_start = text.rfind("\n", start, m.start()) + 1
        line_end = text.find("\n", m.end(), end)
        line_end = end if line_end < 0 else line_end
        before = list(_WORD.finditer(text, max(line_start, m.start() - 80), m.start()))
        owner = before[-1].group().lower().strip(".:,") if before else ""
        if m.group(1) is None and noun in ("key", "keys", "token", "tokens") and owner in _NOT_CREDENTIAL_OWNERS:
            continue  # a primary key, a cache key, an SSH host key, a page token
        for w in list(_WORD.finditer(text, m.end(), min(line_end, m.end() + 120)))[:6]:
            word = w.group()
            if word.lower().strip(".:,!?") in _NOT_CREDENTIAL_WORDS or word == "REDACTED":
                break  # something else, or the value already gone (redaction is idempotent)
            if generated(word, strong, shortest):
                yield w.start(), w.start() + len(word.rstrip(".:!?"))
                break
            if word.endswith((".", "!", "?")) and not generated(word, strong, shortest):
                break  # the sentence ended
        for i in range(len(before) - 1, max(len(before) - 8, -1), -1):
            w = before[i]
            word = w.group()
            if (
                word.lower().strip(".:,!?") in _NOT_CREDENTIAL_WORDS
                or word.endswith((".", "!", "?"))
                or word == "REDACTED"
            ):
                break
            if not generated(word.rstrip(",:"), strong, shortest):
                continue
            earlier = before[i - 1].group().lower().strip(".:,") if i else ""
            if _LINK_BEFORE.match(text, w.end()) and earlier not in _NOT_CREDENTIAL_BEFORE:
                yield w.start(), w.start() + len(word.rstrip(",:.!?"))
            break


def _in_urls_and_commands(text: str, start: int, end: int) -> Iterable[tuple[int, int]]:
    """Spans of a URL's credential query parameters and of the passwords `curl -u`, mysql,
    sshpass, redis-cli and docker login are given."""
    for m in QUERY_PARAM.finditer(text, start, end):
        kind = "key" if m.group(1).lower() in _QUERY_KEY_NAMES else secret_name(m.group(1))
        if kind and not plain_value(m.group(2), kind == "strong"):
            yield m.span(2)
    for r in (CURL_USER, TOOL_PASSWORD):
        for m in r.finditer(text, start, end):
            a, b = m.span(1)
            if text[a] in "\"'":
                a, b = a + 1, b - 1
            if not plain_value(text[a:b], True):
                yield a, b


_RUN_CHAR = re.compile(r"[A-Za-z0-9+/=_\-]")


def _inside_random_run(text: str, a: int, b: int) -> bool:
    """True when text[a:b] is part of a long run of base64 characters that looks generated."""
    while a > 0 and b - a < 400 and _RUN_CHAR.match(text, a - 1):
        a -= 1
    while b < len(text) and b - a < 400 and _RUN_CHAR.match(text, b):
        b += 1
    return b - a >= 20 and _random_run(text[a:b].strip("=/_-") or "x")


def _windows(text: str, cue: re.Pattern) -> list[tuple[int, int]]:
    """(start, end) of the lines holding a match of `cue`, neighbours merged: where a rule runs."""
    out: list[list[int]] = []
    for m in cue.finditer(text):
        if (out and m.start() < out[-1][1]) or (cue is _CANDIDATE and _HEXISH.fullmatch(m.group())):
            continue  # a SHA, a UUID or a content hash is no format's token
        if cue is _SECRET_CUE and _inside_random_run(text, m.start(), m.end()):
            continue  # "…Kf336PwdEPEm1…" in a base64 fixture names no password
        a = text.rfind("\n", 0, m.start()) + 1
        b = text.find("\n", m.end())
        b = len(text) if b < 0 else b
        if out and a <= out[-1][1] + WINDOW_GAP:
            out[-1][1] = b
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _random_run(value: str) -> bool:
    """A run of base64 characters with the entropy of generated bytes (a 40-character AWS secret
    has about 5 bits a character; a path or an identifier of that length about 4)."""
    return (
        len(value) >= 20
        and re.fullmatch(r"[A-Za-z0-9+/_\-]+={0,2}", value) is not None
        and all(re.search(p, value) for p in (r"[A-Z]", r"[a-z]", r"[0-9]"))
        and _entropy()(value) > min(4.3, 0.8 * math.log2(len(value)))
    )


def is_path(value: str) -> bool:
    """/etc/app/key, ./secrets, ~/.config/gh: a path (an AWS secret may start with / too, but its
    characters are random)."""
    return bool(re.fullmatch(r"(?:\.{0,2}|~)/[\w.\-/]*", value)) and not _random_run(value)


def plain_value(value: str, strong: bool) -> bool:
    """True when a value assigned to a secret-looking name is not itself a secret (a placeholder,
    a reference to another variable, a path, a number, a word in a sentence)."""
    v = value.strip("\"'")
    if v.lower() in _PLACEHOLDERS or "REDACTED" in v or set(v) <= set("*x.-_<>") or not re.search(r"[A-Za-z0-9]", v):
        return True
    if v.startswith(("$", "%", "<", "{", "@", "process.env", "os.environ")) or v.endswith((">", "}")):
        return True
    if is_path(v):
        return True
    if re.fullmatch(r"[0-9]{1,5}", v):
        return True
    if re.fullmatch(r"[A-Za-z_]\w*\(.*", v):  # a call: get_secret(...)
        return True
    if re.fullmatch(r"(?i)(?:your|my|insert|enter|replace|put)[_\-]\w*|\w*_here", v):  # your_api_key_here
        return True
    if re.fullmatch(r"[A-Z][A-Z_]*", v):  # apiKey=API_KEY: the name of another variable
        return True
    return not strong and (not looks_random(v) or is_potential_uuid(v))  # Idempotency-Key: <uuid>


@cache
def _library_patterns() -> tuple[re.Pattern, ...]:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import RegexBasedDetector

    pats = []
    for cls in get_mapping_from_secret_type_to_class().values():
        if issubclass(cls, RegexBasedDetector) and cls.__name__ not in _SKIPPED_DETECTORS:
            pats.extend(cls().denylist)
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
        yield from _in_urls_and_commands(text, start, end)
        yield from _prose(text, start, end)
        for r in (ASSIGNED, FLAG_VALUE):
            pos = start
            while (m := r.search(text, pos, end)) is not None:
                pos = m.start(3)  # the value may itself be NAME=value: "env: PGPASSWORD=..."
                kind = secret_name(m.group(1))
                if r is FLAG_VALUE and re.search(r"[0-9]", m.group(1)):
                    continue  # "-pS3cret db": a value attached to its flag (TOOL_PASSWORD's)
                if not kind or (r is FLAG_VALUE and kind == "key") or plain_value(m.group(3), kind == "strong"):
                    continue
                if ":" in m.group(2) and "=" not in m.group(2) and re.fullmatch(r"[A-Za-z]{1,11}", m.group(3)):
                    continue  # "the token: expired ...": prose, not a value
                a, b = m.span(3)
                if text[a] in "\"'":
                    a, b = a + 1, b - 1
                pos = m.end()
                yield a, b
        # The keyword and entropy heuristic: on a line that speaks of a secret, a long token that
        # looks generated (not a hash, not a UUID, not a path) is one.
        for m in _RANDOM_TOKEN.finditer(text, start, end):
            v = m.group()
            if _DIGEST_PREFIX.match(v) or _DIGEST_BEFORE.search(text, max(m.start() - 8, 0), m.start()):
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
