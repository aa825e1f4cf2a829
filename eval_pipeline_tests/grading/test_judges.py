"""LLM judges through the real providers, against scripted OpenAI and Anthropic servers.

Evaluators (Calibrate), `llm_judge` tool arguments and pairwise consistency (oxy): what the
judge is sent, how its answers are read, and how a judge that cannot decide becomes an
`error` check rather than a `failed` one.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from datetime import date
from itertools import combinations
from pathlib import Path

import pytest

from eval_pipeline.agents import AgentRun, ToolCallRecord
from eval_pipeline.grading import (
    DEFAULT_CONSISTENCY_PROMPT,
    CheckResult,
    Grader,
    GradeStatus,
    Judge,
    check_consistency,
    check_evaluators,
    combine,
)
from eval_pipeline.suite import (
    ArgumentMatcher,
    Case,
    Consistency,
    Evaluator,
    ExpectedToolCall,
    Message,
)
from eval_pipeline_tests.agents.servers import (
    RecordedRequest,
    ScriptedServer,
    Step,
    answer,
    error,
    open_chat_model,
    repeat,
)

CONVERSATION = (
    Message("user", "What was our revenue last year?"),
    Message("assistant", "Do you mean 2023, in USD?"),
    Message("user", "Yes, 2023 in USD."),
)
REPLY = "Revenue in 2023 was $1,081,396."
CRITERIA = "States the 2023 revenue as one figure without asking anything further"


@pytest.fixture(params=["openai", "anthropic"])
def server(request) -> Iterator[ScriptedServer]:
    """The judge model, over each provider's wire protocol in turn."""
    with ScriptedServer(request.param) as server:
        yield server


def with_judge(server: ScriptedServer, use):
    """Run `use(judge)` with a judge whose model is served by `server`."""

    async def go():
        async with open_chat_model(server) as model:
            return await use(Judge(model))

    return asyncio.run(go())


def sent(request: RecordedRequest) -> list[tuple[str, str]]:
    """The (role, text) turns a provider sent, system prompt first, in either wire format."""
    body = request.json
    turns = [("system", body["system"])] if body.get("system") else []
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, list):
            content = "\n".join(b["text"] for b in content if b.get("type") == "text")
        turns.append((message["role"], content or ""))
    return turns


def text_of(request: RecordedRequest) -> str:
    return "\n".join(text for _, text in sent(request))


def verdict(passed: bool, reasoning: str) -> str:
    return json.dumps({"passed": passed, "reasoning": reasoning})


def evaluate(server: ScriptedServer, *evaluators: Evaluator) -> CheckResult:
    return with_judge(
        server, lambda judge: check_evaluators(evaluators, CONVERSATION, REPLY, judge)
    )


# ---- evaluators ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "judge_text",
    [
        verdict(True, "One figure, no question."),
        "```json\n" + verdict(True, "One figure, no question.") + "\n```",
        "Looking at the reply:\n" + verdict(True, "One figure, no question.") + "\nDone.",
    ],
    ids=["bare", "fenced", "prose-around"],
)
def test_an_evaluator_verdict_is_read_and_its_reasoning_kept(server, judge_text):
    server.script(answer(judge_text))
    check = evaluate(server, Evaluator("answers_directly", CRITERIA))

    assert check.status is GradeStatus.PASSED
    assert check.message == "evaluators passed: answers_directly"
    [stored] = check.details["evaluators"]
    assert stored["evaluator"] == "answers_directly" and stored["criteria"] == CRITERIA
    assert stored["passed"] is True and stored["reasoning"] == "One figure, no question."
    # the judge saw the whole conversation, the reply under test and the criterion
    [request] = server.requests
    turns = sent(request)
    assert turns[0][0] == "system" and "grade replies" in turns[0][1]
    assert '"passed"' in turns[0][1]
    prompt = turns[-1][1]
    for message in CONVERSATION:
        assert f"[{message.role}]\n{message.content}" in prompt
    assert REPLY in prompt and CRITERIA in prompt


def test_a_failing_verdict_fails_the_check_with_the_judges_reasoning(server):
    server.script(answer(verdict(False, "It asks whether tax is included.")))
    check = evaluate(server, Evaluator("answers_directly", CRITERIA))

    assert check.status is GradeStatus.FAILED
    assert check.message == (
        "evaluator 'answers_directly' failed: It asks whether tax is included."
    )
    assert check.details["evaluators"][0]["passed"] is False


def test_every_evaluator_must_pass_and_each_is_judged_on_its_own(server):
    def judge(request: RecordedRequest, _index: int) -> Step:
        mentions_year = "mentions the year" in text_of(request)
        return answer(verdict(mentions_year, "checked"))

    server.set_script(judge)
    check = evaluate(
        server,
        Evaluator("year", "mentions the year"),
        Evaluator("currency", "names the currency in words"),
    )

    assert check.status is GradeStatus.FAILED
    assert check.message == "evaluator 'currency' failed: checked"
    assert [v["passed"] for v in check.details["evaluators"]] == [True, False]
    assert len(server.requests) == 2


def test_garbage_gets_one_retry_with_the_reminder_then_the_check_is_an_error(server):
    server.script(answer("Looks good to me!"), answer("Yes, it passes."))
    check = evaluate(server, Evaluator("answers_directly", CRITERIA))

    assert check.status is GradeStatus.ERROR
    assert "gave no verdict" in check.message and "Yes, it passes." in check.message
    assert check.details["evaluators"][0]["passed"] is None
    # an undecided judge is an error of the run's grade, never a failure of the agent
    assert combine([check]).status is GradeStatus.ERROR
    first, retry = server.requests
    assert sent(retry)[: len(sent(first))] == sent(first)
    assert sent(retry)[-2] == ("assistant", "Looks good to me!")
    role, reminder = sent(retry)[-1]
    assert role == "user" and "not the required JSON object" in reminder
    assert '{"passed": true or false' in reminder


def test_the_retry_can_still_give_the_verdict(server):
    server.script(answer("Let me think."), answer(verdict(True, "Direct.")))
    check = evaluate(server, Evaluator("answers_directly", CRITERIA))
    assert check.status is GradeStatus.PASSED
    assert len(server.requests) == 2


def test_a_refusal_is_no_verdict_either(server):
    refusal = "I'm sorry, but I can't help with grading this conversation."
    server.script(answer(refusal), answer(refusal))
    check = evaluate(server, Evaluator("answers_directly", CRITERIA))

    assert check.status is GradeStatus.ERROR
    assert "gave no verdict" in check.message and "can't help" in check.message
    assert len(server.requests) == 2


def test_a_verdict_without_a_boolean_passed_is_no_verdict(server):
    server.script(answer('{"passed": "yes", "reasoning": "fine"}'), answer('{"reasoning": "fine"}'))
    check = evaluate(server, Evaluator("answers_directly", CRITERIA))
    assert check.status is GradeStatus.ERROR


def test_a_provider_that_keeps_failing_is_an_error_naming_the_judge(server):
    server.set_script(repeat(error(500, "upstream overloaded")))
    check = evaluate(server, Evaluator("answers_directly", CRITERIA))

    assert check.status is GradeStatus.ERROR
    model_id = f"{server.protocol}:gpt-4.1"
    assert check.message.startswith(f"evaluator 'answers_directly': judge {model_id} unavailable")
    assert "HTTP 500" in check.message
    assert len(server.requests) == 3  # the retry policy's attempts, then it gives up


def test_a_verdict_cut_by_max_tokens_is_an_error_not_a_verdict(server):
    # The JSON parses, but the judge was still writing when the limit stopped it.
    cut = verdict(True, "One figure, no question.") + "\nHowever, on a second reading the"
    server.set_script(repeat(answer(cut, cut=True)))
    check = evaluate(server, Evaluator("answers_directly", CRITERIA))

    assert check.status is GradeStatus.ERROR
    assert "the model reached max_tokens (1,024) and its reply was cut" in check.message
    assert "Raise max_tokens" in check.message
    assert len(server.requests) == 1  # neither retried nor re-asked: it would be cut again


def test_judge_calls_send_the_configured_max_tokens(server):
    server.set_script(repeat(answer(verdict(True, "One figure."))))

    async def go() -> CheckResult:
        async with open_chat_model(server, max_tokens=3000) as model:
            return await check_evaluators(
                [Evaluator("answers_directly", CRITERIA)], CONVERSATION, REPLY, Judge(model)
            )

    assert asyncio.run(go()).status is GradeStatus.PASSED
    assert server.last.json["max_tokens"] == 3000


def test_without_a_judge_model_evaluators_are_an_error_not_a_failure():
    check = asyncio.run(
        check_evaluators([Evaluator("e", "anything")], CONVERSATION, REPLY, judge=None)
    )
    assert check.status is GradeStatus.ERROR
    assert "judge_model" in check.message


# ---- consistency ----------------------------------------------------------------------------

SUBMISSION = re.compile(r"\[Submission (\d)\]\n(.*?)\n\[/Submission \1\]", re.DOTALL)
FIGURE = re.compile(r"\d[\d,]*")


def submissions(request: RecordedRequest) -> tuple[str, str]:
    found = dict(SUBMISSION.findall(text_of(request)))
    return found["1"], found["2"]


def agree_on_the_figure(request: RecordedRequest, _index: int) -> Step:
    """A judge that calls two replies consistent when they state the same figure."""
    first, second = submissions(request)
    same = FIGURE.findall(first) == FIGURE.findall(second)
    return answer(f"Both state one figure.\nAnswer: {'A' if same else 'B'}")


def consistency(server: ScriptedServer, replies: list[str], **settings) -> CheckResult:
    attempts = list(enumerate(replies))
    return with_judge(
        server,
        lambda judge: check_consistency(
            Consistency(n=len(replies), **settings), "What was revenue in 2023?", attempts, judge
        ),
    )


@pytest.mark.parametrize("n", [3, 4])
def test_every_pair_of_replies_is_judged_once(server, n):
    server.set_script(agree_on_the_figure)
    replies = [f"Revenue was $1,081,396 (wording {tag})." for tag in "abcd"[:n]]
    check = consistency(server, replies)

    assert len(server.requests) == n * (n - 1) // 2
    judged = sorted(submissions(request) for request in server.requests)
    assert judged == sorted((replies[i], replies[j]) for i, j in combinations(range(n), 2))
    assert check.status is GradeStatus.PASSED
    assert check.details["accuracy"] == 1.0
    assert len(check.details["pairs"]) == n * (n - 1) // 2
    assert check.message == f"consistency 100% ({n * (n - 1) // 2}/{n * (n - 1) // 2} pairs agree)"


@pytest.mark.parametrize(
    ("judge_text", "consistent"),
    [
        ("Same revenue, different rounding.\nAnswer: A", True),
        ("B", False),
        ("The figures differ by 8%.\n\n**Answer: B**", False),
        ("**Answer:** A", True),
    ],
)
def test_the_a_or_b_answer_is_read_in_its_common_shapes(server, judge_text, consistent):
    server.script(answer(judge_text))
    check = consistency(server, ["Revenue was $1.08M.", "Revenue was $1,000,000."])

    assert check.details["pairs"][0]["consistent"] is consistent
    assert check.details["pairs"][0]["reasoning"] == judge_text.strip()
    assert check.status is (GradeStatus.PASSED if consistent else GradeStatus.FAILED)


def test_accuracy_is_consistent_pairs_over_pairs_and_the_most_consistent_reply_is_reported(
    server,
):
    server.set_script(agree_on_the_figure)
    replies = [
        "Revenue was $1,081,396.",
        "It was $990,000.",
        "Total: $1,081,396 that year.",
        "Revenue came to $1,081,396.",
    ]
    check = consistency(server, replies, min_accuracy=0.5)

    # pairs among replies 0, 2 and 3 agree (3 of 6); every pair with reply 1 disagrees
    assert check.details["consistent_pairs"] == 3
    assert check.details["accuracy"] == 0.5
    assert check.details["scores"] == {"0": 2, "1": 0, "2": 2, "3": 2}
    assert check.details["most_consistent_attempt"] == 0
    assert check.details["most_consistent_reply"] == replies[0]
    assert check.status is GradeStatus.PASSED
    assert check.message == "consistency 50% (3/6 pairs agree)"


def test_by_default_one_disagreeing_pair_fails_the_check(server):
    def one_pair_disagrees(request: RecordedRequest, _index: int) -> Step:
        first, second = submissions(request)
        return answer("Answer: B" if {first, second} == {"A.", "C."} else "Answer: A")

    server.set_script(one_pair_disagrees)
    check = consistency(server, ["A.", "B.", "C."])

    assert check.details["consistent_pairs"] == 2
    assert check.status is GradeStatus.FAILED
    assert check.message == "consistency 67% (2/3 pairs agree), below 100%"
    # the reply that agrees with both others is the most consistent
    assert check.details["most_consistent_reply"] == "B."


def test_an_unjudged_pair_is_an_error_unless_the_others_already_fail(server):
    def judge(request: RecordedRequest, _index: int) -> Step:
        first, second = submissions(request)
        if {first, second} == {"A.", "C."}:
            return error(400, "content filtered")  # not retried: the pair stays undecided
        return answer("Answer: A")

    server.set_script(judge)
    undecided = consistency(server, ["A.", "B.", "C."])
    assert undecided.status is GradeStatus.ERROR
    assert undecided.message.startswith("1 of 3 pair(s) not judged: judge ")

    def judge_disagrees(request: RecordedRequest, _index: int) -> Step:
        first, second = submissions(request)
        if {first, second} == {"A.", "C."}:
            return error(400, "content filtered")
        return answer("Answer: A" if {first, second} == {"A.", "B."} else "Answer: B")

    server.set_script(judge_disagrees)
    known = consistency(server, ["A.", "B.", "C."])
    # whatever the missing pair says, 2 of 3 pairs can no longer reach 100%
    assert known.status is GradeStatus.FAILED
    assert known.message == "consistency 33% (1/3 pairs agree), 1 pair(s) not judged, below 100%"


def test_a_judge_that_answers_neither_a_nor_b_is_retried_then_an_error(server):
    server.script(answer("They are mostly similar."), answer("Hard to say."))
    check = consistency(server, ["x", "y"])

    assert check.status is GradeStatus.ERROR
    assert "gave no verdict twice" in check.message
    role, reminder = sent(server.requests[1])[-1]
    assert role == "user" and '"Answer: A" or "Answer: B"' in reminder
    # prose that merely uses the word "answer" is not a verdict
    server.script(answer("Both answer a question about revenue."), answer("Answer: A"))
    retried = consistency(server, ["x", "y"])
    assert retried.status is GradeStatus.PASSED
    assert retried.details["pairs"][0]["reasoning"] == "Answer: A"


def test_a_consistency_answer_cut_by_max_tokens_is_an_error_not_a_verdict(server):
    server.set_script(repeat(answer("Answer: A\n\nLooking again, the figures differ by", cut=True)))
    check = consistency(server, ["Revenue was $1,081,396.", "Revenue was $2,000,000."])

    assert check.status is GradeStatus.ERROR
    assert "its reply was cut" in check.message and "Raise max_tokens" in check.message


ECHO = 'End with a last line that is exactly "Answer: A" or "Answer: B".'


@pytest.mark.parametrize(
    "echo",
    [
        ECHO,
        ECHO.replace('"', "&quot;"),
        "Both say $1.08M.\n" + ECHO,
        "Answer: A\nOn reflection the figures may differ.",
    ],
    ids=["echo", "html-escaped-echo", "reasoning-then-echo", "verdict-not-last"],
)
def test_an_echo_of_the_instructions_is_no_verdict_retried_once_then_an_error(server, echo):
    server.script(answer(echo), answer(echo))
    check = consistency(server, ["Revenue was $1.08M.", "Revenue was $1,081,396."])

    assert len(server.requests) == 2  # the first answer, and one retry with the reminder
    assert check.status is GradeStatus.ERROR
    assert check.details["pairs"][0]["consistent"] is None
    assert "gave no verdict twice" in check.message

    server.script(answer(echo), answer("Same figure, rounded.\nAnswer: A"))
    retried = consistency(server, ["Revenue was $1.08M.", "Revenue was $1,081,396."])
    assert retried.status is GradeStatus.PASSED


def test_a_custom_prompt_is_rendered_into_the_request(server):
    template = (
        "Task: {{ task_description }}\nFirst: {{submission_1}}\nSecond: {{  submission_2 }}\n"
        "Answer A (consistent) or B (disagreement)."
    )
    server.script(answer("A"))
    check = consistency(server, ["Revenue was $5.", "It was 5 dollars."], prompt=template)

    assert check.status is GradeStatus.PASSED
    [request] = server.requests
    assert sent(request) == [
        (
            "user",
            "Task: What was revenue in 2023?\nFirst: Revenue was $5.\nSecond: It was 5 dollars.\n"
            "Answer A (consistent) or B (disagreement).",
        )
    ]


def test_the_default_prompt_allows_rounding_under_a_tenth_of_a_percent(server):
    assert "less than 0.1% apart" in DEFAULT_CONSISTENCY_PROMPT
    assert "differs by 0.1% or more" in DEFAULT_CONSISTENCY_PROMPT
    server.script(answer("Answer: A"))
    consistency(server, ["Revenue was 1,081,396.", "Revenue was 1,081,395.67."])

    [request] = server.requests
    prompt = text_of(request)
    assert "less than 0.1% apart" in prompt and "{{" not in prompt
    assert "Question: What was revenue in 2023?" in prompt
    assert submissions(request) == ("Revenue was 1,081,396.", "Revenue was 1,081,395.67.")


def test_consistency_needs_two_replies_and_a_judge():
    one = asyncio.run(check_consistency(Consistency(n=3), "q", [(0, "x")], judge=None))
    assert one.status is GradeStatus.ERROR and "judge_model" in one.message
    judge = Judge(model=None)  # type: ignore[arg-type]  # never asked: nothing to compare
    few = asyncio.run(check_consistency(Consistency(n=3), "q", [(0, "x")], judge))
    assert few.status is GradeStatus.ERROR
    assert few.message == "consistency needs at least 2 completed runs, got 1"


# ---- llm_judge tool arguments, end to end with the Grader ------------------------------------

SQL_2023 = "SELECT SUM(amount) FROM orders WHERE order_date >= DATE '2023-01-01'"


def tool_call_case() -> Case:
    return Case(
        "revenue_2023",
        Path("revenue_2023.yml"),
        "revenue_2023.yml",
        (Message("user", "What was revenue in 2023?"),),
        tool_calls=(
            ExpectedToolCall(
                "execute_sql",
                {"sql_query": ArgumentMatcher("llm_judge", criteria="filters orders to 2023")},
            ),
        ),
    )


def run_with_sql(sql: str) -> AgentRun:
    return AgentRun(
        "revenue_2023",
        "openai:gpt-4.1",
        0,
        date(2026, 1, 1),
        "input",
        "context",
        final_text="Revenue in 2023 was $1,081,396.",
        tool_calls=[
            ToolCallRecord("c1", "list_tables", {}, "{}"),
            ToolCallRecord("c2", "execute_sql", {"sql_query": sql}, json.dumps({"sql_query": sql})),
        ],
    )


def grade_tool_calls(server: ScriptedServer, run: AgentRun):
    async def go():
        async with open_chat_model(server) as model:
            return await Grader(judge_model=model).grade_case(tool_call_case(), [run])

    [grade] = asyncio.run(go())
    return grade


def test_an_llm_judge_argument_is_judged_end_to_end(server):
    server.script(answer(verdict(True, "The WHERE clause keeps 2023 orders.")))
    grade = grade_tool_calls(server, run_with_sql(SQL_2023))

    assert grade.status is GradeStatus.PASSED
    assert grade.message == "all 1 expected tool call(s) made"
    [judged] = grade.checks[0].details["judged_arguments"]
    assert judged["argument"] == "sql_query" and judged["value"] == SQL_2023
    assert judged["reasoning"] == "The WHERE clause keeps 2023 orders."
    # only the call whose name matches is judged, and the judge sees value and criterion
    [request] = server.requests
    system, prompt = sent(request)[0][1], sent(request)[-1][1]
    assert "argument" in system and '"passed"' in system
    assert SQL_2023 in prompt and "filters orders to 2023" in prompt


def test_an_llm_judge_argument_that_misses_the_criterion_fails_the_run(server):
    server.script(answer(verdict(False, "No date filter at all.")))
    grade = grade_tool_calls(server, run_with_sql("SELECT SUM(amount) FROM orders"))

    assert grade.status is GradeStatus.FAILED
    assert grade.message == (
        "expected tool call(s) not made as specified: execute_sql "
        "(called: list_tables, execute_sql)"
    )
    assert grade.checks[0].details["judged_arguments"][0]["passed"] is False


def test_an_llm_judge_argument_with_the_judge_down_is_an_error(server):
    server.set_script(repeat(error(503, "maintenance")))
    grade = grade_tool_calls(server, run_with_sql(SQL_2023))

    assert grade.status is GradeStatus.ERROR
    assert grade.message.startswith("tool-call judge unavailable: judge ")
    assert f"{server.protocol}:gpt-4.1" in grade.message and "HTTP 503" in grade.message
