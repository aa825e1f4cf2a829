"""MySQL result rows as the sandbox keeps them: a row over the byte budget refused before it is read, values PyMySQL misreads put right.

PyMySQL reads a row's packets whole (a row of 1 GB, as a server with a large
`max_allowed_packet` may send, is 1 GB here before any cell can be cut), and MySQL cannot be
asked to cut cells for us without changing what the statement means (MariaDB ignores the
ORDER BY of a derived table). So the row's size is read from its packet headers first, and a
row past the budget is refused unread: the session, left mid-result, is dropped.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from eval_pipeline.warehouses._arrow import mysql_decimal_is_wide

__all__ = ["RowTooLarge", "limit_rows", "value_fixers"]


class RowTooLarge(Exception):
    """The next row of the result passes the byte budget; nothing of it was read."""


def limit_rows(connection: Any, limit: int) -> None:
    """From now on, `connection` (a PyMySQL connection) reads no packet of more than `limit`
    bytes, headers included: `RowTooLarge` instead, before the payload is read.

    Every answer of the server is a packet (several for one over 16 MB); PyMySQL reads each
    with `_read_packet`, which reads a header, then the payload it announces, through
    `_read_bytes`. The count starts again at each packet.
    """
    budget = getattr(connection, "_eval_row_budget", None)
    if budget is None:
        budget = _Budget(connection._read_packet, connection._read_bytes)
        connection._read_packet = budget.read_packet
        connection._read_bytes = budget.read_bytes
        connection._eval_row_budget = budget
    budget.limit = limit


class _Budget:
    def __init__(self, read_packet: Callable[..., Any], read_bytes: Callable[[int], bytes]):
        self._read_packet, self._read_bytes = read_packet, read_bytes
        self.limit = 0
        self.taken = 0

    def read_packet(self, *args: Any, **kwargs: Any) -> Any:
        self.taken = 0
        return self._read_packet(*args, **kwargs)

    def read_bytes(self, count: int) -> bytes:
        self.taken += count
        if self.taken > self.limit:
            raise RowTooLarge(f"a row of more than {self.limit:,} bytes")
        return self._read_bytes(count)


def value_fixers(description: Sequence[Sequence[Any]]) -> list[Callable[[Any], Any] | None]:
    """For each column of a PyMySQL cursor's `description`, what turns PyMySQL's value into a
    faithful one, or None when its value already is."""
    from pymysql.constants import FIELD_TYPE as F

    fixers: list[Callable[[Any], Any] | None] = []
    for column in description:
        kind, precision, scale = column[1], column[4], column[5]
        if kind == F.TIME:
            fixers.append(_time_text)
        elif kind == F.BIT:
            fixers.append(_bits)
        elif kind in (F.DECIMAL, F.NEWDECIMAL) and mysql_decimal_is_wide(precision, scale):
            fixers.append(_wide_decimal)
        else:
            fixers.append(None)
    return fixers


def _time_text(value: Any) -> Any:
    """MySQL's TIME as the server prints it ('838:59:59', '-25:00:00.5'): PyMySQL's
    timedelta reads '-25:00:00' as '-2 days, 23:00:00'."""
    if not isinstance(value, dt.timedelta):
        return value
    sign = "-" if value < dt.timedelta(0) else ""
    value = abs(value)
    seconds = value.days * 86_400 + value.seconds
    text = f"{sign}{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    return text + (f".{value.microseconds:06d}" if value.microseconds else "")


def _bits(value: Any) -> Any:
    """BIT(n) as its number (PyMySQL gives the bytes)."""
    return int.from_bytes(value, "big") if isinstance(value, bytes | bytearray) else value


def _wide_decimal(value: Any) -> Any:
    """DECIMAL of more than 38 digits, past DuckDB's DECIMAL: a float, as the column's type
    (DOUBLE) says, like PostgreSQL's unconstrained NUMERIC."""
    return float(value) if isinstance(value, Decimal) else value
