"""nao's own agent (`nao:<provider>:<model_id>`) against a stand-in nao backend on 127.0.0.1: sign-in, runs, nao's verification, error runs."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import socket
from datetime import date
from pathlib import Path

import pytest

from eval_pipeline.agents import (
    AgentRun,
    ProviderPool,
    RunRequest,
    RunStatus,
    answerer_identity,
    execute_runs,
    model_id_problem,
    require_secrets,
)
from eval_pipeline.agents._nao_verdict import (  # the unit itself: nao's data check, case by case
    nao_data_verdict,
)
from eval_pipeline.suite import (
    Case,
    Message,
    MissingSecret,
    NaoBackendConfig,
    SuiteConfig,
    Tolerance,
)
from eval_pipeline_tests.agents.nao_backend import (
    EMAIL,
    PASSWORD,
    BackendReply,
    fake_nao_backend,
    nao_reply,
)
from eval_pipeline_tests.agents.servers import FAST_RETRY

MODEL = "nao:openaiCompatible/vllm:qwen3"
ACCOUNT = {"NAO_USERNAME": EMAIL, "NAO_PASSWORD": PASSWORD}
REFERENCE = "SELECT SUM(amount) AS total_revenue FROM orders"


def case(name: str = "total_revenue", *, sql: str | None = REFERENCE) -> Case:
    return Case(
        name=name,
        path=Path(f"tests/{name}.yml"),
        relative_path=f"{name}.yml",
        messages=(Message("user", "What is the total revenue from all orders?"),),
        sql=sql,
        database="shop",
    )


def config(url: str, *, timeout_s: float = 30.0) -> SuiteConfig:
    return SuiteConfig(root=Path.cwd(), nao_backend=NaoBackendConfig(url=url, timeout_s=timeout_s))


def evaluate(
    url: str,
    cases: list[Case],
    *,
    environ: dict[str, str] | None = None,
    timeout_s: float = 30.0,
    model: str = MODEL,
) -> list[AgentRun]:
    """Every case once through the nao agent, as the pipeline runs them (one at a time)."""

    async def go() -> list[AgentRun]:
        suite = config(url, timeout_s=timeout_s)
        pool = ProviderPool(
            suite, policy=FAST_RETRY, environ=ACCOUNT if environ is None else environ
        )
        async with pool:
            agent = pool.nao_agent(model)
            requests = [RunRequest(c, model, 0, date(2026, 1, 1), "ctx") for c in cases]
            return await execute_runs(requests, lambda _m: agent, concurrency=1)

    return asyncio.run(go())


def test_a_run_holds_naos_reply_its_queries_and_naos_own_verification():
    with fake_nao_backend() as backend:
        (run,) = evaluate(backend.url, [case()])
    assert run.status is RunStatus.COMPLETED, run.error
    # What was sent is what `nao test` sends, signed in with the account.
    assert backend.sign_ins == [{"email": EMAIL, "password": PASSWORD}]
    (sent,) = backend.runs
    assert sent.body == {
        "model": {"provider": "openaiCompatible/vllm", "modelId": "qwen3"},
        "prompt": "What is the total revenue from all orders?",
        "sql": REFERENCE,
        "databaseId": "shop",
    }
    assert sent.cookie and sent.cookie.startswith("better-auth.session_token=")
    # The reply, the tool call and its rows as a query the data check grades.
    assert run.final_text == "Total revenue is 132.75."
    (call,) = run.tool_calls
    assert (call.name, call.arguments["sql_query"]) == ("execute_sql", REFERENCE)
    assert call.result["row_count"] == 1 and call.error is None
    (query,) = run.queries
    assert (query.sql, query.columns, query.rows) == (REFERENCE, ["total_revenue"], [[132.75]])
    assert (run.usage.input_tokens, run.usage.output_tokens, run.usage.total_tokens) == (
        1200,
        80,
        1280,
    )
    assert run.usage.cached_input_tokens == 200
    assert run.cost_usd == pytest.approx(0.00264)
    nao = run.answerer_details["nao"]
    assert nao["verification"]["sql"] == "SELECT total_revenue FROM query_1"
    assert nao["verification"]["data"] == [{"total_revenue": 132.75}]
    assert nao["verdict"] == {"passed": True, "message": "match"}
    assert nao["duration_ms"] == 2710 and nao["finish_reason"] == "stop"
    # The credentials are in no part of the run that is stored.
    stored = json.dumps(run.to_dict(), default=str)
    assert PASSWORD not in stored and EMAIL not in stored


def test_naos_verdict_is_kept_beside_the_rows_the_agent_queried_when_they_disagree():
    """nao's verification picked a wrong row; the agent's own query was right."""
    reply = nao_reply(
        "Revenue is 132.75.",
        rows=[{"total_revenue": 132.75}],
        verification_rows=[{"total_revenue": 99.0}],
    )
    with fake_nao_backend(lambda _b, _i: reply) as backend:
        (run,) = evaluate(backend.url, [case()])
    assert run.queries[0].rows == [[132.75]]
    assert run.answerer_details["nao"]["verdict"] == {"passed": False, "message": "values differ"}


def test_a_test_without_reference_sql_sends_none_and_has_no_nao_verdict():
    reply = nao_reply("Done.")
    reply.body["verification"] = None
    with fake_nao_backend(lambda _b, _i: reply) as backend:
        (run,) = evaluate(backend.url, [case(sql=None)])
    assert "sql" not in backend.runs[0].body
    assert run.status is RunStatus.COMPLETED
    assert run.answerer_details["nao"]["verdict"] is None


def test_an_expired_session_signs_in_again_once_and_the_run_completes():
    with fake_nao_backend() as backend:
        first, second = cases = [case("a"), case("b")]

        def script(_body: dict, index: int) -> BackendReply:
            if index == 0:
                backend.expire_sessions()  # the backend restarts after the first run
            return nao_reply("Total revenue is 132.75.")

        backend.script = script
        runs = evaluate(backend.url, cases)
    assert [r.status for r in runs] == [RunStatus.COMPLETED, RunStatus.COMPLETED]
    assert len(backend.sign_ins) == 2  # once at the start, once after the 401
    assert len(backend.runs) == 3  # a, b refused, b again
    assert first.name != second.name


def test_a_401_after_signing_in_again_is_an_error_run_and_the_others_go_on():
    with fake_nao_backend() as backend:
        backend.refuse_runs = True
        runs = evaluate(backend.url, [case("a"), case("b")])
    assert [r.status for r in runs] == [RunStatus.ERROR, RunStatus.ERROR]
    error = runs[0].error
    assert "\n" not in error
    assert f"{backend.url}/api/test/run" in error and "HTTP 401" in error
    assert "NAO_USERNAME" in error and "NAO_PASSWORD" in error
    assert len(backend.runs) == 4  # each run: sent, refused, signed in again, refused


def test_a_wrong_password_signs_in_once_and_every_run_is_an_error_naming_the_backend():
    with fake_nao_backend() as backend:
        environ = {"NAO_USERNAME": EMAIL, "NAO_PASSWORD": "not-the-right-one"}
        runs = evaluate(backend.url, [case("a"), case("b")], environ=environ)
    assert [r.status for r in runs] == [RunStatus.ERROR, RunStatus.ERROR]
    assert len(backend.sign_ins) == 1 and backend.runs == []
    for run in runs:
        assert f"{backend.url}/api/auth/sign-in/email" in run.error
        assert "Invalid email or password" in run.error
        assert "not-the-right-one" not in run.error


def test_no_account_in_the_environment_is_an_error_run_saying_how_to_give_one():
    with fake_nao_backend() as backend:
        (run,) = evaluate(backend.url, [case()], environ={})
    assert run.status is RunStatus.ERROR
    assert "-u and --password" in run.error and backend.sign_ins == []


def test_a_5xx_is_an_error_run_with_naos_message_sent_once():
    with fake_nao_backend(
        lambda _b, _i: BackendReply({"error": "No output generated."}, status=500)
    ) as backend:
        (run,) = evaluate(backend.url, [case()])
    assert run.status is RunStatus.ERROR
    assert "HTTP 500" in run.error and "No output generated." in run.error
    assert f"{backend.url}/api/test/run" in run.error and "log" in run.error
    assert len(backend.runs) == 1  # a failed agent run is not paid for again


def test_a_body_that_is_not_naos_is_an_error_run_naming_what_is_wrong():
    replies = [BackendReply(b"<html>gateway</html>"), BackendReply({"toolCalls": []})]
    with fake_nao_backend(lambda _b, i: replies[i]) as backend:
        not_json, no_text = evaluate(backend.url, [case("a"), case("b")])
    assert "not JSON" in not_json.error and "nao's chat server" in not_json.error
    assert "missing field `text`" in no_text.error
    assert not_json.final_text == "" and no_text.tool_calls == []


def test_a_backend_slower_than_its_timeout_is_an_error_run_saying_which_setting():
    reply = dataclasses.replace(nao_reply("late"), delay_s=2.0)
    with fake_nao_backend(lambda _b, _i: reply) as backend:
        (run,) = evaluate(backend.url, [case()], timeout_s=0.3)
    assert run.status is RunStatus.ERROR
    assert "nao_backend.timeout_s" in run.error and backend.url in run.error


def test_a_backend_that_is_down_is_an_error_run_saying_to_start_it():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"  # bound, never listening
        runs = evaluate(url, [case("a"), case("b")])
    assert [r.status for r in runs] == [RunStatus.ERROR, RunStatus.ERROR]
    assert "could not connect" in runs[0].error and "nao chat" in runs[0].error
    assert url in runs[1].error


def test_nao_ids_are_checked_for_shape_and_name_no_llm():
    suite = SuiteConfig(root=Path.cwd())
    assert model_id_problem(suite, "nao:openai:gpt-4.1") is None
    assert "nao:<provider>:<model_id>" in str(model_id_problem(suite, "nao:gpt-4.1"))
    judge = model_id_problem(suite, "nao:openai:gpt-4.1", chat_model=True)
    assert judge is not None and "not an LLM" in str(judge)


def test_a_nao_model_without_an_account_is_refused_before_anything_runs(monkeypatch):
    monkeypatch.delenv("NAO_USERNAME", raising=False)
    monkeypatch.delenv("NAO_PASSWORD", raising=False)
    with pytest.raises(MissingSecret) as raised:
        require_secrets(SuiteConfig(root=Path.cwd()), [MODEL], source="--model")
    assert "NAO_USERNAME" in str(raised.value) and "-u USER --password PASS" in str(raised.value)


def test_another_backend_is_another_answerer():
    here = answerer_identity(config("http://127.0.0.1:5005"), MODEL)
    assert here == answerer_identity(config("http://127.0.0.1:5005/"), MODEL)
    assert here != answerer_identity(config("http://127.0.0.1:6006"), MODEL)


def _codes(*values):
    return [{"revenue": value} for value in values]


@pytest.mark.parametrize(
    ("data", "expected", "message"),
    [
        ([{"revenue": "$1,234.50"}], [{"revenue": 1234.5}], "match"),
        ([{"revenue": 1234.501}], [{"revenue": 1234.5}], "match"),
        ([{"revenue": 1.0}, {"revenue": 2.0}], [{"revenue": 1.0}], "row count: 2 vs 1"),
        ([{"other": 1.0}], [{"revenue": 1.0}], "missing columns: {'revenue'}"),
        (None, [{"revenue": 1.0}], "no data returned"),
        # Number-like text beside text in one column, in another order: still comparable.
        (_codes("500", "A7", "100"), _codes("100", "500", "A7"), "match"),
        (_codes("500", "A7", "100"), _codes("100", "500", "A8"), "values differ"),
        (_codes(None, {"a": 1}, "7"), _codes(7, None, {"a": 1}), "match"),
    ],
)
def test_naos_verdict_reads_as_nao_test_words_it(data, expected, message):
    verdict = nao_data_verdict(data, expected, ["revenue"], tolerance=Tolerance())
    assert verdict.message == message
    assert verdict.passed is message.startswith("match")
