"""Credentials as people write them in free text, which no format detector finds: a key, token,
secret or password named in a sentence with its value after or before the name ("this is the
NewsAPI key 8d2f…", "… this is the spotify client secret"), a URL's query parameter that names a
credential (only its value goes: `?q=Lagos&appid=[REDACTED]&units=metric`), a secret's value in a
JSON object under its name, and the passwords `curl -u`, mysql, sshpass, redis-cli, docker login and
an expect script are given. Each rule yields the spans to redact; engram.core.redaction runs them
on the lines that name a secret."""

from __future__ import annotations

import re
from typing import Iterable

from engram.core.secret_values import generated, plain_value, secret_name

# A URL's query parameter: the value ends at the next & or #, and only the value is redacted.
QUERY_PARAM = re.compile(r"[?&]([A-Za-z_][\w.\-\[\]]*)=([^&#\s\"'<>`\\)]+)")
# Query parameters that hold a credential though secret_name cannot tell from their name alone:
# OpenWeather's appid, Google's key, Azure SAS and S3 presigned-URL signatures.
_QUERY_KEY_NAMES = {"appid", "app_id", "key", "sig", "signature", "x-amz-signature", "jwt", "auth", "session"}
# An expect script answering a password prompt: `expect "*password*" { send "hunter22\r" }` (also
# inside a shell string, its quotes escaped).
EXPECT_SEND = re.compile(r'(?i)(?:assword|passphrase)[^\n{}]{0,40}?\{?\s*send\s+(?:--\s+)?\\*"([^"\\\s]+)')
# A JSON object under a name that says secret, its value in a field: `"OPENWEATHER_API_KEY": {
# "description": "8d2f…" }` (a devcontainer's secrets), also as Read shows it (`29→`) and in a diff (`+`).
_JSON_GAP = r"(?:\s|\d+→|(?<=\n)[+-])*"
JSON_NESTED = re.compile(
    r'"([A-Za-z_][\w.-]*)"' + _JSON_GAP + ":" + _JSON_GAP + r"\{" + _JSON_GAP
    + r'(?:"[\w-]+"' + _JSON_GAP + ":" + _JSON_GAP + r'"[^"\n]*"' + _JSON_GAP + "," + _JSON_GAP + "){0,3}"
    + r'"(?:value|default|description|secret|data|key)"' + _JSON_GAP + ":" + _JSON_GAP + r'"([^"\n]+)"'
)  # fmt: skip
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
# "the openweatherAPI 8d2f…", "NewsAPI: …": an API named with a value after it (a key: 16 characters).
_API_NOUN = re.compile(r"(?:(?<=[a-z])API|(?<![\w./$-])(?i:api))(?![\w/-])")
_NOUN_STEMS = ("key", "token", "secret", "passw", "passp", "passc", "credential", "appid", "app id", "app_id", "cl",
               "mot de passe", "chave", "senha", "contrase", "schl")  # fmt: skip
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
    "budget", "used", "spent", "returned", "returns", "response", "responded", "request", "endpoint", "error",
    "call", "calls", "docs", "v1", "v2", "v3",
}  # fmt: skip
# A word just before a value that says it is a commit or a digest ("commit 3f2a… is the key fix").
_NOT_CREDENTIAL_BEFORE = {
    "commit", "sha", "sha1", "sha256", "hash", "digest", "checksum", "fingerprint", "revision", "rev", "image",
    "tag", "ref", "uuid", "object", "blob", "tree",
}  # fmt: skip
_IDENTIFIER = re.compile(r"[A-Za-z][\w.]*[_-][\w.-]*|[a-z]+[A-Z]\w*")  # trace_id, x-request-id, sessionId
_LINK_BEFORE = re.compile(r"\s*(?:[:=,(—–-]|->|=>|(?:is|was|as|this|that|are|being)\b)", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z0-9_\-+/.~!@#$%^*?]+={0,2}")  # a value in a sentence (not its = or &)


def _value_after(text: str, at: int, line_end: int, strong: bool, shortest: int) -> tuple[int, int] | None:
    """The span of the first generated-looking word among the six after `at` on its line, unless a
    word that says the value is something else ("commit", "id") or the sentence's end comes first."""
    words = list(_WORD.finditer(text, at, min(line_end, at + 120)))[:6]
    for i, w in enumerate(words):
        word = w.group()
        if word.lower().strip(".:,!?") in _NOT_CREDENTIAL_WORDS or word == "REDACTED":
            return None  # something else, or the value already gone (redaction is idempotent)
        if i and text[w.start() - 1] in "=:" and _IDENTIFIER.fullmatch(words[i - 1].group()):
            return None  # "token refresh failed trace_id=7aeb…": the value is another name's
        if generated(word, strong, shortest):
            return w.start(), w.start() + len(word.rstrip(".:!?"))
        if word.endswith((".", "!", "?")):
            return None  # the sentence ended
    return None


def after_an_api(text: str) -> Iterable[tuple[int, int]]:
    """Spans of keys written after the API's name: "this is the openweatherAPI 8d2f…" (the whole
    text: "api" is no cue for the other rules, which would take a pod's name for a token)."""
    for m in _API_NOUN.finditer(text):
        line_end = text.find("\n", m.end())
        if (span := _value_after(text, m.end(), len(text) if line_end < 0 else line_end, False, 16)) is not None:
            yield span


def in_sentences(text: str, start: int, end: int) -> Iterable[tuple[int, int]]:
    """Spans of the values a sentence names as a credential: up to six words after the name
    ("the NewsAPI key 8388…", "client secret is …") or before it when a link joins them
    ("8388… is my NewsAPI key", "…, this is the session secret"); a word that says the value is
    something else ("commit", "hash", "id") stops the search."""
    low = text[start:end].lower()
    if not any(w in low for w in _NOUN_STEMS):  # "3 passed in 2.1s": no name of a credential
        return
    for m in _PROSE_NOUN.finditer(text, start, end):
        if m.start() and text[m.start() - 1] in "?&":
            continue  # a URL's query parameter: QUERY_PARAM's
        noun = m.group(2).lower()
        strong = noun in _STRONG_NOUNS or (m.group(1) is not None and noun in ("key", "keys"))
        shortest = 7 if noun in _PASSWORD_NOUNS else 8  # people choose "Blue905!" and "hunter22"
        line_start = text.rfind("\n", 0, m.start()) + 1
        line_end = text.find("\n", m.end(), end)
        line_end = end if line_end < 0 else line_end
        before = list(_WORD.finditer(text, max(line_start, m.start() - 80), m.start()))
        owner = before[-1].group().lower().strip(".:,") if before else ""
        if m.group(1) is None and noun in ("key", "keys", "token", "tokens") and owner in _NOT_CREDENTIAL_OWNERS:
            continue  # a primary key, a cache key, an SSH host key, a page token
        if (span := _value_after(text, m.end(), line_end, strong, shortest)) is not None:
            yield span
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


# Each rule runs only where a word it needs is: a cheap test that spares most windows the search.
_NEEDS: tuple[tuple[re.Pattern, tuple[str, ...], int], ...] = (
    (CURL_USER, ("curl", "wget", "http"), 0),
    (TOOL_PASSWORD, ("mysql", "mariadb", "sshpass", "redis-cli", "docker"), 0),
    (EXPECT_SEND, ("send",), 200),  # the send may be on a line below the prompt
)


def in_urls_and_commands(text: str, start: int, end: int) -> Iterable[tuple[int, int]]:
    """Spans of a URL's credential query parameters, of a secret's value in a JSON object under its
    name, and of the passwords `curl -u`, mysql, sshpass, redis-cli, docker login and an expect
    script's `send` are given."""
    if "=" in text[start:end]:
        for m in QUERY_PARAM.finditer(text, start, end):
            kind = "key" if m.group(1).lower() in _QUERY_KEY_NAMES else secret_name(m.group(1))
            if kind and not plain_value(m.group(2), kind == "strong"):
                yield m.span(2)
    if "{" in text[start:end]:
        for m in JSON_NESTED.finditer(text, start, min(len(text), end + 400)):  # its value may be lines below
            kind = secret_name(m.group(1))
            if kind and generated(m.group(2), kind == "strong"):
                yield m.span(2)
    for r, words, beyond in _NEEDS:
        stop = min(len(text), end + beyond)
        if not any(w in text[start:stop] for w in words):
            continue
        for m in r.finditer(text, start, stop):
            a, b = m.span(1)
            if text[a] in "\"'":
                a, b = a + 1, b - 1
            if not plain_value(text[a:b], True):
                yield a, b
