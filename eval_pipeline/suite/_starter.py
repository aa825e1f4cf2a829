"""The files `eval-pipeline init` writes for a new suite: a commented config, a first test, RULES.md, .gitignore."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from eval_pipeline.suite._config import CONFIG_FILE, DEFAULT_DATABASE_NAME
from eval_pipeline.suite._engines import DUCKDB, engine_named

#: What `.gitignore` must hold so results and the instance state stay out of version control
#: (anchored: a suite inside a larger repository ignores only its own folders).
IGNORED = ("/.eval/", "/outputs/")
RULES_FILE = "RULES.md"
_PLAIN_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")


@dataclass(frozen=True)
class StarterWarehouse:
    """The warehouse a new suite points at, as its config will say it.

    Args:
        type: its engine's name (`Engine.name`): `duckdb`, `postgres`, `mysql`...
        location: a database file's path as written (relative to the suite, or absolute),
            or a server URL as written: with no password, or `{{ env('NAME') }}`.
    """

    type: str
    location: str


@dataclass(frozen=True)
class StarterModels:
    """The models a new suite evaluates by default, and the one that reads answers."""

    models: tuple[str, ...]
    judge: str


def quoted_table(name: str, engine: str) -> str:
    """A table name as SQL of the engine named `engine` spells it: bare when plain, else quoted."""
    return name if _PLAIN_IDENTIFIER.fullmatch(name) else engine_named(engine).quoted(name)


def starter_test_name(table: str) -> str:
    """The first test's name (and file stem): `<table>_row_count`, in plain characters."""
    stem = re.sub(r"[^a-z0-9]+", "_", table.lower()).strip("_") or "table"
    return f"{stem}_row_count"


def starter_test_path(table: str) -> str:
    """The first test's file, relative to the suite folder."""
    return f"cases/{starter_test_name(table)}.yml"


def starter_files(
    warehouse: StarterWarehouse, models: StarterModels, tables: Sequence[str]
) -> dict[str, str]:
    """A new suite's files (path relative to the suite → text), but `.gitignore`
    (`starter_gitignore`): the config, a first test on `tables[0]`, RULES.md."""
    return {
        CONFIG_FILE: starter_config(warehouse, models),
        starter_test_path(tables[0]): starter_test(tables[0], warehouse.type),
        RULES_FILE: starter_rules(tables),
    }


def starter_reference(table: str, engine: str) -> str:
    return f"SELECT COUNT(*) AS row_count FROM {quoted_table(table, engine)}"


def starter_test(table: str, engine: str) -> str:
    """The first test file: how many rows a table has, with a COUNT(*) reference."""
    return f"""\
# A first test: a question for the agent, and reference SQL whose result is the right answer.
# The reference runs on the warehouse and is compared with the data the agent's answer
# gives. Add a file per question under cases/ (subfolders welcome); docs/writing-tests.md
# lists every key (assertions, tool_calls, evaluators, consistency, k, tags, ...).
name: {starter_test_name(table)}
prompt: {json.dumps(f"How many rows does the {table} table have?")}
sql: |
  {starter_reference(table, engine)}
tags: [starter]
"""


def starter_config(warehouse: StarterWarehouse, models: StarterModels) -> str:
    """A commented `eval_config.yaml` pointing at `warehouse`."""
    if warehouse.type == DUCKDB:  # the one engine a `warehouse:` block configures
        where = f"""\
# The database the reference SQL runs on and the built-in agent queries, read-only. Several
# (PostgreSQL, MySQL/MariaDB too) go under `databases:` instead: docs/warehouses.md.
warehouse: {{type: duckdb, path: {json.dumps(warehouse.location)}}}
"""
    else:
        field = "url" if engine_named(warehouse.type).on_server else "path"
        where = f"""\
# The database the reference SQL runs on and the built-in agent queries, read-only (give the
# agent a read-only role all the same). A test picks another with `database: <name>` once
# more are listed here: docs/warehouses.md.
databases:
  - name: {DEFAULT_DATABASE_NAME}
    type: {warehouse.type}
    {field}: {json.dumps(warehouse.location)}
"""
    listed = ", ".join(models.models)
    return f"""\
# An eval-pipeline suite, started by `eval-pipeline init`. Relative paths are read from this
# folder, so the suite can be copied anywhere. A value written "{{{{ env('NAME') }}}}" is read
# from the environment when it is needed: keys and passwords never belong in this file.
# docs/configuration.md lists every key.

# Defaults for `eval-pipeline test`; a command-line flag wins for that run.
test:
  # Who answers the tests: provider:model_id is the built-in SQL agent driven by that LLM
  # (repeat -m on the command line to compare several). openai and anthropic need no `llm`
  # block: they read OPENAI_API_KEY / ANTHROPIC_API_KEY from the environment.
  models: [{listed}]
  # Reads the agent's answer out of its query results, and grades judged checks.
  judge_model: {models.judge}
  threads: 4                 # agent runs in flight at once

{where}
# Given to the built-in agent with the warehouse's schema: your business rules.
context: [{RULES_FILE}]

# Another provider, another key variable, a base_url (any OpenAI-compatible server: vLLM,
# Ollama, LiteLLM) or prices go under llm.providers, e.g.:
# llm:
#   providers:
#     - provider: local
#       base_url: http://127.0.0.1:4000/v1
#       api_key: "{{{{ env('LOCAL_LLM_KEY') }}}}"
"""


def starter_rules(tables: Sequence[str], *, shown: int = 20) -> str:
    """A RULES.md stub naming the warehouse's tables, for the user to fill in."""
    lines = [f"- `{name}`: what one row is, and when to use it." for name in tables[:shown]]
    if len(tables) > shown:
        lines.append(f"- … and {len(tables) - shown} more tables.")
    listing = "\n".join(lines) or "- (the warehouse's tables)"
    return f"""\
# Business rules

Given to the built-in agent on every test, with the warehouse's tables and columns
(`context:` in eval_config.yaml). Write what a new analyst would have to be told: which
tables to use, what a metric means, which rows to leave out, which day "today" is.

## Tables

{listing}

## Definitions

- Revenue: …
"""


def starter_gitignore(existing: str) -> str:
    """The lines to append to a `.gitignore` holding `existing` ("" when there is none)."""
    present = {line.strip() for line in existing.splitlines()}
    missing = [entry for entry in IGNORED if entry not in present]
    if not missing:
        return ""
    header = "# eval-pipeline: the results store, the Dagster instance and results files\n"
    separator = "\n" if existing and not existing.endswith("\n") else ""
    return separator + header + "".join(f"{entry}\n" for entry in missing)
