"""A generated month of production traffic for the usage tests and `benchmarks/usage_loop.py`: OpenTelemetry GenAI spans in OTLP/JSON as a collector's file exporter writes them, with friction of every kind planted in known clusters among ordinary conversations. Generated data, labelled as such: no real user wrote any of it."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

#: The suite's tests: what ordinary questions ask (they are covered).
SUITE_PROMPTS = {
    "orders_per_status": "How many orders are there per order status?",
    "revenue_by_month": "What is the gross revenue by month for 2026?",
    "top_customers": "Who are the top 10 customers by lifetime order value?",
    "average_basket": "What is the average basket size per order in 2026?",
    "products_per_category": "How many products are in each product category?",
    "new_customers_by_month": "How many new customers signed up each month in 2026?",
}

#: The agent's context files of the generated project (nao's layout), and what they say.
CONTEXT_FILES = {
    "RULES.md": "Answer with SQL on the shop warehouse. Round money to cents.\n",
    "semantics/revenue.md": "Net revenue: orders.amount minus refunds. Gross revenue: orders.amount.\n",
    "semantics/mrr.md": "MRR: the monthly recurring revenue of active subscriptions.\n",
    "semantics/churn.md": "Churn rate: customers who cancelled in a month over customers active at its start.\n",
    "databases/type=duckdb/database=shop/schema=main/table=orders/columns.md": "id, customer_id, amount, status, created_at\n",
    "databases/type=duckdb/database=shop/schema=main/table=refunds/columns.md": "id, order_id, amount_usd, refunded_at\n",
    "databases/type=duckdb/database=shop/schema=main/table=sessions/columns.md": "id, user_id, started_at (text, ISO 8601)\n",
    "databases/type=duckdb/database=shop/schema=main/table=products/columns.md": "id, name, category, price\n",
    "databases/type=duckdb/database=shop/schema=main/table=products/description.md": "One row per product in the catalogue.\n",
    "databases/type=duckdb/database=shop/schema=main/table=customers/columns.md": "id, signed_up_at, cancelled_at\n",
    "databases/type=duckdb/database=shop/schema=main/table=subscriptions/columns.md": "id, customer_id, plan, monthly_price, active\n",
}


@dataclass(frozen=True)
class Planted:
    """A cluster of friction planted on purpose: the kind and file a recommendation must name,
    and the table or words that identify it."""

    name: str
    kind: str
    file: str
    conversations: int
    table: str | None = None


PLANTED = (
    Planted(
        "refunds_column",
        "tool_error",
        "databases/type=duckdb/database=shop/schema=main/table=refunds/columns.md",
        70,
        "refunds",
    ),
    Planted(
        "sessions_cast",
        "tool_error",
        "databases/type=duckdb/database=shop/schema=main/table=sessions/columns.md",
        45,
        "sessions",
    ),
    Planted("mrr_downvoted", "negative_feedback", "semantics/mrr.md", 55, "subscriptions"),
    Planted("net_revenue_corrected", "correction", "semantics/revenue.md", 50, "refunds"),
    Planted("churn_inconsistent", "inconsistent", "semantics/churn.md", 40, "customers"),
    Planted("marketing_unanswered", "no_answer", "RULES.md", 35),
    Planted("inventory_uncovered", "uncovered", "cases/", 60),
    Planted(
        "products_rephrased",
        "correction",
        "databases/type=duckdb/database=shop/schema=main/table=products/description.md",
        35,
        "products",
    ),
)

_ORDINARY = [
    (
        "How many orders are there per order status?",
        "SELECT status, count(*) FROM orders GROUP BY status",
        "There are 1,204 completed, 88 pending and 31 cancelled orders.",
    ),
    (
        "What is the gross revenue by month for 2026?",
        "SELECT date_trunc('month', created_at), sum(amount) FROM orders GROUP BY 1",
        "Gross revenue was 41,200 in January and 43,950 in February 2026.",
    ),
    (
        "Who are the top 10 customers by lifetime order value?",
        "SELECT customer_id, sum(amount) FROM orders GROUP BY 1 ORDER BY 2 DESC LIMIT 10",
        "The top customer spent 9,840; the tenth 4,120.",
    ),
    (
        "What is the average basket size per order in 2026?",
        "SELECT avg(amount) FROM orders WHERE created_at >= '2026-01-01'",
        "The average basket in 2026 is 61.40.",
    ),
    (
        "How many products are in each product category?",
        "SELECT category, count(*) FROM products GROUP BY category",
        "There are 42 products in apparel and 17 in home.",
    ),
    (
        "How many new customers signed up each month in 2026?",
        "SELECT date_trunc('month', signed_up_at), count(*) FROM customers GROUP BY 1",
        "312 customers signed up in January 2026 and 298 in February.",
    ),
]
_ORDINARY_PHRASINGS = ["", "Quick one: ", "Can you tell me: ", "Hi! "]

_ODD_QUESTIONS = [
    "what is the weather in {} today",
    "translate '{}' into French",
    "write a poem about {}",
    "how do I reset my password for {}",
    "which office does {} sit in",
]
_ODD_WORDS = ["lisbon", "quarterly", "dashboard", "coffee", "berlin", "pricing", "okr", "slack"]


@dataclass
class _Spans:
    trace: str
    conversation: str
    user: str
    model: str
    clock: datetime
    spans: list[dict[str, Any]] = field(default_factory=list)

    def _span(self, operation: str, attributes: dict[str, Any], **extra: Any) -> dict[str, Any]:
        start = self.clock
        self.clock += timedelta(seconds=2)
        span = {
            "traceId": self.trace,
            "spanId": f"{len(self.spans) + 1:016x}",
            "name": operation,
            "kind": 1,
            "startTimeUnixNano": str(int(start.timestamp() * 1e9)),
            "endTimeUnixNano": str(int(self.clock.timestamp() * 1e9)),
            "attributes": _attributes(
                {
                    "gen_ai.operation.name": operation,
                    "gen_ai.conversation.id": self.conversation,
                    "gen_ai.request.model": self.model,
                    "user.id": self.user,
                    "user.email": f"{self.user}@example.com",
                    **attributes,
                }
            ),
            **extra,
        }
        self.spans.append(span)
        return span

    def ask(self, question: str, history: list[dict[str, Any]]) -> None:
        history.append({"role": "user", "parts": [{"type": "text", "content": question}]})

    def tool(self, sql: str, *, error: str | None = None, result: str = "[]") -> None:
        attributes = {
            "gen_ai.tool.name": "execute_sql",
            "gen_ai.tool.call.arguments": json.dumps({"sql": sql}),
        }
        extra: dict[str, Any] = {}
        if error:
            attributes["error.type"] = "QueryError"
            extra["status"] = {"code": 2, "message": error}
        else:
            attributes["gen_ai.tool.call.result"] = result
        self._span("execute_tool", attributes, **extra)

    def answer(self, text: str, history: list[dict[str, Any]], *, vote: str | None = None) -> None:
        output = [{"role": "assistant", "parts": [{"type": "text", "content": text}]}]
        extra: dict[str, Any] = {}
        if vote:
            extra["events"] = [
                {
                    "timeUnixNano": str(int((self.clock + timedelta(seconds=1)).timestamp() * 1e9)),
                    "name": "gen_ai.evaluation.result",
                    "attributes": _attributes(
                        {
                            "gen_ai.evaluation.name": "user_feedback",
                            "gen_ai.evaluation.score.label": vote,
                        }
                    ),
                }
            ]
        self._span(
            "chat",
            {
                "gen_ai.input.messages": json.dumps(history),
                "gen_ai.output.messages": json.dumps(output),
            },
            **extra,
        )
        history.append(output[0])


def _attributes(values: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for key, value in values.items():
        if isinstance(value, bool):
            wrapped = {"boolValue": value}
        elif isinstance(value, int):
            wrapped = {"intValue": str(value)}
        elif isinstance(value, float):
            wrapped = {"doubleValue": value}
        else:
            wrapped = {"stringValue": str(value)}
        out.append({"key": key, "value": wrapped})
    return out


def _planted_conversation(planted: Planted, spans: _Spans, rng: random.Random, day: int) -> None:
    history: list[dict[str, Any]] = []
    if planted.name == "refunds_column":
        spans.ask(
            rng.choice(
                [
                    "What was net revenue after refunds last quarter?",
                    "How much did we refund in October 2026?",
                    "Refund total by week for Q3 2026?",
                ]
            ),
            history,
        )
        spans.tool(
            f"SELECT sum(refund_amount) FROM refunds WHERE refunded_at > '2026-0{rng.randint(1, 9)}-01'",
            error='Binder Error: Referenced column "refund_amount" not found in FROM clause! Candidate bindings: "refunds.amount_usd"',
        )
        spans.answer("Sorry, the query failed.", history)
    elif planted.name == "sessions_cast":
        spans.ask(
            rng.choice(
                [
                    "Average session length in September 2026?",
                    "How many sessions started per day in August 2026?",
                ]
            ),
            history,
        )
        spans.tool(
            f"SELECT count(*) FROM sessions WHERE started_at > now() - INTERVAL {rng.randint(2, 30)} DAY",
            error="Conversion Error: Could not convert string '2026-08-01T10:00:00Z' to DATE",
        )
        spans.tool("SELECT count(*) FROM sessions")
        spans.answer("There were 18,230 sessions.", history)
    elif planted.name == "mrr_downvoted":
        spans.ask(
            rng.choice(
                [
                    "What is our MRR for November 2026?",
                    "Show MRR by plan for November 2026",
                    "MRR growth in November 2026?",
                ]
            ),
            history,
        )
        spans.tool("SELECT plan, sum(monthly_price) FROM subscriptions GROUP BY plan")
        spans.answer("MRR is 84,300 across all plans.", history, vote="thumbs_down")
    elif planted.name == "net_revenue_corrected":
        spans.ask(
            rng.choice(["What was net revenue in October 2026?", "Net revenue for Q3 2026?"]),
            history,
        )
        spans.tool("SELECT sum(o.amount) FROM orders o LEFT JOIN refunds r ON r.order_id = o.id")
        spans.answer("Net revenue was 129,400.", history)
        spans.ask(
            rng.choice(
                [
                    "That's wrong, net revenue should exclude refunds.",
                    "No, you forgot to subtract the refunds.",
                ]
            ),
            history,
        )
        spans.tool(
            "SELECT sum(o.amount) - sum(r.amount_usd) FROM orders o LEFT JOIN refunds r ON r.order_id = o.id"
        )
        spans.answer("Net revenue after refunds was 121,050.", history)
    elif planted.name == "churn_inconsistent":
        spans.ask("What was the churn rate in October 2026?", history)
        spans.tool(
            "SELECT count(*) FILTER (WHERE cancelled_at IS NOT NULL) / count(*) FROM customers"
        )
        figure = "4.1%" if day % 2 else "5.3%"
        spans.answer(f"The churn rate in October 2026 was {figure}.", history)
    elif planted.name == "marketing_unanswered":
        spans.ask(
            rng.choice(
                [
                    "What was marketing spend by channel in October 2026?",
                    "Marketing spend per channel last month?",
                    "Which marketing channel had the highest spend in Q3 2026?",
                ]
            ),
            history,
        )
        spans.answer("I'm sorry, I don't have access to marketing spend data.", history)
    elif planted.name == "inventory_uncovered":
        spans.ask(
            rng.choice(
                [
                    "What is the warehouse inventory turnover by region?",
                    "Inventory turnover by warehouse region for 2026?",
                    "Show inventory turnover for each warehouse region",
                ]
            ),
            history,
        )
        spans.tool("SELECT region, sum(shipped) / avg(stock) FROM products GROUP BY region")
        spans.answer("Inventory turnover ranges from 3.2 to 5.8 by region.", history)
    elif planted.name == "products_rephrased":
        spans.ask("Which products are discontinued in the catalogue?", history)
        spans.tool("SELECT name FROM products WHERE price = 0")
        spans.answer("Three products have a price of zero.", history)
        spans.ask("Which catalogue products are discontinued, I mean no longer sold?", history)
        spans.tool("SELECT name FROM products WHERE category = 'archived'")
        spans.answer("Five products are in the archived category.", history)


def _ordinary(spans: _Spans, rng: random.Random) -> None:
    history: list[dict[str, Any]] = []
    question, sql, answer = rng.choice(_ORDINARY)
    spans.ask(rng.choice(_ORDINARY_PHRASINGS) + question, history)
    roll = rng.random()
    if roll < 0.015:  # a one-off mistake of its own
        spans.tool(
            sql + f" WHERE x{rng.randint(0, 10**6)} > 0",
            error=f'Parser Error: syntax error at or near "x{rng.randint(0, 10**6)}"',
        )
    spans.tool(sql)
    vote = None
    roll = rng.random()
    if roll < 0.001:
        vote = "thumbs_down"
    elif roll < 0.05:
        vote = "thumbs_up"
    spans.answer(answer, history, vote=vote)


def _odd(spans: _Spans, rng: random.Random) -> None:
    history: list[dict[str, Any]] = []
    template = rng.choice(_ODD_QUESTIONS)
    spans.ask(template.format(f"{rng.choice(_ODD_WORDS)} {rng.randint(1, 10**5)}"), history)
    spans.answer("That is outside what I can help with here.", history)


def generate_month(
    conversations: int = 10_000, *, seed: int = 7, first_day: date = date(2026, 10, 1)
) -> Iterator[dict[str, Any]]:
    """OTLP/JSON export requests (about 200 spans each, as a batching collector sends them)
    of `conversations` conversations (at least the planted ones) over 30 days, 200 users and 3 models: the planted
    clusters (`PLANTED`, their sizes as given), 1% odd one-off questions, the rest ordinary
    questions the suite's tests ask, with a few one-off errors and votes of their own."""
    rng = random.Random(seed)
    plan: list[Planted | str] = [p for p in PLANTED for _ in range(p.conversations)]
    odd = conversations // 100
    plan += ["odd"] * odd
    plan += ["ordinary"] * max(0, conversations - len(plan))
    rng.shuffle(plan)
    users = [f"user{i:03d}" for i in range(200)]
    models = ["gpt-4.1", "claude-sonnet-4", "qwen3"]
    batch: list[dict[str, Any]] = []
    for index, what in enumerate(plan):
        day = rng.randrange(30)
        start = datetime.combine(first_day + timedelta(days=day), datetime.min.time(), UTC)
        start += timedelta(seconds=rng.randrange(86_000))
        pool = users[:40] if isinstance(what, Planted) else users
        spans = _Spans(
            trace=f"{index:032x}",
            conversation=f"conv-{index:06d}",
            user=rng.choice(pool),
            model=rng.choice(models),
            clock=start,
        )
        if isinstance(what, Planted):
            _planted_conversation(what, spans, rng, day)
        elif what == "odd":
            _odd(spans, rng)
        else:
            _ordinary(spans, rng)
        batch += spans.spans
        if len(batch) >= 200 or index == len(plan) - 1:
            yield {
                "resourceSpans": [
                    {
                        "resource": {
                            "attributes": _attributes({"service.name": "analytics-agent"})
                        },
                        "scopeSpans": [{"scope": {"name": "agent"}, "spans": batch}],
                    }
                ]
            }
            batch = []


def write_month(
    path: Path, conversations: int = 10_000, *, seed: int = 7, first_day: date = date(2026, 10, 1)
) -> Path:
    """The generated month as a collector's file exporter writes it: one request per line."""
    with path.open("w", encoding="utf-8") as file:
        for request in generate_month(conversations, seed=seed, first_day=first_day):
            file.write(json.dumps(request) + "\n")
    return path


def write_project(root: Path) -> Path:
    """A suite folder for the generated traffic: the context files, and the suite's tests
    (prompts only; what they check does not matter to the usage loop)."""
    for relative, text in CONTEXT_FILES.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    cases = root / "cases"
    cases.mkdir(parents=True, exist_ok=True)
    for name, prompt in SUITE_PROMPTS.items():
        (cases / f"{name}.yml").write_text(f"prompt: {prompt}\n", encoding="utf-8")
    (root / "eval_config.yaml").write_text("test:\n  models: [replay:demo]\n", encoding="utf-8")
    return root
