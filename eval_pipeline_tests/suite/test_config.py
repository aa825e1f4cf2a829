"""`eval_config.yaml`: defaults, relative paths, env secrets that stay out of objects' text."""

from __future__ import annotations

import pytest

from eval_pipeline.suite import MissingSecret, SuiteError, load_config

CONFIG = """\
test:
  models: [openai:gpt-4.1, anthropic:claude-sonnet-4-5]
  threads: 8
  comparison: {decimals: 3}
context: [RULES.md]
warehouse: {type: duckdb, path: data/warehouse.duckdb}
llm:
  providers:
    - provider: openai
      api_key: "{{ env('EVAL_TEST_OPENAI_KEY') }}"
      models: [{id: gpt-4.1, costs: {input_no_cache: 2.0, output: 8.0}}]
    - provider: local
      base_url: http://127.0.0.1:8000/v1
agents:
  - name: my-agent
    url: http://127.0.0.1:9000/eval
    headers: {Authorization: "Bearer {{ env('EVAL_TEST_AGENT_TOKEN') }}"}
"""


def test_config_resolves_paths_against_the_suite_and_keeps_secrets_as_templates(
    make_suite, monkeypatch
):
    root = make_suite({}, config=CONFIG)
    (root / "RULES.md").write_text("# rules")
    config = load_config(root)
    assert config.test.models == ("openai:gpt-4.1", "anthropic:claude-sonnet-4-5")
    assert config.test.threads == 8 and config.test.k == 1
    assert config.test.comparison.decimals == 3 and config.test.comparison.rtol == 1e-5
    assert config.warehouse.path == root / "data" / "warehouse.duckdb"
    assert config.context == (root / "RULES.md",)
    assert config.state_path == root / ".eval"
    openai = config.provider("openai")
    assert openai.protocol == "openai" and openai.model("gpt-4.1").costs.output == 8.0
    assert openai.model("gpt-4.1").costs.input_cache_read is None
    assert config.provider("local").protocol == "openai"

    monkeypatch.setenv("EVAL_TEST_OPENAI_KEY", "sk-test-SECRET-123")
    assert openai.api_key.resolve() == "sk-test-SECRET-123"
    assert "SECRET" not in repr(config)
    monkeypatch.delenv("EVAL_TEST_AGENT_TOKEN", raising=False)
    with pytest.raises(MissingSecret, match="EVAL_TEST_AGENT_TOKEN is not set"):
        config.agent("my-agent").headers["Authorization"].resolve()


def test_config_problems_are_listed_together(make_suite):
    root = make_suite(
        {},
        config="test:\n  threads: 0\n  threshold_mode: most\nwarehouse: {type: postgres, path: x}\nextra: 1\ncontext: [MISSING.md]\n",
    )
    with pytest.raises(SuiteError) as error:
        load_config(root)
    text = str(error.value)
    for expected in (
        "eval_config.yaml:2: test.threads: expected an integer ≥ 1, got 0",
        "test.threshold_mode: expected 'average' or 'all'",
        "warehouse.type: only 'duckdb' warehouses are supported",
        "eval_config.yaml:5: extra: unknown key",
        "context file 'MISSING.md' does not exist",
    ):
        assert expected in text


def test_missing_config_means_defaults(make_suite):
    config = load_config(make_suite({}))
    assert config.test.models == ("openai:gpt-4.1",) and config.test.threads == 1


def test_max_tokens_is_read_per_provider_and_per_model_and_the_model_wins(make_suite):
    config = load_config(
        make_suite(
            {},
            config=(
                "llm:\n  providers:\n    - provider: openai\n      max_tokens: 8000\n"
                "      models: [{id: gpt-4.1, max_tokens: 16000}, {id: gpt-4.1-mini}, o3]\n"
                "    - provider: anthropic\n"
            ),
        )
    )
    openai, anthropic = config.providers
    assert openai.max_tokens_for("gpt-4.1") == 16000
    assert openai.max_tokens_for("gpt-4.1-mini") == openai.max_tokens_for("o3") == 8000
    assert anthropic.max_tokens_for("claude-sonnet-4-5") is None  # the caller's default


def test_a_max_tokens_that_is_not_a_positive_integer_names_its_field(make_suite):
    root = make_suite(
        {},
        config=(
            "llm:\n  providers:\n    - provider: openai\n      max_tokens: 0\n"
            "      models: [{id: gpt-4.1, max_tokens: lots}]\n"
        ),
    )
    with pytest.raises(SuiteError) as error:
        load_config(root)
    text = str(error.value)
    assert "eval_config.yaml:4: llm.providers[0].max_tokens: expected an integer ≥ 1, got 0" in text
    assert "llm.providers[0].models[0].max_tokens: expected an integer ≥ 1, got 'lots'" in text


def test_a_models_settings_are_read_per_protocol_and_a_foreign_one_is_named(make_suite):
    config = load_config(
        make_suite(
            {},
            config=(
                "llm:\n  providers:\n    - provider: openai\n"
                "      models: [{id: o3, settings: {reasoning_effort: high, max_tokens: 900}}]\n"
                "    - provider: anthropic\n"
                "      models: [{id: claude-sonnet-4-5, settings: {temperature: 0, top_k: 5}}]\n"
            ),
        )
    )
    openai, anthropic = config.providers
    assert openai.settings_for("o3") == {"reasoning_effort": "high"}
    assert openai.max_tokens_for("o3") == 900
    assert anthropic.settings_for("claude-sonnet-4-5") == {"temperature": 0, "top_k": 5}
    assert openai.settings_for("gpt-4.1") == {}
    root = make_suite(
        {},
        config=(
            "llm:\n  providers:\n    - provider: anthropic\n"
            "      models: [{id: claude, settings: {reasoning_effort: high, temperature: 3}}]\n"
        ),
    )
    with pytest.raises(SuiteError) as error:
        load_config(root)
    text = str(error.value)
    assert "llm.providers[0].models[0].settings.reasoning_effort: is not a setting" in text
    assert "it takes max_tokens, temperature, top_p, top_k" in text
    assert "settings.temperature: expected a number from 0 to 1, got 3" in text


def test_zero_timeouts_duplicate_agents_and_unbounded_numbers_are_config_errors(make_suite):
    root = make_suite(
        {},
        config="""\
        test:
          k: 1000000000
          comparison: {atol: .nan}
        llm:
          providers:
            - {provider: openai, api_key: x, timeout_s: 0}
        agents:
          - {name: bot, url: "http://127.0.0.1:1/a", timeout_s: -5}
          - {name: bot, url: "http://127.0.0.1:1/b"}
        """,
    )
    with pytest.raises(SuiteError) as error:
        load_config(root)
    text = str(error.value)
    for expected in (
        "eval_config.yaml:2: test.k: expected an integer from 1 to 100, got 1000000000",
        "eval_config.yaml:3: test.comparison.atol: expected a finite number ≥ 0, got nan",
        "eval_config.yaml:6: llm.providers[0].timeout_s: expected a finite number > 0, got 0",
        "eval_config.yaml:8: agents[0].timeout_s: expected a finite number > 0, got -5",
        "eval_config.yaml:9: agents[1].name: agent name 'bot' is already used by agents[0]",
    ):
        assert expected in text, text


def test_regression_significant_only_is_read_and_defaults_to_off(make_suite):
    assert not load_config(make_suite({})).test.regression_significant_only
    root = make_suite({}, config="test:\n  regression: {significant_only: true}\n")
    assert load_config(root).test.regression_significant_only
    root = make_suite({}, config="test:\n  regression: {significant_only: sometimes}\n")
    with pytest.raises(
        SuiteError, match=r"test\.regression\.significant_only: expected true or false"
    ):
        load_config(root)
    root = make_suite({}, config="test:\n  regression: {only: true}\n")
    with pytest.raises(SuiteError, match=r"test\.regression.*only"):
        load_config(root)


def test_an_attempt_budget_is_read_in_runs_or_dollars_and_a_bad_one_names_its_field(make_suite):
    assert load_config(make_suite({})).test.budget is None
    budget = load_config(make_suite({}, config="test:\n  budget: 200\n")).test.budget
    assert budget is not None and (budget.runs, budget.usd, budget.alpha) == (200, None, 0.05)
    assert budget.question_for(2) == "compare" and budget.question_for(1) == "pass_rate"
    written = "test:\n  budget: {usd: 5, question: pass_rate, width: 0.1}\n"
    budget = load_config(make_suite({}, config=written)).test.budget
    assert (budget.runs, budget.usd, budget.width, budget.question) == (None, 5.0, 0.1, "pass_rate")
    for config, said in [
        ("test:\n  budget: {alpha: 0.01}\n", r"test\.budget: needs runs or usd"),
        (
            "test:\n  budget: {runs: 0}\n",
            r"test\.budget\.runs: expected an integer from 1 to 1000000000",
        ),
        ("test:\n  budget: {runs: 9, alpha: 2}\n", r"test\.budget\.alpha: expected a fraction"),
        ("test:\n  budget: {runs: 9, question: best}\n", r"test\.budget\.question: expected"),
        ("test:\n  budget: {runs: 9, k: 3}\n", r"test\.budget\.k: unknown key"),
    ]:
        with pytest.raises(SuiteError, match=said):
            load_config(make_suite({}, config=config))


def test_openai_and_anthropic_read_their_environment_keys_with_no_llm_block(
    make_suite, monkeypatch
):
    # The one-line config: `-m openai:gpt-4.1` must not stop at "not under llm.providers".
    root = make_suite({}, config="warehouse: {type: duckdb, path: shop.duckdb}\n")
    config = load_config(root)
    openai, anthropic = config.provider("openai"), config.provider("anthropic")
    assert (openai.protocol, openai.base_url) == ("openai", None)
    assert openai.api_key.env_names == ("OPENAI_API_KEY",)
    assert anthropic.protocol == "anthropic"
    assert anthropic.api_key.env_names == ("ANTHROPIC_API_KEY",)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment-1")
    assert openai.api_key.resolve() == "sk-from-the-environment-1"


def test_a_declared_provider_of_that_name_is_kept_as_written(make_suite):
    root = make_suite({}, config=CONFIG)
    (root / "RULES.md").write_text("# rules")
    config = load_config(root)
    openai = config.provider("openai")
    assert openai.api_key.env_names == ("EVAL_TEST_OPENAI_KEY",) and openai.declared
    assert [p.name for p in config.providers] == ["openai", "local", "anthropic"]
    assert not config.provider("anthropic").declared


def test_a_folder_holding_eval_config_or_cases_is_a_suite(tmp_path):
    from eval_pipeline.suite import find_suite_root

    assert find_suite_root(tmp_path) == tmp_path / "tests_suite"
    (tmp_path / "cases").mkdir()
    assert find_suite_root(tmp_path) == tmp_path
    other = tmp_path / "other"
    other.mkdir()
    (other / "eval_config.yaml").write_text("warehouse: {type: duckdb, path: shop.duckdb}\n")
    assert find_suite_root(other) == other
