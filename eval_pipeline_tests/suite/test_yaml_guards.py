"""Every YAML the product reads refuses alias bombs, deep nesting and non-scalar keys, fast.

Each test runs with libyaml's parser (what PyYAML's wheels bring) and with PyYAML's own
(where PyYAML was built without libyaml): both keep the same limits.
"""

from __future__ import annotations

import pytest
import yaml

from eval_pipeline.suite import (
    MAX_ALIAS_NODES,
    MAX_DEPTH,
    SuiteError,
    YamlRefused,
    _yaml,  # the unit itself: both YAML loaders, C and Python
    load_config,
    load_suite,
    load_yaml,
)


def alias_bomb(indent: str = "") -> str:
    """Nine levels of nine aliases each: ~500 bytes that stand for 9**9 (387 million) values."""
    lines = [f"{indent}a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"{indent}a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    return "\n".join(lines) + "\n"


@pytest.fixture(autouse=True, params=["libyaml", "python"])
def parser(request, monkeypatch):
    if request.param == "libyaml" and not yaml.__with_libyaml__:
        pytest.skip("this PyYAML was built without libyaml")
    if request.param == "python":
        monkeypatch.setattr(_yaml, "_LineLoader", _yaml._PythonLineLoader)
    return request.param


BOMB_CASE = "prompt: hi\nassertions:\n  - type: tool_call\n    tool: execute_sql\n    args:\n"


def test_alias_bomb_is_refused_at_the_alias_that_crosses_the_budget():
    text = alias_bomb()
    assert len(text.encode()) < 500
    with pytest.raises(YamlRefused, match=f"aliases expand to more than {MAX_ALIAS_NODES:,}") as e:
        load_yaml(text)
    # a3 stands for 9**3 + ... values; the fourth level's aliases cross the 10,000 budget.
    assert e.value.line == 5


def test_aliases_within_the_budget_still_work():
    data = load_yaml("base: &b {sql_query: SELECT 1}\nuse: [*b, *b]\n")
    assert data["use"] == [{"sql_query": "SELECT 1"}] * 2


def test_an_alias_inside_its_own_anchor_is_refused():
    with pytest.raises(YamlRefused, match="alias \\*a refers to a value that contains it"):
        load_yaml("x: &a [1, *a]\n")


@pytest.mark.parametrize(
    "text",
    [
        "x: " + "[" * 20_000 + "]" * 20_000 + "\n",
        "x: " + "{a: " * 20_000 + "1" + "}" * 20_000 + "\n",
        "- " * 20_000 + "x\n",
        # shallow where written, deep once the aliases are expanded
        "".join(f"l{i}: &l{i} [[[[[[[[[[*l{i - 1}]]]]]]]]]]\n" for i in range(1, 20)).replace(
            "*l0", "1"
        ),
    ],
    ids=["flow sequences", "flow mappings", "block sequences", "through aliases"],
)
def test_deep_nesting_is_refused_without_recursion_error(text):
    with pytest.raises(YamlRefused, match=f"more than {MAX_DEPTH} levels deep"):
        load_yaml(text)


def test_nesting_up_to_the_limit_loads():
    depth = MAX_DEPTH
    data = load_yaml("[" * depth + "1" + "]" * depth)
    for _ in range(depth):
        data = data[0]
    assert data == 1


def test_bomb_in_a_test_file_and_in_the_config_is_a_listed_problem(make_suite):
    root = make_suite({"bomb.yml": BOMB_CASE + alias_bomb("      "), "ok.yml": "prompt: hi\n"})
    with pytest.raises(SuiteError) as error:
        load_suite(root)
    (problem,) = error.value.problems
    assert str(problem).startswith("cases/bomb.yml:10: aliases expand to more than 10,000")

    root = make_suite({}, config="test:\n  models: [replay:demo]\nx:\n" + alias_bomb("  "))
    with pytest.raises(SuiteError, match=r"eval_config\.yaml:8: aliases expand"):
        load_config(root)
