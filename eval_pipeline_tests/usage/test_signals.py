"""Each friction signal from conversations written out by hand: what is found, what is not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from eval_pipeline.usage import Conversation, ToolCall, Turn, signals_of

DAY = datetime(2026, 10, 5, 9, 0, tzinfo=UTC)


def talk(ident: str, *turns: Turn, day: int = 0, user: str = "u1") -> Conversation:
    return Conversation(ident, "jsonl", DAY + timedelta(days=day), tuple(turns), user=user)


def ask(text: str) -> Turn:
    return Turn("user", text)


def answer(text: str, *calls: ToolCall, **fields) -> Turn:
    return Turn("assistant", text, tool_calls=calls, **fields)


def sql(query: str, error: str | None = None) -> ToolCall:
    return ToolCall("execute_sql", {"sql": query}, None if error else "[]", error)


def kinds(conversations, prompts=()) -> list[tuple[str, str]]:
    return sorted((s.conversation_id, s.kind) for s in signals_of(conversations, prompts))


COVERING = ["How many orders are there per status?"]


def test_a_failed_query_is_a_tool_error_naming_its_table_and_the_error_shape():
    conversation = talk(
        "c1",
        ask("How many orders per status?"),
        answer(
            "Sorry.",
            sql(
                "SELECT status, count(*) FROM main.orders o JOIN refunds r ON r.id = o.id WHERE x = 'a'",
                error='Binder Error: column "x" not found at line 3',
            ),
        ),
    )
    [signal] = signals_of([conversation], COVERING)
    assert signal.kind == "tool_error"
    assert signal.tables == ("orders", "refunds")
    # Literals and numbers out, identifiers kept: the same mistake reads the same everywhere.
    assert signal.error == 'binder error: column "x" not found at line n'
    assert "execute_sql failed" in signal.detail


def test_a_vote_down_is_negative_feedback_and_a_vote_up_is_nothing():
    down = talk(
        "c1",
        ask("How many orders per status?"),
        answer("12", sql("SELECT 1 FROM orders"), feedback="down"),
    )
    up = talk(
        "c2",
        ask("How many orders per status?"),
        answer("12", sql("SELECT 1 FROM orders"), feedback="up"),
    )
    assert kinds([down, up], COVERING) == [("c1", "negative_feedback")]


def test_a_correction_a_rephrase_and_a_regeneration_are_corrections():
    said_wrong = talk(
        "c1",
        ask("What was net revenue in October?"),
        answer("129,400", sql("SELECT sum(amount) FROM orders")),
        ask("That's wrong, it should exclude refunds."),
        answer("121,050", sql("SELECT sum(amount) - 1 FROM orders")),
    )
    asked_again = talk(
        "c2",
        ask("Which products are discontinued in the catalogue?"),
        answer("Three.", sql("SELECT name FROM products")),
        ask("Which catalogue products are discontinued, no longer sold?"),
        answer("Five."),
    )
    regenerated = talk(
        "c3",
        ask("How many orders per status?"),
        answer("12", sql("SELECT 1 FROM orders"), regenerated=True),
    )
    follow_up = talk(  # a new question is no correction
        "c4",
        ask("How many orders per status?"),
        answer("12", sql("SELECT 1 FROM orders")),
        ask("And how many customers signed up in March?"),
        answer("40"),
    )
    prompts = [*COVERING, "What was net revenue in October?", "Which products are discontinued?"]
    found = signals_of([said_wrong, asked_again, regenerated, follow_up], prompts)
    corrections = {s.conversation_id: s for s in found if s.kind == "correction"}
    assert set(corrections) == {"c1", "c2", "c3"}
    assert corrections["c1"].tables == ("orders",) and "exclude refunds" in corrections["c1"].detail
    assert corrections["c2"].tables == ("products",) and "other words" in corrections["c2"].detail
    assert corrections["c1"].turn == 1  # the answer that was corrected


def test_a_refusal_or_no_answer_at_all_is_no_answer():
    refused = talk(
        "c1",
        ask("Marketing spend by channel?"),
        answer("I'm sorry, I don't have access to marketing data."),
    )
    silent = talk(
        "c2",
        ask("Marketing spend by channel?"),
        answer("", sql("SELECT 1 FROM spend", error="boom")),
    )
    answered = talk("c3", ask("How many orders per status?"), answer("There are 12."))
    found = kinds([refused, silent, answered], COVERING)
    assert ("c1", "no_answer") in found and ("c2", "no_answer") in found
    assert not [k for c, k in found if c == "c3"]


def test_the_same_question_answered_with_other_figures_on_other_days_is_inconsistent():
    def churn(
        ident: str,
        day: int,
        figure: str,
        question: str = "What was the churn rate in October 2026?",
    ):
        return talk(
            ident,
            ask(question),
            answer(f"It was {figure}.", sql("SELECT 1 FROM customers")),
            day=day,
        )

    same_day_twice = [churn("a1", 0, "4.1%"), churn("a2", 0, "5.3%")]  # one day: not across days
    agreeing = [churn("b1", 0, "4.1%"), churn("b2", 3, "4.1%")]
    disagreeing = [churn("c1", 0, "4.1%"), churn("c2", 2, "5.3%"), churn("c3", 4, "4.1%")]
    assert not [
        k for _, k in kinds(same_day_twice, ["churn rate in October 2026"]) if k == "inconsistent"
    ]
    assert not [
        k for _, k in kinds(agreeing, ["churn rate in October 2026"]) if k == "inconsistent"
    ]
    found = [
        s
        for s in signals_of(disagreeing, ["churn rate in October 2026"])
        if s.kind == "inconsistent"
    ]
    assert sorted(s.conversation_id for s in found) == ["c1", "c2", "c3"]
    assert "differs from the usual" in next(s for s in found if s.conversation_id == "c2").detail
    # A question about "last week" may rightly get another answer every day.
    relative = [
        churn("d1", 0, "4.1%", "What was the churn rate last week?"),
        churn("d2", 2, "5.3%", "What was the churn rate last week?"),
    ]
    assert not [k for _, k in kinds(relative, ["churn rate"]) if k == "inconsistent"]


def test_a_question_no_test_asks_is_uncovered_unless_it_met_other_friction():
    covered = talk("c1", ask("Quick one: how many orders are there per status?"), answer("12"))
    uncovered = talk(
        "c2", ask("What is the inventory turnover by warehouse region?"), answer("3.2")
    )
    failed = talk(  # recommended for its error, not twice
        "c3",
        ask("What is the inventory turnover by warehouse region?"),
        answer("", sql("SELECT 1 FROM stock", error="no table stock")),
    )
    found = kinds([covered, uncovered, failed], COVERING)
    assert ("c2", "uncovered") in found
    assert ("c1", "uncovered") not in found
    assert ("c3", "uncovered") not in found and ("c3", "tool_error") in found
