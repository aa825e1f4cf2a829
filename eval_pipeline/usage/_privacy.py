"""What of a person reaches the store: a pseudonym for their id, and their messages with e-mail addresses, phone numbers and card-like numbers masked."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["PERSONAL_ATTRIBUTES", "Privacy"]

#: Span and record fields that name a person: never stored (the user's id becomes a pseudonym).
PERSONAL_ATTRIBUTES = frozenset(
    {
        "user.email",
        "user.name",
        "user.full_name",
        "user.hash",
        "user.roles",
        "enduser.role",
        "enduser.scope",
        "client.address",
        "client.port",
        "network.peer.address",
        "http.client_ip",
        "email",
        "name",
        "full_name",
        "ip",
        "user_email",
        "user_name",
        "phone",
    }
)

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
# Card-like runs of 13-19 digits (spaces or dashes between groups), before phone numbers.
_CARD = re.compile(r"\b(?:\d[ -]?){12,18}\d\b")
# An international or grouped phone number; a bare year or amount is left alone.
_PHONE = re.compile(r"(?<![\w.])\+?\d{1,3}[ .-]?\(?\d{2,4}\)?[ .-]\d{3,4}[ .-]\d{3,4}(?![\w.])")


@dataclass(frozen=True)
class Privacy:
    """How personal data is kept out: `key` makes the pseudonyms (HMAC-SHA256 of the id: the
    same person gets the same pseudonym in every import, and it cannot be turned back
    without the key); `mask_text` masks e-mail addresses, phone and card numbers in
    messages."""

    key: bytes
    mask_text: bool = True

    @classmethod
    def of_folder(cls, folder: Path, *, mask_text: bool = True) -> Privacy:
        """The key kept in `folder/pseudonym.key` (made on first use, readable by its owner
        only): it never reaches the store, so the store alone names nobody."""
        path = folder / "pseudonym.key"
        if not path.exists():
            folder.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
            partial.write_bytes(secrets.token_bytes(32))
            partial.chmod(0o600)
            try:
                partial.rename(path) if not path.exists() else partial.unlink()
            except OSError:
                partial.unlink(missing_ok=True)
        return cls(path.read_bytes(), mask_text=mask_text)

    def pseudonym(self, user_id: str | None) -> str | None:
        if user_id is None or not str(user_id).strip():
            return None
        digest = hmac.new(self.key, str(user_id).strip().encode(), hashlib.sha256)
        return "u_" + digest.hexdigest()[:12]

    def text(self, value: str) -> str:
        if not self.mask_text or not value:
            return value
        value = _EMAIL.sub("<email>", value)
        value = _CARD.sub("<number>", value)
        return _PHONE.sub("<phone>", value)

    def masked(self, value: Any) -> Any:
        """A JSON value (a tool call's arguments) with its texts masked and the fields that
        name a person left out."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {
                k: self.masked(v) for k, v in value.items() if str(k) not in PERSONAL_ATTRIBUTES
            }
        if isinstance(value, list):
            return [self.masked(v) for v in value]
        return value
