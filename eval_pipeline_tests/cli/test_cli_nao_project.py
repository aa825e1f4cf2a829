"""`eval-pipeline test` run in a nao project's folder, against the OpenAI-compatible server
its `nao_config.yaml` declares the nao way (`openaiCompatible/vllm`), with the key read from
the environment as nao does."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from eval_pipeline.store import StateFolder, query
from eval_pipeline.suite import load_suite
from eval_pipeline_tests.agents.servers import (
    ScriptedServer,
)
from eval_pipeline_tests.cli.console import cli_env, no_traceback, run_cli, run_cli_subprocess
from eval_pipeline_tests.cli.nao_files import key_paths
from eval_pipeline_tests.cli.replay_suite import DAY
from eval_pipeline_tests.suite.nao_project import (
    AGENT_SQL,
    KEY_VARIABLE,
    by_prompt,
    snapshot,
    write_nao_project,
)
from eval_pipeline_tests.viewer.conftest import fetch, start

pytestmark = pytest.mark.slow


def test_eval_pipeline_test_runs_a_nao_project_as_it_is(tmp_path):
    with ScriptedServer("openai", script=by_prompt) as server:
        project = write_nao_project(tmp_path / "shop", base_url=server.base_url)
        # Our extras may sit beside nao's file: grade from the last query, no extraction model.
        (project / "eval_config.yaml").write_text("test:\n  extraction: last_query\n")
        before = snapshot(project)
        # The real console script: a nao project's evaluation as nao's users start it.
        result = run_cli_subprocess(
            "test",
            "--date",
            DAY,
            "--format",
            "json",
            cwd=project,
            env={**cli_env(), KEY_VARIABLE: "sk-vllm-test"},
        )
    no_traceback(result)
    assert result.returncode == 1, result.stdout + result.stderr  # one test failed
    assert "no cases/ folder" not in result.stdout + result.stderr
    assert {r.headers.get("authorization") for r in server.requests} == {"Bearer sk-vllm-test"}
    assert {r.json["model"] for r in server.requests} == {"qwen3"}
    assert (project / ".eval" / "results.duckdb").exists()  # state in <project>/.eval/
    after = snapshot(project)
    assert {k: v for k, v in after.items() if k in before} == before  # user files untouched
    document = json.loads(result.stdout)
    verdicts = {r["name"]: r["passed"] for r in document["results"]}
    assert verdicts == {"total_revenue": True, "order_count": False}


def test_each_run_line_names_the_model_as_the_user_spelled_it(tmp_path):
    with ScriptedServer("openai", script=by_prompt) as server:
        project = write_nao_project(tmp_path / "shop", base_url=server.base_url)
        (project / "eval_config.yaml").write_text("test:\n  extraction: last_query\n")
        env = {**cli_env(), KEY_VARIABLE: "sk-vllm-test"}
        model = "openaiCompatible/vllm:qwen3"
        run = run_cli("test", "--date", DAY, "-m", model, cwd=project, env=env)
    no_traceback(run)
    ran = sorted(re.findall(r"ran (\S+ \S+#\d+)", run.stderr))
    assert ran == [f"order_count {model}#0", f"total_revenue {model}#0"], run.stderr


NAO_EXAMPLE = (
    Path(__file__).parents[1] / "pipeline" / "nao_results" / "results_20260105_143022.json"
)


def test_the_results_file_has_every_key_path_of_naos_with_naos_value_kinds(tmp_path):
    """The file in tests/outputs/, key path by key path against an example of nao's format
    (written from nao's documented format): every path nao writes is there, and each value
    is of a kind nao writes at that path (a number where nao writes one: never a null cost)."""
    with ScriptedServer("openai", script=by_prompt) as server:
        project = write_nao_project(tmp_path / "shop", base_url=server.base_url)
        (project / "eval_config.yaml").write_text("test:\n  extraction: last_query\n")
        env = {**cli_env(), KEY_VARIABLE: "sk-vllm-test"}
        # stdin is empty, as in CI: nothing to answer a prompt; none is asked.
        model = "openaiCompatible/vllm:qwen3"
        run = run_cli("test", "--date", DAY, "-q", "-m", model, cwd=project, env=env)
    no_traceback(run)
    assert run.returncode == 1, run.stdout + run.stderr
    # nao's self-hosted model has no price: our own output says so, never $0 (nao #1220).
    assert "cost unknown" in run.stdout and "$0" not in run.stdout
    files = sorted((project / "tests" / "outputs").glob("results_*.json"))
    assert [f.name[:17] for f in files] == [f"results_{DAY.replace('-', '')}_"]
    ours = json.loads(files[0].read_text())
    expected = key_paths(json.loads(NAO_EXAMPLE.read_text()))
    found = key_paths(ours)
    missing = sorted(set(expected) - set(found))
    assert not missing, missing
    wrong = {p: (found[p], expected[p]) for p in expected if not found[p] <= expected[p]}
    assert not wrong, wrong
    # Our additions stay, beside nao's keys.
    assert ours["summary"]["cost_complete"] is False and ours["summary"]["total_cost_usd"] is None
    assert {"status", "verified", "run_date", "cost_usd"} <= ours["results"][0].keys()
    assert {"checks", "diff"} <= ours["results"][0]["details"].keys()
    assert {"p50_duration_ms", "p95_duration_ms"} <= ours["by_model"][0].keys()
    assert isinstance(ours["pass_metrics_by_test"], list)
    # nao's spelling of the model, the tolerances used, the query as nao shows it.
    assert {r["model"] for r in ours["results"]} == {"openaiCompatible/vllm:qwen3"}
    first = next(r for r in ours["results"] if r["name"] == "total_revenue")
    # nao's viewer shows `comparison` as text (an object blanks its page): ours in `tolerances`.
    assert first["details"]["comparison"] is None  # it matched
    assert first["details"]["tolerances"] == {"rtol": 1e-05, "atol": 1e-08, "decimals": 2}
    wrong_count = next(r for r in ours["results"] if r["name"] == "order_count")
    assert "orders" in wrong_count["details"]["comparison"]
    assert {r["attempt"] for r in ours["results"]} == {1}  # nao counts from 1
    assert {r["cost"] for r in ours["results"]} == {None}  # unpriced: null, as nao writes it
    call = first["details"]["tool_calls"][0]
    assert call["toolName"] == "execute_sql"
    assert call["args"] == {"sql_query": AGENT_SQL["total_revenue"]}
    assert call["result"]["data"] == [{"total_revenue": 132.75}]
    assert call["result"]["dialect"] == "duckdb" and call["result"]["row_count"] == 1
    assert call["result"]["_version"] == "1"
    assert ours["pass_metrics"]["k"] == 1 and ours["pass_metrics"]["aggregate"]["pass_at_1"] == 0.5


@pytest.mark.parametrize(
    ("host", "env", "cause"),
    [
        (
            "\"{{ env('NAO_TEST_PG_HOST') }}\"",
            {},
            "environment variable NAO_TEST_PG_HOST is not set",
        ),
        ("127.0.0.1", {}, "cannot connect"),  # port 9: nothing listens there
    ],
)
def test_a_database_problem_names_nao_config_yaml_and_its_line(tmp_path, host, env, cause):
    project = tmp_path / "shop"
    (project / "tests").mkdir(parents=True)
    (project / "tests" / "total.yml").write_text(
        "name: total\nprompt: Total?\nsql: SELECT 1 AS n\n"
    )
    (project / "nao_config.yaml").write_text(
        "project_name: shop\n"
        "databases:\n"
        "  - name: analytics\n"
        "    type: postgres\n"
        f"    host: {host}\n"
        "    port: 9\n"
        "    user: app\n"
        "    database: analytics\n"
        "llm:\n"
        "  providers:\n"
        "    - provider: openaiCompatible/local\n"
        "      base_url: http://127.0.0.1:9/v1\n"
        "      api_key: none\n"
        "      models: [{id: agent}]\n"
    )
    result = run_cli(
        "test", "--date", DAY, "-m", "local:agent", cwd=project, env={**cli_env(), **env}
    )
    no_traceback(result)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "nao_config.yaml:3: databases[0]: database 'analytics' (postgres): " in result.stderr
    assert cause in result.stderr
    assert "eval_config.yaml" not in result.stderr


def test_an_edit_of_rules_md_runs_the_tests_again_and_the_agent_reads_the_new_rules(tmp_path):
    """RULES.md is nao's agent's main context: ours reads it too, as an input of the runs."""
    with ScriptedServer("openai", script=by_prompt) as server:
        project = write_nao_project(tmp_path / "shop", base_url=server.base_url)
        (project / "eval_config.yaml").write_text("test:\n  extraction: last_query\n")
        (project / "RULES.md").write_text("Amounts are in EUR.\n")
        env = {**cli_env(), KEY_VARIABLE: "sk-vllm-test"}

        def evaluate() -> int:
            before = len(server.requests)
            run = run_cli("test", "--date", DAY, "-q", cwd=project, env=env)
            no_traceback(run)
            assert run.returncode == 1, run.stdout + run.stderr  # order_count fails
            return len(server.requests) - before

        def system_prompts() -> set[str]:
            return {r.messages[0]["content"] for r in server.requests[-4:]}

        assert evaluate() == 4  # two tests, two turns each
        assert all("## RULES.md\nAmounts are in EUR." in p for p in system_prompts())
        assert evaluate() == 0  # unchanged: every run reused
        (project / "RULES.md").write_text("Amounts are in USD.\n")
        assert evaluate() == 4
        assert all("## RULES.md\nAmounts are in USD." in p for p in system_prompts())


def test_diff_of_stored_days_names_and_takes_the_model_as_spelled(tmp_path):
    """`eval-pipeline diff` after two days of `openaiCompatible/vllm:qwen3` (test.models in
    nao_config.yaml) names the model so, and `--model` takes that spelling too."""
    with ScriptedServer("openai", script=by_prompt) as server:
        project = write_nao_project(tmp_path / "shop", base_url=server.base_url)
        (project / "eval_config.yaml").write_text("test:\n  extraction: last_query\n")
        env = {**cli_env(), KEY_VARIABLE: "sk-vllm-test"}
        for day in (DAY, "2026-01-02"):
            assert run_cli("test", "--date", day, "-q", cwd=project, env=env).returncode == 1
    spelled = "openaiCompatible/vllm:qwen3"
    for args in ((), ("--model", spelled)):
        compared = run_cli("diff", *args, cwd=project, env=env)
        no_traceback(compared)
        assert compared.returncode == 0, compared.stdout + compared.stderr
        assert compared.stdout.startswith(f"{spelled}: {DAY} → 2026-01-02"), compared.stdout


def test_the_viewer_shows_the_model_as_spelled_and_links_it_by_its_id(tmp_path):
    """The viewer reads only the store, which names runs by our ids: the spelling an
    evaluation gave (`openaiCompatible/vllm:qwen3` in nao_config.yaml) is kept there for it,
    once, and every page shows it while its links keep working."""
    with ScriptedServer("openai", script=by_prompt) as server:
        project = write_nao_project(tmp_path / "shop", base_url=server.base_url)
        (project / "eval_config.yaml").write_text("test:\n  extraction: last_query\n")
        env = {**cli_env(), KEY_VARIABLE: "sk-vllm-test"}
        for day in (DAY, DAY, "2026-01-02"):  # the second: nothing changed
            assert run_cli("test", "--date", day, "-q", cwd=project, env=env).returncode == 1
    layout = StateFolder.of(load_suite(project).config)
    stored = query(layout, "SELECT model, spelling FROM model_spellings_history")
    assert stored.to_dict("records") == [
        {"model": "vllm:qwen3", "spelling": "openaiCompatible/vllm:qwen3"}
    ]
    viewer, thread = start(layout)
    try:
        pages = {path: fetch(viewer, path) for path in ("/", "/runs?date=all", "/trends")}
        runs = re.findall(r'href="(/run/[0-9a-f]{16})"', pages["/runs?date=all"].text)
        pages["run"] = fetch(viewer, runs[0])
        filtered = fetch(viewer, "/runs?date=all&model=vllm:qwen3")
    finally:
        viewer.shutdown()
        viewer.server_close()
        thread.join(timeout=10)
    for name, page in pages.items():
        assert page.status == 200, name
        shown = re.sub(r"<[^>]+>", " ", page.text)  # the text a reader sees, not the links
        assert "openaiCompatible/vllm:qwen3" in shown, name
        assert not re.search(r"(?<!/)vllm:qwen3", shown), name
    assert len(re.findall(r'<tr data-status="\w+" data-model="vllm:qwen3"', filtered.text)) == 4
