"""Loading test files: nao compatibility, the superset fields, and every kind of bad input."""

from __future__ import annotations

import pytest

from eval_pipeline.suite import SuiteError, load_suite

NAO_FILE = """\
name: total_revenue
prompt: What is the total revenue from all orders?
sql: |
  SELECT SUM(amount) as total_revenue FROM orders
"""

NAO_WITH_ASSERTIONS = """\
name: ambiguous_revenue_period
prompt: What was the revenue?
database: warehouse
category: revenue
difficulty: hard
notes: the agent should ask which period
assertions:
  - type: tool_call
    tool: clarification
  - type: tool_call
    tool: execute_sql
    args: {sql_query: "SELECT 1"}
    min_count: 2
"""


def problems_of(error: pytest.ExceptionInfo[SuiteError]) -> list[str]:
    return [str(p) for p in error.value.problems]


def test_nao_files_load_unchanged(make_suite):
    root = make_suite({"total_revenue.yml": NAO_FILE, "ambiguous.yaml": NAO_WITH_ASSERTIONS})
    suite = load_suite(root)
    by_name = {c.name: c for c in suite.cases}
    revenue = by_name["total_revenue"]
    assert revenue.prompt == "What is the total revenue from all orders?"
    assert revenue.sql.strip() == "SELECT SUM(amount) as total_revenue FROM orders"
    assert revenue.kinds == ("data",)
    ambiguous = by_name["ambiguous_revenue_period"]
    assert [a.tool for a in ambiguous.assertions] == ["clarification", "execute_sql"]
    assert ambiguous.assertions[1].args == {"sql_query": "SELECT 1"}
    assert ambiguous.assertions[1].min_count == 2
    assert ambiguous.assertions[0].min_count == 1
    assert (ambiguous.category, ambiguous.difficulty, ambiguous.database) == (
        "revenue",
        "hard",
        "warehouse",
    )


def test_name_defaults_to_file_stem_and_superset_fields_load(make_suite):
    root = make_suite(
        {
            "sub/refund_tools.yaml": """\
            conversation:
              - {role: user, content: "Hi, I need refund numbers"}
              - {role: assistant, content: "Sure, for which period?"}
              - {role: user, content: Last month please}
            tool_calls:
              - tool: execute_sql
                arguments:
                  sql_query: {match_type: llm_judge, criteria: filters on last month}
                  limit: {match_type: exact, value: 10}
                  other: {match_type: any}
              - tool: list_tables
                accept_any_arguments: true
            evaluators:
              - {name: correctness, criteria: States a number}
            consistency: {n: 3}
            comparison: {decimals: 1}
            ordered: true
            k: 4
            tags: [refunds, multi-turn]
            """
        }
    )
    case = load_suite(root).cases[0]
    assert case.name == "refund_tools"
    assert case.folder == "sub"
    assert [m.role for m in case.messages] == ["user", "assistant", "user"]
    assert case.prompt == "Last month please"
    assert case.tool_calls[0].arguments["limit"].value == 10
    assert case.tool_calls[0].arguments["sql_query"].criteria == "filters on last month"
    assert case.tool_calls[1].accept_any_arguments is True
    assert case.consistency.n == 3
    assert case.comparison.decimals == 1 and case.comparison.rtol == 1e-5
    assert case.kinds == ("tool_calls", "evaluators", "consistency")
    assert case.tags == ("refunds", "multi-turn")


def test_discovery_skips_outputs_and_other_files(make_suite):
    root = make_suite(
        {
            "a.yml": NAO_FILE,
            "outputs/results.yaml": "not: a test",
            "notes.txt": "ignored",
            "deep/er/b.yaml": "prompt: How many customers?\n",
        }
    )
    assert [c.relative_path for c in load_suite(root).cases] == ["a.yml", "deep/er/b.yaml"]


BAD_FILES = {
    "malformed.yml": ("name: x\nprompt: [unclosed\n", "cases/malformed.yml:", "invalid YAML"),
    "no_prompt.yml": (
        "name: no_prompt\nsql: SELECT 1\n",
        "cases/no_prompt.yml:1: prompt:",
        "is required",
    ),
    "empty_prompt.yml": ("prompt: '  '\n", "cases/empty_prompt.yml:1: prompt:", "non-empty string"),
    "ends_assistant.yml": (
        "conversation:\n  - {role: user, content: hi}\n  - {role: assistant, content: hello}\n",
        "cases/ends_assistant.yml:3: conversation[1]:",
        "must end with a user message",
    ),
    "bad_assertion.yml": (
        "prompt: hi\nassertions:\n  - {type: sql_match, tool: x}\n",
        "cases/bad_assertion.yml:3: assertions[0].type:",
        "unknown assertion type 'sql_match'; expected one of: tool_call",
    ),
    "min_count_zero.yml": (
        "prompt: hi\nassertions:\n  - type: tool_call\n    tool: execute_sql\n    min_count: 0\n",
        "cases/min_count_zero.yml:5: assertions[0].min_count:",
        "expected an integer ≥ 1, got 0",
    ),
    "bad_matcher.yml": (
        "prompt: hi\ntool_calls:\n  - tool: t\n    arguments:\n      a: {match_type: fuzzy}\n",
        "cases/bad_matcher.yml:5: tool_calls[0].arguments.a.match_type:",
        "unknown matcher 'fuzzy'; expected one of: exact, llm_judge, any",
    ),
    "unknown_key.yml": (
        "prompt: hi\nexpected_sql: SELECT 1\n",
        "cases/unknown_key.yml:2: expected_sql:",
        "unknown field",
    ),
    "duplicate_key.yml": (
        "prompt: hi\nprompt: again\n",
        "cases/duplicate_key.yml:2:",
        "duplicate key 'prompt'",
    ),
    "wrong_type.yml": (
        "prompt: hi\nordered: maybe\n",
        "cases/wrong_type.yml:2: ordered:",
        "expected true or false",
    ),
    "not_mapping.yml": ("- just\n- a list\n", "cases/not_mapping.yml:", "must be a mapping"),
    "complex_key.yml": (
        "prompt: hi\nnotes:\n  ? [a, b]\n  : c\n",
        "cases/complex_key.yml:3:",
        "a mapping key must be a plain value (text or a number), got a list",
    ),
    "k_huge.yml": ("prompt: hi\nk: 1000000000\n", "cases/k_huge.yml:2: k:", "from 1 to 100"),
    "n_huge.yml": (
        "prompt: hi\nconsistency: {n: 1000}\n",
        "cases/n_huge.yml:2: consistency.n:",
        "expected an integer from 2 to 20, got 1000",
    ),
    "atol_nan.yml": (
        "prompt: hi\nsql: SELECT 1\ncomparison: {atol: .nan}\n",
        "cases/atol_nan.yml:3: comparison.atol:",
        "expected a finite number ≥ 0, got nan",
    ),
    "rtol_inf.yml": (
        "prompt: hi\nsql: SELECT 1\ncomparison:\n  rtol: .inf\n",
        "cases/rtol_inf.yml:4: comparison.rtol:",
        "expected a finite number ≥ 0, got inf",
    ),
}


@pytest.mark.parametrize("filename", sorted(BAD_FILES))
def test_each_bad_file_names_file_line_field_and_expectation(make_suite, filename):
    text, where, what = BAD_FILES[filename]
    root = make_suite({filename: text, "good.yml": NAO_FILE})
    with pytest.raises(SuiteError) as error:
        load_suite(root)
    messages = problems_of(error)
    assert any(m.startswith(where) and what in m for m in messages), messages


def test_every_problem_is_reported_at_once(make_suite):
    files = {name: text for name, (text, _, _) in BAD_FILES.items()}
    root = make_suite(files)
    with pytest.raises(SuiteError) as error:
        load_suite(root)
    sources = {p.source for p in error.value.problems}
    assert sources == {f"cases/{name}" for name in BAD_FILES}
    assert "nothing was run" in str(error.value)


def test_duplicate_names_name_both_files(make_suite):
    root = make_suite({"a.yml": NAO_FILE, "b/c.yml": NAO_FILE})
    with pytest.raises(SuiteError) as error:
        load_suite(root)
    (message,) = problems_of(error)
    assert "cases/b/c.yml: name:" in message and "already used by cases/a.yml" in message


def test_custom_consistency_prompt_needs_both_submissions(make_suite):
    root = make_suite(
        {"c.yml": "prompt: hi\nconsistency: {n: 3, prompt: 'Compare {{ submission_1 }}'}\n"}
    )
    with pytest.raises(SuiteError) as error:
        load_suite(root)
    assert "{{ submission_2 }}" in problems_of(error)[0]


def test_consistency_needs_two_runs(make_suite):
    root = make_suite({"c.yml": "prompt: hi\nconsistency: {n: 1}\n"})
    with pytest.raises(SuiteError, match=r"consistency.n: expected an integer from 2 to 20"):
        load_suite(root)
