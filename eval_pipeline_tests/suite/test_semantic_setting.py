"""`semantic:` in a test file and in the `test:` defaults: parsed, checked, and part of the hash."""

from __future__ import annotations

import pytest

from eval_pipeline.suite import Semantic, SuiteError, load_suite

PLAIN = "prompt: How many orders?\nsql: SELECT COUNT(*) AS n FROM orders\n"


def hashes(suite):
    return {c.name: c.content_hash for c in suite.cases}


def test_off_by_default_and_a_case_without_it_keeps_its_hash(make_suite):
    suite = load_suite(make_suite({"count.yml": PLAIN}))
    assert suite.cases[0].semantic is None
    # the hash a case without the check had before the setting existed
    assert "semantic" not in suite.cases[0].verdict_fields()


def test_a_test_turns_it_on_and_the_change_regrades(make_suite):
    before = hashes(load_suite(make_suite({"count.yml": PLAIN})))
    suite = load_suite(make_suite({"count.yml": PLAIN + "semantic: {variants: 4, seed: 3}\n"}))
    assert suite.cases[0].semantic == Semantic(variants=4, seed=3)
    assert hashes(suite) != before
    reseeded = load_suite(make_suite({"count.yml": PLAIN + "semantic: {variants: 4, seed: 4}\n"}))
    assert hashes(reseeded) != hashes(suite)


def test_the_test_block_default_applies_to_tests_without_one(make_suite):
    root = make_suite(
        {"count.yml": PLAIN, "own.yml": PLAIN + "semantic: {variants: 2}\n"},
        config="test:\n  semantic: {variants: 8, seed: 0}\n",
    )
    cases = {c.name: c for c in load_suite(root).cases}
    assert cases["count"].semantic == Semantic(variants=8, seed=0)
    assert cases["own"].semantic == Semantic(variants=2, seed=0)
    off = hashes(load_suite(make_suite({"count.yml": PLAIN}, config="test: {}\n")))
    assert off["count"] != cases["count"].content_hash


@pytest.mark.parametrize(
    ("text", "field", "expected"),
    [
        ("semantic: {variants: 0}", "semantic.variants", "an integer from 1 to 64"),
        ("semantic: {variants: 8, seeds: 1}", "semantic.seeds", "unknown key"),
        ("semantic: yes", "semantic", "expected a mapping"),
    ],
)
def test_a_wrong_setting_is_one_clear_problem(make_suite, text, field, expected):
    with pytest.raises(SuiteError) as error:
        load_suite(make_suite({"count.yml": PLAIN + text + "\n"}))
    [problem] = error.value.problems
    assert problem.field == field and expected in problem.message


def test_a_wrong_default_names_the_config_field(make_suite):
    with pytest.raises(SuiteError) as error:
        load_suite(make_suite({"count.yml": PLAIN}, config="test:\n  semantic: {seed: -1}\n"))
    assert [p.field for p in error.value.problems] == ["test.semantic.seed"]
