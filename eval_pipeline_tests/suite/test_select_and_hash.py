"""Selecting cases the way `-s/--select` does, and what changes a case's hash."""

from __future__ import annotations

import pytest

from eval_pipeline.suite import SelectionError, load_suite

FILES = {
    "total_revenue.yml": "prompt: Total revenue?\nsql: SELECT 1 AS revenue_usd\n",
    "revenue/by_month.yml": "name: revenue_by_month\nprompt: Revenue by month?\n",
    "revenue/deep/refunds.yml": "prompt: Refund rate?\n",
    "customers/active.yml": "prompt: Active customers?\n",
}


@pytest.fixture
def suite(make_suite):
    return load_suite(make_suite(FILES))


def names(cases):
    return [c.name for c in cases]


def test_empty_selection_is_everything(suite):
    assert names(suite.select(None)) == names(suite.cases)
    assert names(suite.select(" , ")) == names(suite.cases)


def test_names_stems_and_folders_keep_order_and_tolerate_spaces_and_repeats(suite):
    assert names(suite.select(" active , total_revenue,active,")) == ["active", "total_revenue"]
    # the file stem of a renamed test selects it too
    assert names(suite.select("by_month")) == ["revenue_by_month"]
    assert names(suite.select("revenue")) == ["revenue_by_month", "refunds"]
    assert names(suite.select(["revenue/deep", "customers/"])) == ["refunds", "active"]


def test_unknown_selection_lists_what_exists(suite):
    with pytest.raises(SelectionError) as error:
        suite.select("total_revenue,nope")
    message = str(error.value)
    assert "'nope'" in message
    for name in ("active", "revenue_by_month", "refunds", "total_revenue"):
        assert name in message


def _hashes(make_suite, text: str):
    case = load_suite(make_suite({"t.yml": text})).cases[0]
    return case.input_hash, case.content_hash


BASE = """\
name: t
# a comment
prompt: How much revenue?
sql: SELECT 1 AS revenue_usd
tags: [a]
"""


def test_comments_key_order_and_metadata_do_not_change_the_hash(make_suite):
    base = _hashes(make_suite, BASE)
    reordered = "sql: SELECT 1 AS revenue_usd   \ntags: [b, c]\nnotes: why\nprompt: How much revenue?\nname: t\n"
    assert _hashes(make_suite, reordered) == base


def test_prompt_changes_both_hashes_but_sql_only_the_content_hash(make_suite):
    base_input, base_content = _hashes(make_suite, BASE)
    new_prompt = _hashes(make_suite, BASE.replace("How much", "How many dollars of"))
    assert new_prompt[0] != base_input and new_prompt[1] != base_content
    new_sql = _hashes(make_suite, BASE.replace("SELECT 1", "SELECT 2"))
    assert new_sql[0] == base_input, "a reference change must not force a new agent run"
    assert new_sql[1] != base_content
    checks = _hashes(make_suite, BASE + "assertions: [{type: tool_call, tool: execute_sql}]\n")
    assert checks[0] == base_input and checks[1] != base_content


def test_suite_hash_follows_case_content(make_suite):
    one = load_suite(make_suite({"t.yml": BASE})).hash
    same = load_suite(make_suite({"t.yml": BASE + "notes: more words\n"})).hash
    other = load_suite(make_suite({"t.yml": BASE.replace("SELECT 1", "SELECT 3")})).hash
    assert one == same != other
