# ruff: noqa: E501 - real-shaped lines read best whole
"""The redactor on secrets as people write them (tests/data/secrets_shapes.json, built by
benchmarks/secrets_shapes_set.py): one test per shape, what goes and what stays byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.secrets_eval import score
from engram.core.redaction import REDACTED, Redactor

SET = json.loads((Path(__file__).resolve().parents[1] / "data" / "secrets_shapes.json").read_text(encoding="utf-8"))
R = REDACTED
# Fake values in real formats (nothing here was ever a credential).
HEX32 = "8d2f6a01c4b9e37f5a6c0d18e2b4f9a3"
KEY = "q7Rt2XvL9pMw4ZbN8cKd3HsY6aJf1GeU"
PW = "Lagos2024!x"


@pytest.fixture(scope="module")
def redact() -> Redactor:
    return Redactor()


def test_the_set_holds_what_the_issue_asks_for():
    secrets = [s for it in SET["items"] for s in it["secrets"]]
    looks = [it["text"] for it in SET["items"] if not it["secrets"]]
    assert len(secrets) >= 150 and len(looks) >= 400 and len(set(looks)) == len(looks)
    assert {it["split"] for it in SET["items"]} == {"tune", "report"}
    kinds = {it["kind"] for it in SET["items"]}
    for kind in ("prose_key_after", "prose_key_before", "url_appid", "dotenv", "json_config", "yaml_config"):
        assert kind in kinds
    for kind in ("curl_user", "connection_string", "aws_sts_output", "git_log", "lockfile", "docker", "uuid", "css"):
        assert kind in kinds


@pytest.mark.parametrize("half", ["report", "tune"])
def test_each_half_meets_the_targets(redact, half):
    s = score([it for it in SET["items"] if it["split"] == half], redact)
    assert s["removed"] >= 0.98, len(s["missed"])
    assert s["kept"] >= 0.99, len(s["changed"])


@pytest.mark.parametrize(
    "text, stored",
    [
        # A key named in a sentence, its value after the name or before it, of any alphabet.
        (f"this is the NewsAPI key {HEX32} and the weather one", f"this is the NewsAPI key {R} and the weather one"),
        (f"the spotify client secret is {KEY}", f"the spotify client secret is {R}"),
        (f"{HEX32} this is the spotify client secret", f"{R} this is the spotify client secret"),
        (f"{HEX32} is my TMDB key, thanks", f"{R} is my TMDB key, thanks"),
        (f"here is my OpenWeather api key: {HEX32}", f"here is my OpenWeather api key: {R}"),
        (f"the ssh password for the pi is {PW}", f"the ssh password for the pi is {R}"),
        (f"voici la clé API : {KEY}", f"voici la clé API : {R}"),
        (f"a senha do banco é {PW}", f"a senha do banco é {R}"),
    ],
)
def test_a_credential_named_in_a_sentence(redact, text, stored):
    assert redact(text) == stored


@pytest.mark.parametrize(
    "text, stored",
    [
        (
            f"curl 'https://api.openweathermap.org/data/2.5/weather?q=Lagos&appid={HEX32}&units=metric'",
            f"curl 'https://api.openweathermap.org/data/2.5/weather?q=Lagos&appid={R}&units=metric'",
        ),
        (
            f"GET https://newsapi.org/v2/top-headlines?country=us&api_key={KEY}&page=2",
            f"GET https://newsapi.org/v2/top-headlines?country=us&api_key={R}&page=2",
        ),
        (f"https://x.example/v1?apiKey={KEY}#top", f"https://x.example/v1?apiKey={R}#top"),
        (
            f"https://graph.example/me?fields=id&access_token={KEY}",
            f"https://graph.example/me?fields=id&access_token={R}",
        ),
        (
            "https://acct.blob.core.windows.net/c/b.bak?sv=2022-11-02&sp=r&sig=q0%2BXy7Lm9Zt3Wp1Vb4Nc6Rd8Sf2Gh5Jk%3D&se=1",
            f"https://acct.blob.core.windows.net/c/b.bak?sv=2022-11-02&sp=r&sig={R}&se=1",
        ),
        (
            f"jdbc:mysql://db:3306/shop?user=shop&password={PW}&useSSL=false",
            f"jdbc:mysql://db:3306/shop?user=shop&password={R}&useSSL=false",
        ),
    ],
)
def test_a_credential_query_parameter_loses_its_value_and_the_url_keeps_the_rest(redact, text, stored):
    assert redact(text) == stored


@pytest.mark.parametrize(
    "text, stored",
    [
        (
            f"NODE_ENV=development\nNEWS_API_KEY={HEX32}\nSPOTIFY_CLIENT_SECRET={KEY}\nPORT=3000",
            f"NODE_ENV=development\nNEWS_API_KEY={R}\nSPOTIFY_CLIENT_SECRET={R}\nPORT=3000",
        ),
        (f'{{"apiKey": "{KEY}", "projectId": "acme-web"}}', f'{{"apiKey": "{R}", "projectId": "acme-web"}}'),
        (
            f"environment:\n  POSTGRES_USER: app\n  POSTGRES_PASSWORD: {PW}\n",
            f"environment:\n  POSTGRES_USER: app\n  POSTGRES_PASSWORD: {R}\n",
        ),
        (
            '{"Credentials": {"SecretAccessKey": "/V7mmBT9LZo3uPBD9bK17UMlmAcA/KfBMdjSUs3J"}}',
            f'{{"Credentials": {{"SecretAccessKey": "{R}"}}}}',
        ),
        (
            "AWS Secret Access Key [None]: 8Cz0lY7CsA9Cp2Nb/C/gxHxACQ4ueWxy+fp/pWyJ\nDefault region name [None]: eu-west-1",
            f"AWS Secret Access Key [None]: {R}\nDefault region name [None]: eu-west-1",
        ),
        (
            "Use this token to login on a CI server:\n\n1//0gH7pQ2rT9xW4zV6bN8mK3cL5sD1fA0eY7uI2oP9qR4tZ6wX",
            f"Use this token to login on a CI server:\n\n{R}",
        ),
    ],
)
def test_pasted_configs_and_cloud_cli_output(redact, text, stored):
    assert redact(text) == stored


@pytest.mark.parametrize(
    "text, stored",
    [
        (
            f"curl -u admin:{PW} https://jenkins.internal/api/json",
            f"curl -u admin:{R} https://jenkins.internal/api/json",
        ),
        (f"curl -s --user 'deploy:{PW}' https://x.internal", f"curl -s --user 'deploy:{R}' https://x.internal"),
        (f"mysql -h 127.0.0.1 -u root -p{PW} shop < dump.sql", f"mysql -h 127.0.0.1 -u root -p{R} shop < dump.sql"),
        (f"sshpass -p '{PW}' ssh pi@192.168.1.40", f"sshpass -p '{R}' ssh pi@192.168.1.40"),
        (f"redis-cli -h cache -a {PW} ping", f"redis-cli -h cache -a {R} ping"),
        (f"redis://:{PW}@cache.internal:6379/0", f"redis://:{R}@cache.internal:6379/0"),
        ("postgres://app:Pizza8110@@localhost:5432/app", f"postgres://app:{R}@localhost:5432/app"),
        (
            f"Server=tcp:x.database.windows.net;User ID=sa;Password={PW};Encrypt=True;",
            f"Server=tcp:x.database.windows.net;User ID=sa;Password={R};Encrypt=True;",
        ),
        (f'gh secret set NEWS_API_KEY --body "{HEX32}"', f'gh secret set NEWS_API_KEY --body "{R}"'),
        (
            f'expect -c \'spawn ssh pi@10.0.0.4\nexpect "*password*"\nsend "{PW}\\r"\ninteract\'',
            f'expect -c \'spawn ssh pi@10.0.0.4\nexpect "*password*"\nsend "{R}\\r"\ninteract\'',
        ),
        (
            f'bash -c "expect {{ \\"*assword:*\\" {{ send \\"{PW}\\r\\" }} }}"',
            f'bash -c "expect {{ \\"*assword:*\\" {{ send \\"{R}\\r\\" }} }}"',
        ),
        (
            f'-NEWS_API_KEY=YOUR_KEY\n+NEWS_API_KEY={HEX32}\n+    "VITE_OWM_API_KEY": {{\n+      "description": "{KEY}"',
            f'-NEWS_API_KEY=YOUR_KEY\n+NEWS_API_KEY={R}\n+    "VITE_OWM_API_KEY": {{\n+      "description": "{R}"',
        ),
        (f"this is the openweatherAPI {HEX32}", f"this is the openweatherAPI {R}"),
    ],
)
def test_command_lines_and_connection_strings(redact, text, stored):
    assert redact(text) == stored


@pytest.mark.parametrize(
    "text",
    [
        "commit 3f2a9c1e5b7d8f0a2c4e6b8d0f1a3c5e7b9d1f3a\nAuthor: Ana <ana@example.com>\n\n    Rotate API key handling",
        "* 0d97eae (HEAD -> feature/api-key) Add password reset flow\n* 852b867 refactor: split the key store",
        "git cherry-pick 9c1e5b7d8f0a2c4e6b8d0f1a3c5e7b9d1f3a3f2a",
        '"integrity": "sha512-3y+hgpeni9+Qa8LfKQ+hkR3waeyV3fMoQ20VqYKjDDma1XuGfHWDbDATtH5dYSt014kGOQPsFAhsb3acsHBTpw=="',
        "  /vite@5.4.1:\n    resolution: {integrity: sha512-f7Nfdn3ord/GaeoOP9hw2ycr2Uh47oM1XqlU7XfQKeUf3Oqi/gOELLsIJMXymxOaD88d00sZZMBnUh9IoofcPw==}",
        "golang.org/x/crypto v0.24.0/go.mod h1:3na9W274yrGcDEFRQwKvnPhSXm89uPwdeVkhKey0Lm4=",
        "FROM python:3.12-slim@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "Idempotency-Key: 6f800203-6cbd-4588-8ce4-f8f7a59a3984",
        "the token usage for run 4b98a27b-14eb-4304-b016-2c350c377d72 was 18,234 input tokens",
        ".token.keyword { color: #07a3c9; }\n.secret-banner { border: 1px solid #d73a49; }",
        '  "avatar": "FvgIpvRtwkbcqev1Vyj+AKrge4i8R+U872iHa7rGZCKMf336PwdEPEm1ziQs",',
        "what is this hash 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08? it is in the notes",
        "The key fingerprint is SHA256:g9YKbrjL+uxZ2SXcCKSb9l7M6xBT3Uq0Z7xeBWAvZ6M ana@laptop",
        "the cache key is 3f2a9c1e5b7d8f0a2c4e6b8d0f1a3c5e7b9d1f3a so the restore missed",
        "  uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2",
        "OPENWEATHER_API_KEY=your_api_key_here",
        "https://newsapi.org/v2/everything?q=tesla&apiKey=API_KEY",
        "curl -u $USER:$TOKEN https://api.example.com/me",
        "const url = `https://x.example/weather?q=${city}&appid=${process.env.OWM_KEY}`;",
        "http://localhost:3000/callback?code=4%2F0At71Hz-cm6JAB-Bdf4ykEyoJeeOY&state=e0abb6e5cd439e8e",
        "Build ID: g_OqQTYnHKY5mwIiQti4pw",
        "the heroku version is 8.10.0-beta.2 and the token expired",
        "i  functions: ensuring required API \x1b[1mcloudfunctions.googleapis.com\x1b[22m is enabled...",
        "    const idToken = await user.getIdToken();",
        "  credential: admin.credential.cert(serviceAccount),",
    ],
)
def test_look_alikes_stay_byte_for_byte(redact, text):
    assert redact(text) == text


def test_metadata_keys_are_redacted_as_well_as_values(redact):
    v = {f"ghp_{'a1B2c3D4e5' * 4}": "the CI token", "commands": [f"curl 'https://x.example/w?q=Lagos&appid={HEX32}'"]}
    assert redact.value(v) == {R: "the CI token", "commands": [f"curl 'https://x.example/w?q=Lagos&appid={R}'"]}
    # A random name is a secret when its value says so, and only then.
    assert redact.value({KEY: "the TMDB key"}) == {R: "the TMDB key"}
    kept = {HEX32: "the cache entry", "sha256:" + HEX32 * 2: "digest", "3f2a9c1e": "the commit"}
    assert redact.value(kept) == kept


@pytest.mark.parametrize("it", [it for it in SET["items"] if it["split"] == "tune"][:120], ids=lambda it: it["kind"])
def test_redacting_twice_changes_nothing_more(redact, it):
    once = redact(it["text"])
    assert Redactor()(once) == once
