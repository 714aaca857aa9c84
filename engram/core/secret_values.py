"""What a name and a value say: a name that means secret (`STRIPE_KEY`, `authToken`, `--password`),
a value that is only a placeholder, a reference, a path or a call, and a word shaped like a
generated credential of any alphabet (hex included), the library's filters
(`detect_secrets.filters.heuristic`: sequential strings, UUIDs, templated values) and its Shannon
entropy keeping look-alikes: digests, short SHAs, versions, identifiers, hosts. engram.core.redaction
and engram.core.secret_phrases judge what they find with these."""

from __future__ import annotations

import math
import re
from functools import cache

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

DIGEST_PREFIX = re.compile(r"(?i)^(?:sha(?:1|224|256|384|512)|md5|blake2[bs]?|sha3|h1)[-:_]")  # h1: go.sum
_FILE_NAME = re.compile(
    r"(?i)\.(?:py|js|ts|tsx|jsx|json|ya?ml|md|txt|toml|lock|sh|go|rs|rb|java|kt|c|h|cpp|html|css|log|tar|gz|"
    r"zip|whl|png|jpe?g|svg|pdf|env|ini|cfg|conf|sql|db)$"
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


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
    return entropy()(value) > least


# detect-secrets is imported on first need (it imports requests: some 70 ms): most texts, and
# most of what a hook logs, hold no token, and `engram hook` runs at every prompt.
def is_potential_uuid(value: str) -> bool:
    from detect_secrets.filters.heuristic import is_potential_uuid as library_check

    return library_check(value)


@cache
def entropy():
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
    if DIGEST_PREFIX.match(v) or "://" in v or _FILE_NAME.search(v) or is_path(v) or v.startswith(("~", "$", "%")):
        return False
    if "." in v and not re.fullmatch(r"[\w-]{8,}\.[\w-]{8,}\.[\w-]{8,}", v):
        return False  # a host, a module, a file: cloudfunctions.googleapis.com (a JWT has 3 long parts)
    if ("/" in v and not random_run(v)) or re.fullmatch(r"v?\d+(?:\.\d+)+(?:[-+.]\w+)*", v) or "REDACTED" in v:
        return False
    if is_templated_secret(v) or is_sequential_string(v):
        return False
    if re.fullmatch(r"[a-z]+(?:[_-][a-z0-9]+)+|[A-Z]+(?:_[A-Z0-9]+)+|[a-z]+(?:[A-Z][a-z]{2,})+[0-9]{0,2}", v):
        return False  # token_v2, MAX_TOKENS_4K, refreshToken2: identifiers
    if re.fullmatch(r"[0-9]{1,2}[A-Z][a-z]{3,}", v):
        return False  # a product's name: "API keys live in 1Password"
    if strong:  # a password people choose: "Summer2024!" has too few characters for entropy to tell
        return len(set(v)) >= 6
    return len(v) >= 16 and not is_potential_uuid(v) and entropy()(v) > 3.0


_RUN_CHAR = re.compile(r"[A-Za-z0-9+/=_\-]")


def inside_random_run(text: str, a: int, b: int) -> bool:
    """True when text[a:b] is part of a long run of base64 characters that looks generated."""
    while a > 0 and b - a < 400 and _RUN_CHAR.match(text, a - 1):
        a -= 1
    while b < len(text) and b - a < 400 and _RUN_CHAR.match(text, b):
        b += 1
    return b - a >= 20 and random_run(text[a:b].strip("=/_-") or "x")


def random_run(value: str) -> bool:
    """A run of base64 characters with the entropy of generated bytes (a 40-character AWS secret
    has about 5 bits a character; a path or an identifier of that length about 4)."""
    return (
        len(value) >= 20
        and re.fullmatch(r"[A-Za-z0-9+/_\-]+={0,2}", value) is not None
        and all(re.search(p, value) for p in (r"[A-Z]", r"[a-z]", r"[0-9]"))
        and entropy()(value) > min(4.3, 0.8 * math.log2(len(value)))
    )


_CODE_WORDS = {"await", "new", "yield", "async", "function", "lambda", "require", "this", "self", "typeof", "not"}


def is_path(value: str) -> bool:
    """/etc/app/key, ./secrets, ~/.config/gh: a path (an AWS secret may start with / too, but its
    characters are random)."""
    return bool(re.fullmatch(r"(?:\.{0,2}|~)/[\w.\-/]*", value)) and not random_run(value)


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
    if re.fullmatch(r"[A-Za-z_][\w.]*\(.*", v) or (
        re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", v)
        and all(re.fullmatch(r"[A-Za-z_]+[0-9]*|[A-Z0-9_]+", part) for part in v.split("."))
    ):
        return True  # a call or a reference: get_secret(...), firebase_admin.credential.cert(...), config.token
    if v in _CODE_WORDS:  # const idToken = await user.getIdToken()
        return True
    if re.fullmatch(r"(?i)(?:your|my|insert|enter|replace|put)[_\-]\w*|\w*_here", v):  # your_api_key_here
        return True
    if re.fullmatch(r"[A-Z][A-Z_]*", v):  # apiKey=API_KEY: the name of another variable
        return True
    return not strong and (not looks_random(v) or is_potential_uuid(v))  # Idempotency-Key: <uuid>
