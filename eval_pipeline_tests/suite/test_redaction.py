"""Redaction of known secrets: any piece of 8+ characters, cut anywhere, in text and in logs."""

from __future__ import annotations

import logging

import pytest

from eval_pipeline.suite import (
    IDENTITY_FIELDS,
    Redactor,
    Templated,
    forget_secrets,
    load_config,
    redact,
    redact_value,
    register_secret,
    url_passwords,
)

KEY = "sk-REDTEAM-OPEN-9f3c71d2e8b4AAAA"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"…AAAA{KEY[:15]}", "…AAAA[redacted]"),  # the head of the key after a cut
        (f"{KEY[:9]}…", "[redacted]…"),  # "sk-REDTEA…"
        (f"say {KEY} twice {KEY}", "say [redacted] twice [redacted]"),
        (f"x{KEY[5:20]}y", "x[redacted]y"),  # a piece from the middle, widened to all of it
        (KEY[:7], KEY[:7]),  # 7 characters: too short to tell from ordinary text
        ("nothing secret here", "nothing secret here"),
    ],
)
def test_any_piece_of_eight_or_more_characters_is_redacted(text, expected):
    assert Redactor([KEY]).redact(text) == expected


def test_bearer_values_and_url_passwords_are_known_by_their_parts():
    redactor = Redactor([f"Bearer {KEY}", "postgresql://eval:pw-0f9e8d7c6b@db:5432/x"])
    assert redactor.redact(f"token {KEY[:12]}") == "token [redacted]"
    assert redactor.redact("password pw-0f9e8d7c6b!") == "password [redacted]!"
    assert redactor.redact_value({"a": [KEY[3:14], 3], "b": None}) == {
        "a": ["[redacted]", 3],
        "b": None,
    }


def test_a_piece_at_the_end_of_a_long_text_is_found():
    text = "ordinary reply text " * 50_000 + KEY[4:16]
    assert Redactor([KEY]).redact(text).endswith("ordinary reply text [redacted]")


def test_config_secrets_are_redacted_from_log_records_of_any_logger(
    make_suite, monkeypatch, caplog
):
    monkeypatch.setenv("EVAL_TEST_REDACT_KEY", KEY)
    root = make_suite(
        {},
        config="""\
        llm:
          providers:
            - {provider: openai, api_key: "{{ env('EVAL_TEST_REDACT_KEY') }}"}
        agents:
          - name: bot
            url: http://127.0.0.1:1/a
            headers: {X-Token: literal-token-0a1b2c3d, Content-Type: application/json}
        """,
    )
    load_config(root)  # knows the key from the environment and the literal header token
    with caplog.at_level(logging.INFO):
        logging.getLogger("httpx").info("echo %s and %s", KEY[2:14], "token-0a1b2c")
    assert caplog.records[-1].getMessage() == "echo [redacted] and [redacted]"
    assert redact("sent application/json") == "sent application/json"  # a public header
    register_secret("short")
    assert redact_value(["short"]) == ["short"]


@pytest.mark.parametrize(
    ("url", "secrets"),
    [
        ("postgresql://app@127.0.0.1:5432/analytics", []),  # trust, .pgpass, IAM: no secret
        ("postgresql://app:s%40cret-pw@db/analytics", ["s%40cret-pw", "s@cret-pw"]),
        ("mysql://app@db/shop?user=app&password=hunter2hunter", ["hunter2hunter"]),
        ("postgresql://db/analytics?sslpassword=keypass99&sslmode=require", ["keypass99"]),
        ("just-a-bare-password", ["just-a-bare-password"]),
    ],
)
def test_a_url_holds_only_its_passwords_as_secrets(url, secrets):
    assert url_passwords(url) == secrets


def test_a_database_url_read_from_the_environment_blanks_only_its_password(monkeypatch):
    forget_secrets()
    url = Templated("{{ env('ANALYTICS_URL') }}", secret="url_password")
    monkeypatch.setenv(
        "ANALYTICS_URL", "postgresql://app@127.0.0.1:5432/analytics?password=pw-7f3a9c1e"
    )
    url.resolve()
    text = "SELECT * FROM analytics.orders -- analytics_total on postgres, pw-7f3a9c1e"
    assert (
        redact(text) == "SELECT * FROM analytics.orders -- analytics_total on postgres, [redacted]"
    )


def test_fields_naming_a_record_are_never_redacted():
    redactor = Redactor(["analytics_total_secret"])
    row = {"name": "analytics_total_secret", "message": "analytics_total_secret failed"}
    assert redactor.redact_value(row, IDENTITY_FIELDS) == {
        "name": "analytics_total_secret",
        "message": "[redacted] failed",
    }
