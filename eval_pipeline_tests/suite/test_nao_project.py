"""A nao project (`nao_config.yaml` + `tests/`) loads as a suite, as it is, writing nothing."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator

import pytest

from eval_pipeline.suite import (
    ENGINES,
    Engine,
    MissingSecret,
    SuiteError,
    find_suite_root,
    load_agent_context,
    load_config,
    load_suite,
    register_engine,
    to_model_id,
    unregister_engine,
)
from eval_pipeline_tests.suite.nao_project import (
    KEY_VARIABLE,
    TESTS,
    nao_config,
    snapshot,
    write_nao_project,
)


@pytest.fixture
def project(tmp_path):
    return write_nao_project(tmp_path / "shop", base_url="http://127.0.0.1:8000/v1")


def test_a_nao_project_is_a_suite_read_as_it_is(project, monkeypatch):
    before = snapshot(project)
    monkeypatch.chdir(project)
    assert find_suite_root() == project  # `eval-pipeline test` run in the project's folder

    suite = load_suite()

    assert sorted(c.name for c in suite.cases) == sorted(TESTS)
    assert suite.cases_dir == project / "tests"
    assert suite.case("total_revenue").folder == "sales"  # subfolders select as in nao
    config = suite.config
    assert config.warehouse.path == project / "data" / "shop.duckdb"
    assert config.test.models == ("vllm:qwen3",)
    assert config.model_label("vllm:qwen3") == "openaiCompatible/vllm:qwen3"
    assert (config.test.threads, config.test.k, config.test.comparison.decimals) == (2, 1, 2)
    vllm = config.provider("vllm")
    assert vllm.protocol == "openai" and vllm.base_url == "http://127.0.0.1:8000/v1"
    assert vllm.model("qwen3") is not None
    assert config.state_path == project / ".eval"
    assert config.results_dir == project / "tests" / "outputs"
    # The key stays a template until a request needs it, read from the environment then.
    assert "SECRET" not in repr(config)
    monkeypatch.setenv(KEY_VARIABLE, "sk-vllm-SECRET")
    assert vllm.api_key.resolve() == "sk-vllm-SECRET"
    monkeypatch.delenv(KEY_VARIABLE)
    with pytest.raises(MissingSecret, match=f"{KEY_VARIABLE} is not set"):
        vllm.api_key.resolve()
    assert snapshot(project) == before  # nothing written into the user's files


def test_our_layout_is_unchanged_and_suite_root_finds_it_first(tmp_path):
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "t.yml").write_text("prompt: hi\n")
    (tmp_path / "nao_config.yaml").write_text("project_name: x\n")  # a nao file beside ours
    suite = load_suite(tmp_path)
    assert suite.cases_dir == tmp_path / "cases" and [c.name for c in suite.cases] == ["t"]
    assert suite.config.results_dir == tmp_path / "outputs"


@pytest.mark.parametrize(
    ("spelling", "model_id"),
    [
        ("openaiCompatible/vllm:qwen3", "vllm:qwen3"),
        ("openaiCompatible/litellm:openai/gpt-4o:latest", "litellm:openai/gpt-4o:latest"),
        ("openai:gpt-4.1", "openai:gpt-4.1"),
        ("anthropic:claude-sonnet-4-5", "anthropic:claude-sonnet-4-5"),
        ("replay:demo", "replay:demo"),
    ],
)
def test_model_ids_map_from_nao_spelling_to_ours(spelling, model_id):
    assert to_model_id(spelling) == model_id


def test_built_in_providers_without_a_declaration_read_nao_s_key_variables(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "nao_config.yaml").write_text(
        "project_name: x\ntest:\n  models: [openai:gpt-4.1, anthropic:claude-sonnet-4-5]\n"
    )
    config = load_config(tmp_path)
    assert config.test.models == ("openai:gpt-4.1", "anthropic:claude-sonnet-4-5")
    assert config.provider("openai").api_key.env_names == ("OPENAI_API_KEY",)
    assert config.provider("anthropic").protocol == "anthropic"
    assert config.provider("anthropic").api_key.env_names == ("ANTHROPIC_API_KEY",)


def test_our_eval_config_keys_may_sit_beside_nao_s(project):
    (project / "eval_config.yaml").write_text(
        "test:\n  extraction: last_query\n  threads: 5\ncontext: [RULES.md]\n"
    )
    (project / "RULES.md").write_text("# rules\n")
    config = load_config(project)
    assert config.test.extraction == "last_query" and config.test.threads == 5  # ours win
    assert config.test.models == ("vllm:qwen3",) and config.test.comparison.decimals == 2
    assert config.context == (project / "RULES.md",)
    assert config.provider("vllm") is not None and config.results_dir.name == "outputs"


def test_rules_md_and_the_synced_docs_are_the_agents_context_and_an_edit_changes_its_hash(
    project,
):
    without = load_agent_context(load_config(project))
    assert without.files == () and without.synced_docs == ()
    (project / "RULES.md").write_text("Amounts are in EUR.\n")
    docs = project / "databases" / "type=duckdb" / "database=shop" / "schema=main" / "table=orders"
    docs.mkdir(parents=True)
    (docs / "columns.md").write_text("- amount\n")

    context = load_agent_context(load_config(project))
    assert [f.label for f in context.files] == ["RULES.md"]
    assert [f.label for f in context.docs_of("orders", "main")] == [
        "databases/type=duckdb/database=shop/schema=main/table=orders/columns.md"
    ]
    assert context.docs_of("orders", "staging") == [] and context.docs_of("order", "main") == []
    assert context.hash != without.hash
    (project / "RULES.md").write_text("Amounts are in USD.\n")
    edited = load_agent_context(load_config(project))
    assert edited.hash != context.hash
    (docs / "columns.md").write_text("- amount, in USD\n")
    assert load_agent_context(load_config(project)).hash != edited.hash


def test_a_rules_md_that_is_not_utf8_names_the_file(project):
    (project / "RULES.md").write_bytes(b"caf\xe9\n")
    with pytest.raises(SuiteError) as error:
        load_config(project)
    (problem,) = error.value.problems
    assert str(problem).startswith("RULES.md") and "UTF-8" in str(problem)


def _problems(project, text: str) -> list[str]:
    (project / "nao_config.yaml").write_text(textwrap.dedent(text))
    with pytest.raises(SuiteError) as error:
        load_suite(project)
    return [str(p) for p in error.value.problems]


def test_problems_name_nao_config_and_the_line(project):
    problems = _problems(
        project,
        """\
        project_name: shop
        databases:
          - name: lake
            type: databricks
            server_hostname: dbc.example.com
        llm:
          providers:
            - provider: openaiCompatible/vllm
              models: [{id: qwen3}]
        test:
          models: [gpt-4.1, openaiCompatible/vllm:qwen3, mistral:large]
          threads: 0
        """,
    )
    assert problems == [
        "nao_config.yaml:4: databases[0].type: 'databricks' databases are not supported yet; "
        "use duckdb, postgres, mysql, snowflake, clickhouse or bigquery",
        "nao_config.yaml:8: llm.providers[0].base_url: openaiCompatible/vllm needs the "
        "base_url of its OpenAI-compatible server",
        "nao_config.yaml:11: test.models: invalid model 'gpt-4.1', expected "
        "`provider:model_id` (e.g. openai:gpt-4.1 or openaiCompatible/vllm:qwen3)",
        "nao_config.yaml:12: test.threads: expected an integer ≥ 1, got 0",
        "nao_config.yaml:11: test.models: 'mistral:large': no provider 'mistral' under "
        "llm.providers; declare it there",
    ]


def test_broken_yaml_in_nao_config_is_one_line_with_its_line_number(project):
    problems = _problems(project, "project_name: shop\ntest:\n  models: [openai:gpt-4.1\n")
    assert len(problems) == 1 and problems[0].startswith("nao_config.yaml:")
    assert "line" not in problems[0].split(":", 2)[1]  # the number is in the location


def test_a_nao_project_without_tests_folder_says_tests(tmp_path):
    (tmp_path / "nao_config.yaml").write_text(nao_config("http://127.0.0.1:9/v1"))
    with pytest.raises(SuiteError, match="no tests/ folder"):
        load_suite(tmp_path)


SERVERS = """\
project_name: shop
databases:
  - name: shop
    type: duckdb
    path: data/shop.duckdb
  - name: finance
    type: postgres
    host: db.internal
    database: analytics
    user: reader
    password: {{ env('FINANCE_PG_PASSWORD') }}
    schema_name: marts
  - name: crm
    type: mysql
    host: crm.internal
    port: ${{ env('CRM_PORT') }}
    database: crm
    user: "{{ env('CRM_USER') }}"
    password: "p@ss/word:1"
llm:
  providers:
    - provider: openaiCompatible/vllm
      base_url: http://127.0.0.1:8000/v1
      models: [{id: qwen3}]
test:
  models: [openaiCompatible/vllm:qwen3]
"""


def test_nao_postgres_and_mysql_databases_become_ours_with_their_secrets_kept_templates(
    project, monkeypatch
):
    (project / "nao_config.yaml").write_text(SERVERS)
    (project / "tests" / "finance_total.yml").write_text(
        "name: finance_total\nprompt: Total?\nsql: SELECT 1\ndatabase: finance\n"
    )
    suite = load_suite(project)
    config = suite.config
    shop, finance, crm = config.databases
    assert (shop.name, shop.type, shop.path) == ("shop", "duckdb", project / "data/shop.duckdb")
    assert config.database() is shop and config.warehouse.path == shop.path
    assert (finance.name, finance.type, finance.schema) == ("finance", "postgres", "marts")
    assert config.database(suite.case("finance_total").database) is finance
    # nao's fields make the URL; an env password is read only when connecting, and
    # percent-encoded then, so '@' or '/' in it cannot move the host.
    monkeypatch.setenv("FINANCE_PG_PASSWORD", "s3cr@t/pw")
    assert "s3cr" not in repr(config)
    assert finance.resolve_url() == "postgresql://reader:s3cr%40t%2Fpw@db.internal:5432/analytics"
    monkeypatch.setenv("CRM_USER", "crm_reader")
    monkeypatch.setenv("CRM_PORT", "3307")
    assert (crm.type, crm.schema) == ("mysql", None)
    assert crm.resolve_url() == "mysql://crm_reader:p%40ss%2Fword%3A1@crm.internal:3307/crm"
    monkeypatch.delenv("FINANCE_PG_PASSWORD")
    with pytest.raises(MissingSecret, match="FINANCE_PG_PASSWORD is not set"):
        finance.resolve_url()


def test_a_nao_server_database_missing_a_field_names_it_with_its_line(project):
    problems = _problems(
        project,
        """\
        databases:
          - name: finance
            type: postgres
            host: db
            user: reader
            port: many
        test:
          models: [openai:gpt-4.1]
        """,
    )
    assert problems == [
        "nao_config.yaml:2: databases[0].database: is required (a non-empty string)",
        "nao_config.yaml:6: databases[0].port: expected a port number, got 'many'",
    ]


@pytest.fixture
def warehouse_engine() -> Iterator[Engine]:
    """A server engine that reads nao's fields its own way (`Engine.nao_url`), as an
    account-based warehouse does: account and warehouse, no host."""

    def nao_url(fields: dict[str, str]) -> str:
        login = fields["user"] + (f":{fields['password']}" if "password" in fields else "")
        return f"acme://{login}@{fields['account']}/{fields['database']}?wh={fields.get('warehouse', '')}"

    engine = Engine(
        name="acme",
        label="Acme",
        dialect="snowflake",
        connect=lambda database: None,
        catalogue_sql="SELECT 1",
        url_schemes=("acme",),
        nao_type="acme",
        nao_url=nao_url,
    )
    register_engine(engine)
    yield engine
    unregister_engine(engine.name)


def test_an_engine_reads_its_own_nao_fields_into_its_url(project, monkeypatch, warehouse_engine):
    (project / "nao_config.yaml").write_text(
        textwrap.dedent(
            """\
            databases:
              - name: sf
                type: acme
                account: xy-123
                user: reader
                password: "{{ env('ACME_PASSWORD') }}"
                database: analytics
                warehouse: small wh
                schema_name: marts
            test:
              models: [openai:gpt-4.1]
            """
        )
    )
    (sf,) = load_config(project).databases
    assert (sf.type, sf.schema) == ("acme", "marts")
    monkeypatch.setenv("ACME_PASSWORD", "p@ss")
    assert sf.resolve_url() == "acme://reader:p%40ss@xy-123/analytics?wh=small%20wh"
    problems = _problems(
        project,
        """\
        databases:
          - name: sf
            type: acme
            account: xy-123
        test:
          models: [openai:gpt-4.1]
        """,
    )
    assert problems == ["nao_config.yaml:3: databases[0].user: required for Acme databases"]


#: The engines nao connects to that no engine of ours reads (nao's cli/nao_core/config/databases/).
NAO_ONLY_ENGINES = [
    "athena",
    "databricks",
    "ducklake",
    "motherduck",
    "mssql",
    "powerbi_xmla",
    "redshift",
    "starrocks",
    "trino",
]


@pytest.mark.parametrize("kind", NAO_ONLY_ENGINES)
def test_a_nao_database_of_an_engine_we_lack_is_one_line_naming_it_and_ours(project, kind):
    problems = _problems(
        project,
        f"""\
        databases:
          - name: lake
            type: {kind}
            host: h
        test:
          models: [openai:gpt-4.1]
        """,
    )
    ours = [e.nao_type for e in ENGINES.all() if e.nao_type is not None]
    assert len(problems) == 1
    assert problems[0].startswith(
        f"nao_config.yaml:3: databases[0].type: {kind!r} databases are not supported yet; use "
    )
    assert all(name in problems[0] for name in ours)
