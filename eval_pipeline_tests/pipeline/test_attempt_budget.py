"""An attempt budget through the real pipeline (its stages in this process as `eval-pipeline
test` runs them, scripted agents on 127.0.0.1 with known pass probabilities): it stops once the
question is decided, spends its extra attempts where the models disagree, never spends more
than it was given, stores what it did, and a rerun of the day runs nothing. Only the Dagster
catalog's test (slow) writes the evaluations' record into the suite's instance, as the
command's recorder does."""

from __future__ import annotations

from datetime import date

import dagster as dg
import pytest

from eval_pipeline.cli import main
from eval_pipeline.defs.instance import open_instance
from eval_pipeline.defs.partitions import model_day_key
from eval_pipeline.defs.record import record_pending
from eval_pipeline.pipeline import (
    BudgetSpent,
    EvaluationRequest,
    evaluate,
    instance_home,
    run_stages,
    stored_budget,
)
from eval_pipeline.store import StateFolder
from eval_pipeline.suite import AttemptBudget, load_suite
from eval_pipeline.viewer import render_html_export
from eval_pipeline_tests.pipeline.coin_agents import COST_USD, CoinAgents

DAY = date(2026, 11, 30)
TESTS = [f"t{i:02d}" for i in range(10)]
#: The models differ on the first three tests only: `strong` passes them, `weak` seldom.
DECIDING = TESTS[:3]
STRONG = {test: 0.97 for test in TESTS}
WEAK = {test: (0.1 if test in DECIDING else 0.97) for test in TESTS}


def in_process(suite, request, on_stage):
    """The stages as the command runs them; their Dagster record left pending in the
    suite's instance home, as the command leaves it to its recorder."""
    return run_stages(suite, request, instance_home(suite.config), on_stage=on_stage)


@pytest.fixture(scope="module")
def agents():
    with CoinAgents({"strong": STRONG, "weak": WEAK}, seed=3) as server:
        yield server


def own_instance(suite, monkeypatch: pytest.MonkeyPatch):
    """The suite's own Dagster home, as a command in its folder has, whatever DAGSTER_HOME
    the test run was started with (the stages leave their record there)."""
    home = StateFolder(suite.config.state_path).dagster_home
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


@pytest.fixture(scope="module")
def compared(agents, tmp_path_factory):
    """Two evaluations of the day under the same budget: the first and its rerun."""
    suite = load_suite(agents.write_suite(tmp_path_factory.mktemp("budget") / "suite"))
    request = EvaluationRequest(
        models=("http:strong", "http:weak"), run_date=DAY, budget=AttemptBudget(runs=120)
    )
    with pytest.MonkeyPatch.context() as monkeypatch:
        own_instance(suite, monkeypatch)
        first = evaluate(suite, request, runner=in_process)
        asked = len(agents.requests)
        again = evaluate(suite, request, runner=in_process)
    return suite, first, asked, again


def test_the_budget_stops_once_the_better_model_is_decided(compared):
    _suite, first, asked, _again = compared
    budget = first.document.budget
    assert budget is not None and budget.decision.decided
    assert budget.sentences() == ["http:strong is better than http:weak (anytime-valid, α = 0.05)"]
    # Decided well before the budget: every run it paid for is one the agents answered.
    assert 2 * len(TESTS) < budget.spent_runs < 120
    assert asked == budget.spent_runs == first.ran.executed
    assert len(first.document.results) == budget.spent_runs


def test_the_extra_attempts_go_where_the_models_disagree(compared):
    _suite, first, _asked, _again = compared
    attempts = {(m, t): n for m, t, n, _why in first.document.budget.attempts}
    deciding = [attempts["http:weak", t] for t in DECIDING]
    stable = [attempts["http:weak", t] for t in TESTS if t not in DECIDING]
    assert min(deciding) > 1
    assert sum(deciding) / len(deciding) > sum(stable) / len(stable)
    reasons = [why for m, t, n, why in first.document.budget.attempts if n > 1]
    assert reasons and all(reasons), "an extra attempt without its reason"


def test_a_rerun_of_the_day_under_the_same_budget_runs_nothing(compared, agents):
    _suite, first, asked, again = compared
    assert len(agents.requests) == asked
    assert again.ran.executed == 0 and again.ran.reused == first.document.budget.spent_runs
    assert again.document.budget.to_json() == first.document.budget.to_json()


def test_the_command_reports_what_the_budget_spent_and_decided(compared, capsys, monkeypatch):
    suite, first, _asked, _again = compared
    budget = first.document.budget
    own_instance(suite, monkeypatch)
    # The same budget again through the command: answered from the store, reported in full.
    models = ["-m", "http:strong", "-m", "http:weak"]
    code = main(
        ["test", "--suite", str(suite.root), *models, "--budget", "120", "--date", DAY.isoformat()]
    )
    out = capsys.readouterr().out
    assert code == 1, out  # weak fails tests
    assert "http:strong is better than http:weak (anytime-valid, α = 0.05)" in out
    assert "Attempt budget: tests given more attempts" in out
    assert f"Attempt budget: {budget.spent_runs} of 120 runs in {budget.rounds} round(s)" in out
    given = [(test, why) for _model, test, attempts, why in budget.attempts if attempts > 1]
    assert given and all(why in out for _test, why in given)


def test_the_results_file_and_the_store_say_what_the_budget_did(compared):
    suite, first, _asked, _again = compared
    written = first.labelled.to_json()["budget"]
    assert written["runs"] == 120 and written["question"] == "compare"
    assert written["spent_runs"] == sum(written["spent_by_model"].values())
    assert written["decision"] == first.document.budget.sentences()
    assert written["comparisons"][0]["better"] == "http:strong"
    stored = stored_budget(StateFolder.of(suite.config), DAY)
    assert stored is not None and stored.to_json() == first.document.budget.to_json()


def test_a_budget_smaller_than_one_round_stops_before_anything_runs(agents, tmp_path, monkeypatch):
    suite = load_suite(agents.write_suite(tmp_path / "suite"))
    own_instance(suite, monkeypatch)
    request = EvaluationRequest(
        models=("http:strong", "http:weak"), run_date=DAY, budget=AttemptBudget(runs=5)
    )
    asked = len(agents.requests)
    with pytest.raises(BudgetSpent, match="each selected test once per model"):
        evaluate(suite, request, runner=in_process)
    assert len(agents.requests) == asked


def test_a_dollar_budget_stops_at_its_dollars_and_needs_every_models_prices(tmp_path, monkeypatch):
    chances = {"strong": STRONG, "weak": WEAK, "unpriced": STRONG}
    with CoinAgents(chances, seed=3, unpriced=frozenset({"unpriced"})) as agents:
        suite = load_suite(agents.write_suite(tmp_path / "suite"))
        own_instance(suite, monkeypatch)
        # $0.03 at $0.001 a run: the first round's 20 runs, then at most 10 more.
        request = EvaluationRequest(
            models=("http:strong", "http:weak"), run_date=DAY, budget=AttemptBudget(usd=0.03)
        )
        budget = evaluate(suite, request, runner=in_process).document.budget
        assert 2 * len(TESTS) < budget.spent_runs <= 30 == 0.03 / COST_USD
        assert budget.spent_usd == pytest.approx(budget.spent_runs * COST_USD)
        assert len(agents.requests) == budget.spent_runs

        unpriced = EvaluationRequest(
            models=("http:unpriced",), run_date=DAY, budget=AttemptBudget(usd=0.03)
        )
        with pytest.raises(BudgetSpent, match="cannot be budgeted in dollars; use --budget RUNS"):
            evaluate(suite, unpriced, runner=in_process)
        # Its first round ran and is kept: a --budget in runs reuses it.
        asked = len(agents.requests)
        runs = EvaluationRequest(
            models=("http:unpriced",), run_date=DAY, budget=AttemptBudget(runs=10)
        )
        assert evaluate(suite, runs, runner=in_process).ran.executed == 0
        assert len(agents.requests) == asked


def test_a_pass_rate_budget_spends_no_more_than_it_was_given(tmp_path, monkeypatch):
    flaky = {test: (0.5 if test in DECIDING else 1.0) for test in TESTS}
    with CoinAgents({"flaky": flaky}, seed=5) as agents:
        suite = load_suite(agents.write_suite(tmp_path / "suite"))
        own_instance(suite, monkeypatch)
        request = EvaluationRequest(
            models=("http:flaky",), run_date=DAY, budget=AttemptBudget(runs=20, width=0.05)
        )
        evaluation = evaluate(suite, request, runner=in_process)
        budget = evaluation.document.budget
        # A width of 0.05 is out of reach in 20 runs: the budget is spent, never exceeded.
        assert budget.question.kind == "pass_rate" and not budget.decision.decided
        assert budget.spent_runs == len(agents.requests) == 20
        (rate,) = budget.decision.pass_rates
        assert rate.low <= sum(flaky.values()) / len(flaky) <= rate.high
        assert "not yet within the width 0.05 after 20 runs" in budget.sentences()[0]

        # An evaluation of the day without a budget: the day's budget no longer describes it.
        evaluate(suite, EvaluationRequest(models=("http:flaky",), run_date=DAY), runner=in_process)
        assert stored_budget(StateFolder.of(suite.config), DAY) is None


def test_the_viewer_shows_where_the_budget_went_and_what_it_decided(compared):
    suite, first, _asked, _again = compared
    page = render_html_export(StateFolder.of(suite.config), DAY)
    section = page[page.index('id="budget-section"') :]
    section = section[: section.index("</section>")]
    assert "http:strong is better than http:weak (anytime-valid, α = 0.05)" in section
    assert f"{first.document.budget.spent_runs} runs spent of 120" in section
    extra = [(m, t) for m, t, n, _why in first.document.budget.attempts if n > 1]
    assert section.count("<tr") - 1 == len(extra)  # a header row, then one per test given more


@pytest.mark.slow  # records in a Dagster instance
def test_the_dagster_catalog_shows_each_models_attempts_and_the_days_decision(
    compared, monkeypatch
):
    suite, first, _asked, _again = compared
    budget = first.document.budget
    home = own_instance(suite, monkeypatch)
    record_pending(home)  # what the command's recorder does once its stages are done
    with open_instance(home) as instance:

        def latest(asset: str, partition: str) -> dict:
            records = instance.fetch_materializations(  # newest first
                dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition]),
                limit=1,
            ).records
            assert records, f"no materialization of {asset} {partition}"
            return records[0].asset_materialization.metadata

        weak = latest("model_summaries", str(model_day_key("http:weak", DAY.isoformat())))
        report = latest("report", DAY.isoformat())
    spent_by_weak = budget.spent_by_model()["http:weak"]
    assert weak["budget_spent_runs"].value == spent_by_weak
    table = weak["budget_attempts"].value
    rows = table.splitlines()[2:]  # after the header and its rule
    assert len(rows) == len(TESTS) and all(row.startswith("| http:weak |") for row in rows)
    assert "http:strong is better than http:weak" in report["budget_decision"].value
    assert report["budget_spent_runs"].value == budget.spent_runs
