"""`start_suite` (`eval-pipeline init`): a new suite on a DuckDB file, checked before it is
reported, and never written over a suite or left half-written."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import duckdb
import pytest

from eval_pipeline.pipeline import (
    _new_suite,
    start_suite,
)  # the unit itself: _new_suite's lookup made to fail
from eval_pipeline.suite import SuiteError, load_suite

OPENAI_ONLY = {"OPENAI_API_KEY": "sk-test"}


def warehouse(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(path)) as connection:
        connection.execute(
            "CREATE TABLE orders AS SELECT * FROM (VALUES (1, 10.0), (2, 20.0), (3, 5.5)) "
            "t(order_id, amount)"
        )
        connection.execute('CREATE TABLE "Line Items" (order_id INTEGER)')
    return path


def test_a_folder_holding_one_duckdb_file_becomes_a_suite_whose_reference_ran(tmp_path):
    warehouse(tmp_path / "shop.duckdb")
    started = start_suite(tmp_path, environ=OPENAI_ONLY)

    assert [name for _, name in started.written] == [
        "eval_config.yaml",
        "cases/line_items_row_count.yml",  # the first table by name, quoted in the SQL
        "RULES.md",
        ".gitignore",
    ]
    suite = load_suite(tmp_path)
    (case,) = suite.cases
    assert case.sql.strip() == 'SELECT COUNT(*) AS row_count FROM "Line Items"'
    assert started.reference.rows == [[0]] and started.reference.error is None
    # Relative, so the suite and its warehouse can be moved together.
    assert 'path: "shop.duckdb"' in (tmp_path / "eval_config.yaml").read_text()
    assert suite.config.warehouse.path == tmp_path / "shop.duckdb"
    assert suite.config.context == (tmp_path / "RULES.md",)
    assert suite.config.test.models == ("openai:gpt-4.1",)
    assert suite.config.provider("openai").api_key.env_names == ("OPENAI_API_KEY",)
    assert (tmp_path / ".gitignore").read_text().splitlines()[1:] == ["/.eval/", "/outputs/"]


def test_a_warehouse_elsewhere_is_named_by_its_absolute_path(tmp_path):
    shop = warehouse(tmp_path / "data" / "shop.duckdb")
    started = start_suite(tmp_path / "suite", warehouse=shop, environ={})
    assert started.database.path == shop
    assert started.reference.rows == [[0]]


def test_only_an_anthropic_key_starts_the_suite_on_anthropic(tmp_path):
    warehouse(tmp_path / "shop.duckdb")
    started = start_suite(tmp_path, environ={"ANTHROPIC_API_KEY": "sk-ant"})
    config = load_suite(tmp_path).config
    assert config.test.models == started.models.models == ("anthropic:claude-sonnet-4-5",)
    assert config.test.judge_model == "anthropic:claude-haiku-4-5"


@pytest.mark.parametrize("existing", ["eval_config.yaml", "cases"])
def test_a_suite_is_never_written_over_and_the_error_names_the_file(tmp_path, existing):
    warehouse(tmp_path / "shop.duckdb")
    if existing == "cases":
        (tmp_path / "cases").mkdir()
    else:
        (tmp_path / existing).write_text("test: {threads: 2}\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(SuiteError) as caught:
        start_suite(tmp_path, environ={})
    assert str(tmp_path / existing) in caught.value.render()
    assert "never overwrites" in caught.value.render()
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_several_duckdb_files_or_none_ask_for_the_warehouse(tmp_path):
    with pytest.raises(SuiteError, match=r"no DuckDB file \(\*\.duckdb\) here; name the"):
        start_suite(tmp_path, environ={})
    warehouse(tmp_path / "a.duckdb")
    warehouse(tmp_path / "b.duckdb")
    with pytest.raises(SuiteError, match=r"several DuckDB files \(a\.duckdb, b\.duckdb\)"):
        start_suite(tmp_path, environ={})
    assert not (tmp_path / "eval_config.yaml").exists()


def test_the_users_gitignore_is_added_to_and_their_rules_kept(tmp_path):
    warehouse(tmp_path / "shop.duckdb")
    (tmp_path / ".gitignore").write_text("*.log\n/outputs/\n")
    (tmp_path / "RULES.md").write_text("# Our rules\n")
    started = start_suite(tmp_path, environ={})
    assert ("kept", "RULES.md") in started.written
    assert ("added to", ".gitignore") in started.written
    assert (tmp_path / "RULES.md").read_text() == "# Our rules\n"
    lines = (tmp_path / ".gitignore").read_text().splitlines()
    assert lines[:2] == ["*.log", "/outputs/"] and lines[-1] == "/.eval/"
    assert lines.count("/outputs/") == 1


def test_a_reference_that_fails_leaves_no_half_written_suite(tmp_path, monkeypatch):
    warehouse(tmp_path / "shop.duckdb")
    (tmp_path / ".gitignore").write_text("*.log\n")
    real = _new_suite.references_by_database

    def failing(*args, **kwargs):
        return [replace(result, error="boom") for result in real(*args, **kwargs)]

    monkeypatch.setattr(_new_suite, "references_by_database", failing)
    with pytest.raises(SuiteError, match="the reference SQL failed on the warehouse: boom"):
        start_suite(tmp_path, environ={})
    assert sorted(p.name for p in tmp_path.iterdir()) == [".gitignore", "shop.duckdb"]
    assert (tmp_path / ".gitignore").read_text() == "*.log\n"


def test_a_server_url_keeps_its_password_out_of_every_message(tmp_path):
    # Nothing listens on port 9: the connection fails before anything is written.
    url = "postgresql://ada:pw-never-shown-42@127.0.0.1:9/shop"
    with pytest.raises(SuiteError) as caught:
        start_suite(tmp_path / "suite", url=url, environ={})
    assert "cannot open the warehouse" in caught.value.render()
    assert "pw-never-shown-42" not in caught.value.render()
    assert not (tmp_path / "suite").exists()
    with pytest.raises(SuiteError, match="expected postgresql://"):
        start_suite(tmp_path / "suite", url="sqlite:///x.db", environ={})
