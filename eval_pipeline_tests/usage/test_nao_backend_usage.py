"""`eval-pipeline usage import --source nao` of a database a real nao backend (nao-core 0.3.29) filled through its own HTTP API: an account signed up, chats sent to `POST /api/agent` (nao's agent calling its `execute_sql` tool on DuckDB, once with a failing query), an answer regenerated as nao's web UI does it, votes given through tRPC `feedback.submit` — then imported and recommended on as a user would."""

from __future__ import annotations

import http.cookiejar
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from eval_pipeline.store import StateFolder
from eval_pipeline.usage import stored_conversations, stored_signals
from eval_pipeline_tests.agents.real_nao_backend import NaoUnavailable, nao_backend, nao_python
from eval_pipeline_tests.agents.servers import (
    RecordedRequest,
    ScriptedServer,
    Step,
    answer,
    execute_sql,
    exhausted,
    tool_calls,
)
from eval_pipeline_tests.cli.console import run_cli
from eval_pipeline_tests.cli.test_cli_nao_backend import KEY_VARIABLE
from eval_pipeline_tests.cli.test_cli_nao_backend import write_project as write_nao_project
from eval_pipeline_tests.usage.production import write_project

pytestmark = pytest.mark.slow  # nao-core's environment (built once) and its backend

#: The account: what nao keeps of a person, which must never reach our store.
EMAIL, NAME, PASSWORD = "ada.quux@acme-analytics.com", "Ada Quux-Lovelace", "correct-horse-battery"
#: The model the chats ask for, as nao's model picker names it (`nao_config.yaml`'s provider).
MODEL = {"provider": "openaiCompatible/vllm", "modelId": "qwen3"}
REFUNDS = f"What is the total refund amount of all orders? Mail the figure to {EMAIL}"
ORDERS = "How many orders were placed?"
FAILING_SQL = "SELECT SUM(refund_amount) AS refunds FROM orders"
DOWN_VOTE = "Wrong: that is the order amount, not the refunds"
#: A word of the question → the SQL nao's agent runs, in turn, then its answer.
PLANS = {
    "refund": ((FAILING_SQL, "SELECT SUM(amount) AS refunds FROM orders"), "Refunds total 132.75."),
    "orders were placed": (("SELECT COUNT(*) AS orders FROM orders",), "3 orders were placed."),
}
ORDERS_COLUMNS = "databases/type=duckdb/database=shop/schema=main/table=orders/columns.md"


# ---- the LLM: nao's agent loop, streamed as an OpenAI-compatible server streams ------------


def streamed(step: Step, model: str = "qwen3") -> Step:
    """`step` (a text answer or tool calls) as Chat Completions streaming chunks (SSE), the
    way nao's agent asks for them (`stream: true`, usage in the last chunk)."""
    head = {
        "id": f"chatcmpl-{time.monotonic_ns()}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    if step.text:
        chunks.append(chunk({"content": step.text}))
    for index, call in enumerate(step.calls):
        function = {"name": call.name, "arguments": json.dumps(dict(call.arguments))}
        chunks.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": f"call_{time.monotonic_ns()}_{index}",
                            "type": "function",
                            "function": function,
                        }
                    ]
                }
            )
        )
    chunks.append(chunk({}, "tool_calls" if step.calls else "stop"))
    tokens = step.tokens
    usage = {
        "prompt_tokens": tokens.input,
        "completion_tokens": tokens.output,
        "total_tokens": tokens.input + tokens.output,
    }
    chunks.append({**head, "choices": [], "usage": usage})
    events = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
    return Step("raw", body=events + "data: [DONE]\n\n")


def _text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def _llm(request: RecordedRequest, _index: int) -> Step:
    """Stateless, so that nao's concurrent side requests (the chat's title, its memory)
    may come in any order: the agent's step is told by the tool results since the question."""
    body = request.json or {}
    if body.get("response_format"):  # nao's memory extraction: nothing to remember
        return answer(json.dumps({"user_instructions": None, "user_profile": None}))
    if not body.get("stream"):  # the chat's title
        return answer("Orders and refunds")
    messages = body.get("messages", [])
    asked = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    question = _text(messages[asked].get("content"))
    plan = next((p for word, p in PLANS.items() if word in question), None)
    if plan is None:
        return exhausted(f"no plan for {question[:200]!r}")
    queries, reply = plan
    ran = sum(1 for m in messages[asked:] if m.get("role") == "tool")
    if ran < len(queries):
        return streamed(tool_calls(execute_sql(queries[ran])))
    return streamed(answer(reply))


# ---- a user of nao's web app: its session cookie and the endpoints the UI calls ------------


@dataclass(frozen=True)
class Sent:
    """One message sent through `POST /api/agent`, with the ids nao's stream gave."""

    chat_id: str
    question_id: str
    answer_id: str
    events: list[dict[str, Any]]


class Browser:
    def __init__(self, url: str) -> None:
        self.url = url
        self._opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )

    def call(self, path: str, body: Any = None, *, timeout: float = 120) -> tuple[int, bytes]:
        request = urllib.request.Request(
            self.url + path,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Origin": self.url},
            method="GET" if body is None else "POST",
        )
        try:
            with self._opener.open(request, timeout=timeout) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def query(self, procedure: str, value: Any) -> tuple[int, Any]:
        """A tRPC query (superjson: `{"json": ...}` in, `result.data.json` out)."""
        given = urllib.parse.quote(json.dumps({"json": value}))
        status, body = self.call(f"/api/trpc/{procedure}?input={given}")
        return status, json.loads(body or b"{}")

    def mutate(self, procedure: str, value: Any) -> tuple[int, Any]:
        status, body = self.call(f"/api/trpc/{procedure}", {"json": value})
        return status, json.loads(body or b"{}")

    def send(self, text: str, **more: Any) -> Sent:
        """One message to nao's agent, its answer streamed to the end (UI message SSE)."""
        status, body = self.call("/api/agent", {"message": {"text": text}, "model": MODEL, **more})
        assert status == 200, body[:2000]
        events = [
            json.loads(line.removeprefix("data: "))
            for line in body.decode().splitlines()
            if line.startswith("data: {")
        ]
        errors = [e for e in events if e["type"] == "error"]
        assert not errors and events[-1] == {"type": "finish", "finishReason": "stop"}, events
        first = next(e for e in events if e["type"] == "start")
        new_chat = next((e["data"]["id"] for e in events if e["type"] == "data-newChat"), None)
        question = next(e for e in events if e["type"] == "data-newUserMessage")
        return Sent(
            new_chat or more["chatId"], question["data"]["newId"], first["messageId"], events
        )

    def stored_chat(self, sent: Sent, timeout_s: float = 60) -> dict[str, Any]:
        """nao's `chat.get` once the answer is stored (it is saved as its stream ends)."""
        deadline = time.monotonic() + timeout_s
        while True:
            status, body = self.query("chat.get", {"chatId": sent.chat_id})
            chat = body.get("result", {}).get("data", {}).get("json") if status == 200 else None
            if chat and any(m["id"] == sent.answer_id for m in chat["messages"]):
                return chat
            assert time.monotonic() < deadline, (status, body)
            time.sleep(0.2)

    def vote(self, sent: Sent, vote: str, explanation: str | None = None) -> None:
        given = {"chatId": sent.chat_id, "messageId": sent.answer_id, "vote": vote}
        if explanation:
            given["explanation"] = explanation
        status, body = self.mutate("feedback.submit", given)
        assert status == 200, body


def _tool_events(sent: Sent) -> list[str]:
    return [e["type"] for e in sent.events if e["type"].startswith("tool-output")]


def _store_text(root: Path) -> tuple[bytes, str]:
    """Every parquet file of the store, as bytes and as the values it holds."""
    files = sorted((root / ".eval").rglob("*.parquet"))
    assert files
    raw = b"".join(p.read_bytes() for p in files)
    values = json.dumps([pq.read_table(p).to_pylist() for p in files], default=str)
    return raw, values


def test_chats_and_votes_a_real_nao_backend_stored_are_imported_and_recommended_on(tmp_path):
    try:
        python = nao_python()
    except NaoUnavailable as error:
        pytest.skip(f"nao-core 0.3.29 cannot be installed here: {error}")
    (tmp_path / "state").mkdir()
    database = tmp_path / "state" / "nao.sqlite"
    root = write_project(tmp_path / "project")
    with ScriptedServer("openai", script=_llm) as llm:
        nao_project = write_nao_project(tmp_path / "shop", llm_url=llm.base_url)
        env = {KEY_VARIABLE: "sk-scripted"}
        with nao_backend(python, nao_project, tmp_path / "state", env) as backend:
            started = datetime.now(UTC)
            browser = Browser(backend.url)
            status, body = browser.call(
                "/api/auth/sign-up/email", {"email": EMAIL, "password": PASSWORD, "name": NAME}
            )
            assert status == 200, body  # the first account: the project's admin
            status, body = browser.call(
                "/api/auth/sign-in/email", {"email": EMAIL, "password": PASSWORD}
            )
            assert status == 200, body
            nao_user = json.loads(body)["user"]["id"]

            # A question whose first query fails (the agent then queries again and answers),
            # voted down with why, then regenerated as nao's web UI does it (the question
            # sent again with `messageToEditId`).
            refunds = browser.send(REFUNDS)
            assert _tool_events(refunds) == ["tool-output-error", "tool-output-available"]
            browser.stored_chat(refunds)
            browser.vote(refunds, "down", DOWN_VOTE)
            again = browser.send(
                REFUNDS, chatId=refunds.chat_id, messageToEditId=refunds.question_id
            )
            assert again.chat_id == refunds.chat_id and again.answer_id != refunds.answer_id
            # A question answered at once, voted up.
            orders = browser.send(ORDERS)
            assert _tool_events(orders) == ["tool-output-available"]
            browser.stored_chat(orders)
            browser.vote(orders, "up")
            # What nao itself shows of them.
            shown = browser.stored_chat(again)
            [answer_shown] = [m for m in shown["messages"] if m["id"] == again.answer_id]
            assert answer_shown["role"] == "assistant"
            asked_models = {r.json.get("model") for r in llm.requests if r.json}
            assert asked_models == {"qwen3"}
            ended = datetime.now(UTC)

            # Imported while the backend runs, as a user would: read-only.
            done = run_cli("usage", "import", str(database), "--source", "nao", cwd=root)
            assert done.returncode == 0, done.stderr + backend.log.read_text()[-3000:]
    assert "2 conversation(s) read: 2 new" in done.stdout, done.stdout

    stored = {c.id: c for c in stored_conversations(StateFolder(root / ".eval"))}
    assert set(stored) == {refunds.chat_id, orders.chat_id}
    for conversation in stored.values():
        assert conversation.source == "nao" and conversation.model == "qwen3"
        assert started <= conversation.started_at <= ended
        assert conversation.user is not None and conversation.user.startswith("u_")
    refund = stored[refunds.chat_id]
    assert [t.role for t in refund.turns] == ["user", "assistant", "user", "assistant"]
    assert [t.regenerated for t in refund.turns] == [True, True, False, False]
    assert refund.turns[0].text == REFUNDS.replace(EMAIL, "<email>")
    for answered in (refund.turns[1], refund.turns[3]):
        failed, good = answered.tool_calls
        assert failed.name == good.name == "execute_sql"
        assert failed.sql == FAILING_SQL and failed.result is None
        assert failed.error is not None and '"refund_amount" not found' in failed.error
        assert good.sql == PLANS["refund"][0][1] and good.error is None
        assert good.result is not None and "132.75" in good.result
        assert answered.text == "Refunds total 132.75."
        assert answered.at is not None and started <= answered.at <= ended
    assert refund.turns[1].feedback == "down" and refund.turns[1].feedback_comment == DOWN_VOTE
    assert refund.turns[3].feedback is None
    order = stored[orders.chat_id]
    assert [(t.role, t.regenerated) for t in order.turns] == [
        ("user", False),
        ("assistant", False),
    ]
    assert order.turns[0].text == ORDERS and order.turns[1].text == "3 orders were placed."
    [count] = order.turns[1].tool_calls
    assert count.sql == PLANS["orders were placed"][0][0] and count.error is None
    assert order.turns[1].feedback == "up" and order.turns[1].feedback_comment is None
    assert refund.user == order.user  # one person, one pseudonym

    # Nothing of the person: neither the account's email, name or id, nor the password.
    raw, values = _store_text(root)
    for personal in (EMAIL, NAME, nao_user, PASSWORD):
        assert personal.encode() not in raw and personal not in values

    kinds = {(s.conversation_id, s.kind) for s in stored_signals(StateFolder(root / ".eval"))}
    assert (refunds.chat_id, "tool_error") in kinds
    assert (refunds.chat_id, "negative_feedback") in kinds
    assert (refunds.chat_id, "correction") in kinds  # the regenerated answer
    assert (orders.chat_id, "tool_error") not in kinds
    assert (orders.chat_id, "negative_feedback") not in kinds

    recommended = run_cli("recommend", "--format", "json", cwd=root)
    assert recommended.returncode == 0, recommended.stderr
    items = json.loads(recommended.stdout)
    by_kind = {r["kind"]: r for r in items}
    error = by_kind["tool_error"]
    assert error["conversations"] == [refunds.chat_id] and error["tables"] == ["orders"]
    assert '"refund_amount" not found' in error["error"]
    assert error["file"] == ORDERS_COLUMNS
    down = by_kind["negative_feedback"]
    assert down["conversations"] == [refunds.chat_id] and down["tables"] == ["orders"]
    assert all(r["users"] == 1 for r in items)
    shown_text = recommended.stdout
    assert EMAIL not in shown_text and NAME not in shown_text
