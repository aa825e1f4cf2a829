"""A small nao project on disk, laid out and configured the way nao documents it, and a
scripted agent (`by_prompt`) answering its tests."""

from __future__ import annotations

import textwrap
from pathlib import Path

import duckdb

from eval_pipeline_tests.agents.servers import (
    RecordedRequest,
    Step,
    answer,
    execute_sql,
    exhausted,
    tool_calls,
)

#: test name → (prompt, reference SQL), as a team's `tests/*.yml` would hold them.
TESTS = {
    "total_revenue": (
        "What is the total revenue from all orders?",
        "SELECT SUM(amount) AS total_revenue FROM orders",
    ),
    "order_count": ("How many orders were placed?", "SELECT COUNT(*) AS orders FROM orders"),
}
KEY_VARIABLE = "NAO_TEST_VLLM_KEY"


def nao_config(base_url: str) -> str:
    """nao's own spelling: an unquoted `${{ env() }}` key, `openaiCompatible/<name>`, nao keys
    we do not read (`project_name`, `repos`), and a `test:` block with nao's model ids."""
    return textwrap.dedent(
        f"""\
        project_name: shop
        databases:
          - name: shop
            type: duckdb
            path: data/shop.duckdb
        repos:
          - name: dbt
            url: https://example.invalid/dbt.git
        llm:
          providers:
            - provider: openaiCompatible/vllm
              base_url: {base_url}
              api_key: ${{{{ env('{KEY_VARIABLE}') }}}}
              models:
                - id: qwen3
        test:
          models:
            - openaiCompatible/vllm:qwen3
          threads: 2
          k: 1
          comparison:
            decimals: 2
            rtol: 0.00001
        """
    )


def write_nao_project(root: Path, *, base_url: str = "http://127.0.0.1:9/v1") -> Path:
    """`nao_config.yaml`, `tests/*.yml` (one in a subfolder), a past `tests/outputs/` holding a
    stray YAML file that must not load, and `data/shop.duckdb` with a few orders."""
    (root / "tests" / "sales").mkdir(parents=True)
    (root / "tests" / "outputs").mkdir()
    (root / "data").mkdir()
    (root / "nao_config.yaml").write_text(nao_config(base_url), encoding="utf-8")
    for i, (name, (prompt, sql)) in enumerate(TESTS.items()):
        folder = root / "tests" / ("sales" if i == 0 else "")
        (folder / f"{name}.yml").write_text(
            f"name: {name}\nprompt: {prompt}\nsql: |\n  {sql}\n", encoding="utf-8"
        )
    (root / "tests" / "outputs" / "not_a_test.yml").write_text("just: [a, leftover", "utf-8")
    with duckdb.connect(str(root / "data" / "shop.duckdb")) as connection:
        connection.execute("CREATE TABLE orders (id INTEGER, customer TEXT, amount DOUBLE)")
        connection.execute(
            "INSERT INTO orders VALUES (1, 'al', 10.5), (2, 'bo', 80.0), (3, 'bo', 42.25)"
        )
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file of the project except our state folder, to prove nothing else was written."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and ".eval" not in path.relative_to(root).parts
    }


# The agent answers total_revenue right and order_count wrong.
AGENT_SQL = {"total_revenue": TESTS["total_revenue"][1], "order_count": "SELECT 2 AS orders"}


def by_prompt(request: RecordedRequest, _index: int) -> Step:
    """Turn 0: run the test's query; turn 1: answer. Tests are told apart by their prompt."""
    text = " ".join(str(m.get("content")) for m in request.messages if m.get("role") == "user")
    turn = sum(1 for m in request.messages if m.get("role") == "assistant")
    for name, (prompt, _sql) in TESTS.items():
        if prompt in text:
            return tool_calls(execute_sql(AGENT_SQL[name])) if turn == 0 else answer("Done.")
    return exhausted(f"unknown prompt in {text[:80]!r}")
