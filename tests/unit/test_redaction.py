"""The redactor (engram/core/redaction.py) on the labelled set and on the shapes a user relies on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.secrets_eval import score
from engram.core.redaction import REDACTED, Redactor

SET = json.loads((Path(__file__).resolve().parents[1] / "data" / "secrets_set.json").read_text(encoding="utf-8"))
SHAPES = json.loads((Path(__file__).resolve().parents[1] / "data" / "secrets_shapes.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def redact() -> Redactor:
    return Redactor()


def test_the_labelled_set_is_as_large_and_varied_as_promised():
    secrets = [it for it in SET["items"] if it["secrets"]]
    assert len(secrets) >= 60 and len({it["kind"] for it in secrets}) >= 20
    assert {it["where"] for it in secrets} == {"prompt", "command", "output"}
    assert len(SET["items"]) - len(secrets) >= 200


@pytest.mark.parametrize("half", ["report", "tune"])
def test_secrets_are_removed_and_look_alikes_kept_on_each_half(redact, half):
    s = score([it for it in SET["items"] if it["split"] == half], redact)
    assert s["removed"] >= 0.98, s["missed"]
    assert s["kept"] >= 0.99, s["changed"]


@pytest.mark.parametrize(
    "text, stored",
    [
        (
            "psql postgres://deploy:s3cr3t-Pw@db.internal:5432/app",
            f"psql postgres://deploy:{REDACTED}@db.internal:5432/app",
        ),
        ("export STRIPE_KEY=sk_live_a1B2c3D4e5F6g7H8i9J0kLmN", f"export STRIPE_KEY={REDACTED}"),
        (
            "mytool --token=abc123def456ghi --password hunter22 --verbose",
            f"mytool --token={REDACTED} --password {REDACTED} --verbose",
        ),
        ('DB_PASSWORD="p@ss w0rd!" make up', f'DB_PASSWORD="{REDACTED}" make up'),
        ("curl -H 'Authorization: Bearer abc.def.ghi123456789'", f"curl -H 'Authorization: {REDACTED}'"),
        ("env: PGPASSWORD=hunter22 PGHOST=db", f"env: PGPASSWORD={REDACTED} PGHOST=db"),
    ],
)
def test_the_secret_goes_and_what_makes_the_text_useful_stays(redact, text, stored):
    assert redact(text) == stored


@pytest.mark.parametrize(
    "text",
    [
        "commit 3f2a9c1e5b7d8f0a2c4e6b8d0f1a3c5e7b9d1f3a fixes the flaky test",
        "task 550e8400-e29b-41d4-a716-446655440000 is blocked",
        "SORT_KEY=created_at",
        "max_tokens=4096",
        "PWD=/home/ana/src OLDPWD=/tmp",
        "x = 'dGhpcyBpcyBhIHRlc3QgZml4dHVyZQ=='",
        "the token: expired yesterday",
        "--hash=sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    ],
)
def test_look_alikes_stay_byte_identical(redact, text):
    assert redact(text) == text


def test_private_spans_are_removed_with_their_tags_and_an_unclosed_one_to_the_end(redact):
    assert redact("keep <private>my address is 1 Elm St</private>this") == "keep this"
    assert redact("a <PRIVATE>x</PRIVATE> b <private>rest of it") == "a  b "


def test_user_patterns_and_the_allow_list():
    r = Redactor(extra=[r"ACME-\d{6}"], allow=["sk_live_a1B2c3D4e5F6g7H8i9J0kLmN"])
    assert r("ticket ACME-123456") == f"ticket {REDACTED}"
    assert r("fixture sk_live_a1B2c3D4e5F6g7H8i9J0kLmN") == "fixture sk_live_a1B2c3D4e5F6g7H8i9J0kLmN"
    with pytest.raises(ValueError, match="ENGRAM_REDACT_PATTERNS: invalid pattern"):
        Redactor(extra=["(unclosed"])


def test_json_values_are_redacted_inside_and_keep_their_shape(redact):
    v = {"cmd": ["PGPASSWORD=hunter22 psql"], "n": 3, "nested": {"url": "https://u:pw12345@h.example/x"}}
    assert redact.value(v) == {
        "cmd": [f"PGPASSWORD={REDACTED} psql"],
        "n": 3,
        "nested": {"url": f"https://u:{REDACTED}@h.example/x"},
    }


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [it["text"] for it in SET["items"] + SHAPES["items"]] + [" ", "\n", "=", ":", "&", "<private>"]
        ),
        max_size=6,
    ).map(" ".join)
)
def test_redaction_is_idempotent(text):
    once = Redactor()(text)
    assert Redactor()(once) == once
