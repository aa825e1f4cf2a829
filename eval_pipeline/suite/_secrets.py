"""Known secrets and their redaction: any piece of 8+ characters of one is blanked wherever text goes.

A secret enters the process in one place, `Templated.resolve` (API keys, agent headers),
and is registered here. Every place that stores or prints text (store rows, journals,
caches, recordings, results files, exports, reports, log records, Dagster metadata)
passes it through `redact`. Matching pieces rather than whole values matters because texts
get cut for display and storage: "…AAAAsk-REDTEAM-OPEN" holds no whole key, but a piece.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

__all__ = [
    "IDENTITY_FIELDS",
    "MIN_PIECE",
    "PUBLIC_HEADERS",
    "REDACTED",
    "Redactor",
    "forget_secrets",
    "redact",
    "redact_value",
    "register_secret",
    "url_passwords",
]

#: Fields that say what a record is (its test, model, day, attempt, keys, database): names the
#: user wrote and digests, never secrets. They are never redacted, so redaction can never
#: rename a test, part a run from its grade or change a count; their text stays as written.
IDENTITY_FIELDS = frozenset(
    {
        "name",
        "model",
        "model_a",
        "model_b",
        "run_date",
        "attempt",
        "case_name",
        "key",
        "run_key",
        "input_hash",
        "context_hash",
        "content_hash",
        "answerer",
        "database",
        "call_index",
        "materialization_id",
    }
)

#: Query parameters of a URL whose values are secrets (`?password=`, `sslpassword`, `token`,
#: a service account's `credentials_json`).
_SECRET_PARAMETER = re.compile(r"pass|secret|token|credentials_json", re.IGNORECASE)


def url_passwords(url: str) -> list[str]:
    """The secrets a URL holds, as written and decoded: the password of its user part and the
    value of any `password`, `secret`, `token` or `credentials_json` query parameter. A URL
    without one holds none; a value that is no URL is itself the secret (a bare password)."""
    try:
        parts = urlsplit(url.strip())
        password = parts.password
        query = parse_qsl(parts.query, keep_blank_values=False)
    except ValueError:
        return [url]
    if not parts.scheme or not parts.netloc:
        return [url]
    found = [password] if password else []
    found += [value for name, value in query if _SECRET_PARAMETER.search(name)]
    return [variant for value in found for variant in dict.fromkeys([value, unquote(value)])]


#: The shortest piece of a secret that is recognised (shorter ones are too common in text).
MIN_PIECE = 8
REDACTED = "[redacted]"
#: Headers whose values are never secret; every other request header value is treated as one
#: (agent headers are user-defined, so a token may hide in any of them).
PUBLIC_HEADERS = frozenset(
    {
        "accept",
        "accept-encoding",
        "anthropic-version",
        "connection",
        "content-length",
        "content-type",
        "host",
        "user-agent",
    }
)


class Redactor:
    """Finds every run of 8+ characters shared with a known secret, in time linear in the text.

    Each secret is indexed by its 8-character windows; one regex (an alternation of all
    windows) finds a window, which is then extended left and right as far as it still
    matches the same secret, so the whole visible piece is replaced, not only 8 characters.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: list[str] = []
        self._windows: dict[str, list[tuple[int, int]]] = {}  # window → (secret, offset)
        self._pattern: re.Pattern[str] | None = None
        self._lock = threading.Lock()
        for secret in secrets:
            self.add(secret)

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def add(self, secret: str) -> None:
        """Know `secret`, its whitespace-separated words (`Bearer <token>`) and a URL's password."""
        if not isinstance(secret, str):
            return
        candidates = [secret.strip(), *secret.split()]
        if "://" in secret:
            candidates += url_passwords(secret)
        with self._lock:
            for candidate in candidates:
                if len(candidate) < MIN_PIECE or candidate in self._secrets:
                    continue
                index = len(self._secrets)
                self._secrets.append(candidate)
                for offset in range(len(candidate) - MIN_PIECE + 1):
                    window = candidate[offset : offset + MIN_PIECE]
                    self._windows.setdefault(window, []).append((index, offset))
                self._pattern = None

    def redact(self, text: str) -> str:
        """`text` with every piece of 8+ characters of a known secret replaced by `[redacted]`."""
        if not self._secrets or not isinstance(text, str) or len(text) < MIN_PIECE:
            return text
        pattern = self._compiled()
        parts: list[str] = []
        done = 0  # text[:done] is settled
        match = pattern.search(text)
        while match is not None:
            start, end = self._extend(text, match.start(), done)
            parts += [text[done:start], REDACTED]
            done = end
            match = pattern.search(text, end)
        if not parts:
            return text
        parts.append(text[done:])
        return "".join(parts)

    def redact_value(self, value: Any, keep: frozenset[str] = frozenset()) -> Any:
        """Strings anywhere in nested dicts, lists and tuples redacted, but the values of the
        dict fields named in `keep` (`IDENTITY_FIELDS`); other values as they are."""
        if not self._secrets:
            return value
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {
                self.redact_value(k): v if k in keep else self.redact_value(v, keep)
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return type(value)(self.redact_value(item, keep) for item in value)
        return value

    def _compiled(self) -> re.Pattern[str]:
        pattern = self._pattern
        if pattern is None:
            with self._lock:
                pattern = re.compile("|".join(re.escape(w) for w in self._windows))
                self._pattern = pattern
        return pattern

    def _extend(self, text: str, at: int, floor: int) -> tuple[int, int]:
        """The widest span around the window at `at` that matches one secret."""
        best = (at, at + MIN_PIECE)
        for index, offset in self._windows.get(text[at : at + MIN_PIECE], ()):
            secret = self._secrets[index]
            left, s_left = at, offset
            while left > floor and s_left > 0 and text[left - 1] == secret[s_left - 1]:
                left, s_left = left - 1, s_left - 1
            right, s_right = at + MIN_PIECE, offset + MIN_PIECE
            while right < len(text) and s_right < len(secret) and text[right] == secret[s_right]:
                right, s_right = right + 1, s_right + 1
            if right - left > best[1] - best[0]:
                best = (left, right)
        left, right = best
        while text[left].isspace():  # "Bearer <token>" matched from " <token>": keep the space
            left += 1
        while text[right - 1].isspace():
            right -= 1
        return left, right


_KNOWN = Redactor()
_install_lock = threading.Lock()
_installed = False


def register_secret(value: str) -> None:
    """Redact `value` (and its pieces) from every text this process stores or prints from now on."""
    _KNOWN.add(value)
    _install_log_redaction()


def forget_secrets() -> None:
    """Forget every registered secret (tests: one test's keys must not blank another's text)."""
    global _KNOWN
    _KNOWN = Redactor()


def secrets_known() -> bool:
    """Whether any secret is registered: without one, nothing needs redacting."""
    return bool(_KNOWN)


def redact(text: str) -> str:
    """`text` with every piece of 8+ characters of a registered secret blanked."""
    return _KNOWN.redact(text)


def redact_value(value: Any, keep: frozenset[str] = frozenset()) -> Any:
    """`value` with every string in it redacted (see `redact`), but the fields in `keep`."""
    return _KNOWN.redact_value(value, keep)


def _install_log_redaction() -> None:
    """Every log record of every logger (ours, httpx's, Dagster's) is redacted once formatted.

    A record factory rather than a handler filter: handlers belong to whoever configured
    logging (the CLI, Dagster, pytest), and a record is created exactly once.
    """
    global _installed
    with _install_lock:
        if _installed:
            return
        make_record = logging.getLogRecordFactory()

        def redacting_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = make_record(*args, **kwargs)
            if _KNOWN:
                try:
                    message = record.getMessage()
                except Exception:  # a bad format string: logging reports it itself later
                    return record
                cleaned = _KNOWN.redact(message)
                if cleaned != message:
                    record.msg, record.args = cleaned, ()
            return record

        logging.setLogRecordFactory(redacting_record)
        _installed = True
