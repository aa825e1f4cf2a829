"""Messages cut to fit: at most the limit, with "…" where text was left out."""

from __future__ import annotations

from eval_pipeline.suite import first_line, truncate


def test_text_within_the_limit_is_kept_whole() -> None:
    assert truncate("abc", 3) == "abc"
    assert truncate("", 1) == ""


def test_longer_text_ends_in_an_ellipsis_within_the_limit() -> None:
    assert truncate("abcdef", 4) == "abc…"
    assert len(truncate("x" * 5_000, 1_000)) == 1_000


def test_the_first_line_skips_blank_lines_and_is_cut_like_any_text() -> None:
    assert first_line("\n  \n  Binder Error: no table  \nLINE 1: ...") == "Binder Error: no table"
    assert first_line("a" * 400) == "a" * 299 + "…"
    assert first_line("") == ""
