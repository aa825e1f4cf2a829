"""Turns the data of one test file into a `Case`, collecting every problem instead of stopping."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import Any

from eval_pipeline.suite._case import (
    ArgumentMatcher,
    Case,
    Consistency,
    Evaluator,
    ExpectedToolCall,
    Message,
    Semantic,
    Tolerance,
    ToolCallAssertion,
)
from eval_pipeline.suite._checks import CHECKS
from eval_pipeline.suite._errors import Problem

#: The fields of a test file besides those of its grading checks (`CHECKS`), which come
#: after `comparison` when the fields are listed.
_CORE_KEYS = ("name", "prompt", "conversation", "sql", "database", "ordered", "comparison")
_LATER_KEYS = ("semantic", "k", "tags", "category", "difficulty", "notes")
#: A check whose name is a field of `Case` keeps its settings there (the built-ins, which the
#: agents and the pipeline read by name); any other in `Case.added_checks`.
_CASE_FIELDS = frozenset(f.name for f in dataclasses.fields(Case))
COMPARISON_KEYS = ("decimals", "rtol", "atol")
SEMANTIC_KEYS = ("variants", "seed")
#: Most warehouse variants of the semantic check: each is a DuckDB file and a re-run per test.
MAX_VARIANTS = 64
MATCH_TYPES = ("exact", "llm_judge", "any")
ASSERTION_TYPES = ("tool_call",)
#: Most attempts per test and model (`k`): each is a full agent run, so more is a typo.
MAX_ATTEMPTS = 100
#: Most runs of an attempt budget: more than any suite spends, and far inside the store's
#: 64-bit column (a budget of 10**23 runs stopped the command when it was written there).
MAX_BUDGET_RUNS = 1_000_000_000
#: Most runs of a consistency test: every pair is judged, so n runs cost n·(n−1)/2 judge calls.
MAX_CONSISTENCY_RUNS = 20
_SUBMISSION_VARS = ("submission_1", "submission_2")


def _type_name(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    for kind, name in (
        (bool, "a boolean"),
        (dict, "a mapping"),
        (list, "a list"),
        (str, "a string"),
    ):
        if isinstance(value, kind):
            return name
    return f"{value!r}"


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class FieldReader:
    """Reads fields of one source, remembering problems and the line each field is on."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.problems: list[Problem] = []

    def problem(self, field: str | None, message: str, line: int | None = None) -> None:
        self.problems.append(Problem(self.source, field, message, line))

    @staticmethod
    def line_of(container: Any, key: Any) -> int | None:
        if isinstance(container, dict):
            return getattr(container, "key_lines", {}).get(key, getattr(container, "line", None))
        if isinstance(container, list):
            lines = getattr(container, "item_lines", [])
            return lines[key] if isinstance(key, int) and key < len(lines) else None
        return None

    def mapping(
        self, container: Any, key: Any, field: str, allowed: tuple[str, ...]
    ) -> dict | None:
        value = container[key]
        if not isinstance(value, dict):
            self.problem(
                field, f"expected a mapping, got {_type_name(value)}", self.line_of(container, key)
            )
            return None
        for unknown in value:
            if unknown not in allowed:
                self.problem(
                    f"{field}.{unknown}",
                    f"unknown key; expected one of: {', '.join(allowed)}",
                    self.line_of(value, unknown),
                )
        return value

    def text(self, container: Any, key: Any, field: str, *, required: bool = False) -> str | None:
        if isinstance(container, dict) and key not in container:
            if required:
                self.problem(
                    field, "is required (a non-empty string)", getattr(container, "line", None)
                )
            return None
        value = container[key]
        if value is None and not required:
            return None
        if not isinstance(value, str) or not value.strip():
            got = "an empty string" if isinstance(value, str) else _type_name(value)
            self.problem(
                field, f"expected a non-empty string, got {got}", self.line_of(container, key)
            )
            return None
        return value

    def integer(
        self, container: Any, key: Any, field: str, *, minimum: int, maximum: int | None = None
    ) -> int | None:
        value = container[key]
        too_big = maximum is not None and isinstance(value, int) and value > maximum
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum or too_big:
            expected = (
                f"an integer from {minimum} to {maximum}"
                if maximum is not None
                else f"an integer ≥ {minimum}"
            )
            got = _short_repr(value) if isinstance(value, int | float | str) else _type_name(value)
            self.problem(field, f"expected {expected}, got {got}", self.line_of(container, key))
            return None
        return value

    def number(
        self, container: Any, key: Any, field: str, *, positive: bool = False
    ) -> float | None:
        """A finite number ≥ 0 (> 0 when `positive`): NaN or infinity would make every
        comparison with it pass or fail silently."""
        value = container[key]
        number = None
        if isinstance(value, int | float) and not isinstance(value, bool):
            try:
                number = float(value)
            except OverflowError:  # an integer too large for a float
                number = math.inf
        if number is None or not math.isfinite(number) or number < 0 or (positive and number == 0):
            got = _short_repr(value) if isinstance(value, int | float | str) else _type_name(value)
            expected = "a finite number > 0" if positive else "a finite number ≥ 0"
            self.problem(field, f"expected {expected}, got {got}", self.line_of(container, key))
            return None
        return number

    def choice(self, container: Any, key: Any, field: str, choices: tuple[str, ...]) -> str | None:
        """One of `choices`, as written; None (and a problem naming them) otherwise."""
        value = container[key]
        if value not in choices:
            expected = " or ".join(repr(choice) for choice in choices)
            self.problem(field, f"expected {expected}, got {value!r}", self.line_of(container, key))
            return None
        return value

    def boolean(self, container: Any, key: Any, field: str) -> bool | None:
        value = container[key]
        if not isinstance(value, bool):
            self.problem(
                field, f"expected true or false, got {value!r}", self.line_of(container, key)
            )
            return None
        return value

    def items(self, container: Any, key: Any, field: str) -> list[tuple[int, Any]]:
        value = container[key]
        if not isinstance(value, list):
            self.problem(
                field, f"expected a list, got {_type_name(value)}", self.line_of(container, key)
            )
            return []
        return list(enumerate(value))


def parse_case(
    data: Any, *, path: Path, relative_path: str, source: str
) -> tuple[Case | None, list[Problem]]:
    """Validate the data of one test file and build its `Case`.

    Args:
        data: the parsed YAML document (line-aware mappings give better messages).
        path: the file the data came from; its stem is the default test name.
        relative_path: the path below `cases/`, used for folder selection and reports.
        source: how problems name the origin (a file path, or `file.csv:row 3`).

    Returns:
        The case, or None, and every problem found (the case is None when there is any).
    """
    r = FieldReader(source)
    if not isinstance(data, dict):
        r.problem(None, f"a test file must be a mapping of fields, got {_type_name(data)}")
        return None, r.problems
    checks = CHECKS.all()
    case_keys = (*_CORE_KEYS, *(f for check in checks for f in check.fields), *_LATER_KEYS)
    for key in data:
        if key not in case_keys:
            r.problem(
                str(key),
                f"unknown field; expected one of: {', '.join(case_keys)}",
                r.line_of(data, key),
            )

    name = r.text(data, "name", "name") if "name" in data else path.stem
    if name is not None and (("\n" in name) or name != name.strip()):
        r.problem("name", "must be one line without surrounding spaces", r.line_of(data, "name"))

    messages = _messages(r, data)
    sql = r.text(data, "sql", "sql") if "sql" in data else None
    database = r.text(data, "database", "database") if "database" in data else None
    ordered = r.boolean(data, "ordered", "ordered") if "ordered" in data else None
    comparison = _comparison(r, data) if "comparison" in data else None
    declared: dict[str, Any] = {}
    for check in checks:
        if any(f in data for f in check.fields):
            spec = check.parse(r, data)
            if spec is not None:
                declared[check.name] = spec
    semantic = parse_semantic(r, data, "semantic") if "semantic" in data else None
    k = r.integer(data, "k", "k", minimum=1, maximum=MAX_ATTEMPTS) if "k" in data else None
    tags = _tags(r, data) if "tags" in data else ()
    category = r.text(data, "category", "category") if "category" in data else None
    difficulty = r.text(data, "difficulty", "difficulty") if "difficulty" in data else None
    notes = r.text(data, "notes", "notes") if "notes" in data else None

    if r.problems or name is None or messages is None:
        return None, r.problems
    case = Case(
        name=name,
        path=path,
        relative_path=relative_path,
        messages=messages,
        sql=sql,
        database=database,
        ordered=ordered,
        comparison=comparison,
        semantic=semantic,
        k=k,
        tags=tags,
        category=category,
        difficulty=difficulty,
        notes=notes,
        added_checks=tuple((n, s) for n, s in declared.items() if n not in _CASE_FIELDS),
        **{n: s for n, s in declared.items() if n in _CASE_FIELDS},
    )
    return case, []


def _messages(r: FieldReader, data: dict) -> tuple[Message, ...] | None:
    has_prompt, has_conversation = "prompt" in data, "conversation" in data
    if has_prompt and has_conversation:
        r.problem(
            "prompt", "give either `prompt` or `conversation`, not both", r.line_of(data, "prompt")
        )
        return None
    if not has_prompt and not has_conversation:
        r.problem(
            "prompt",
            "is required: the question for the agent (or a `conversation` ending with a user message)",
            getattr(data, "line", None),
        )
        return None
    if has_prompt:
        prompt = r.text(data, "prompt", "prompt", required=True)
        return (Message("user", prompt),) if prompt is not None else None

    turns = r.items(data, "conversation", "conversation")
    if not turns and isinstance(data["conversation"], list):
        r.problem("conversation", "must not be empty", r.line_of(data, "conversation"))
    messages: list[Message] = []
    conversation = data["conversation"]
    for i, turn in turns:
        field = f"conversation[{i}]"
        if r.mapping(conversation, i, field, ("role", "content")) is None:
            continue
        role = turn.get("role")
        if role not in ("user", "assistant"):
            r.problem(
                f"{field}.role",
                f"expected 'user' or 'assistant', got {role!r}",
                r.line_of(turn, "role"),
            )
        content = r.text(turn, "content", f"{field}.content", required=True)
        if role in ("user", "assistant") and content is not None:
            messages.append(Message(role, content))
    if messages and messages[-1].role != "user" and len(messages) == len(turns):
        r.problem(
            f"conversation[{len(turns) - 1}]",
            "the conversation must end with a user message (the agent answers the last user turn)",
            r.line_of(conversation, len(turns) - 1),
        )
        return None
    return tuple(messages) if messages and len(messages) == len(turns) else None


def _comparison(r: FieldReader, data: dict) -> Tolerance | None:
    value = r.mapping(data, "comparison", "comparison", COMPARISON_KEYS)
    if value is None:
        return None
    defaults = Tolerance()
    decimals = (
        r.integer(value, "decimals", "comparison.decimals", minimum=0)
        if "decimals" in value
        else defaults.decimals
    )
    rtol = r.number(value, "rtol", "comparison.rtol") if "rtol" in value else defaults.rtol
    atol = r.number(value, "atol", "comparison.atol") if "atol" in value else defaults.atol
    if decimals is None or rtol is None or atol is None:
        return None
    return Tolerance(decimals=decimals, rtol=rtol, atol=atol)


def parse_assertions(r: FieldReader, data: dict) -> tuple[ToolCallAssertion, ...]:
    found: list[ToolCallAssertion] = []
    assertions = data["assertions"]
    for i, item in r.items(data, "assertions", "assertions"):
        field = f"assertions[{i}]"
        if r.mapping(assertions, i, field, ("type", "tool", "args", "min_count")) is None:
            continue
        kind = item.get("type")
        if kind not in ASSERTION_TYPES:
            r.problem(
                f"{field}.type",
                f"unknown assertion type {kind!r}; expected one of: {', '.join(ASSERTION_TYPES)}",
                r.line_of(item, "type") if "type" in item else r.line_of(assertions, i),
            )
            continue
        tool = r.text(item, "tool", f"{field}.tool", required=True)
        args = item.get("args")
        if args is not None and not isinstance(args, dict):
            r.problem(
                f"{field}.args",
                f"expected a mapping of argument values, got {_type_name(args)}",
                r.line_of(item, "args"),
            )
            continue
        min_count = (
            r.integer(item, "min_count", f"{field}.min_count", minimum=1)
            if "min_count" in item
            else 1
        )
        if tool is not None and min_count is not None:
            found.append(ToolCallAssertion(tool=tool, args=_plain(args), min_count=min_count))
    return tuple(found)


def parse_tool_calls(r: FieldReader, data: dict) -> tuple[ExpectedToolCall, ...]:
    found: list[ExpectedToolCall] = []
    calls = data["tool_calls"]
    for i, item in r.items(data, "tool_calls", "tool_calls"):
        field = f"tool_calls[{i}]"
        if r.mapping(calls, i, field, ("tool", "arguments", "accept_any_arguments")) is None:
            continue
        tool = r.text(item, "tool", f"{field}.tool", required=True)
        accept_any = (
            r.boolean(item, "accept_any_arguments", f"{field}.accept_any_arguments")
            if "accept_any_arguments" in item
            else False
        )
        matchers: dict[str, ArgumentMatcher] = {}
        arguments = item.get("arguments")
        if arguments is not None and not isinstance(arguments, dict):
            r.problem(
                f"{field}.arguments",
                f"expected a mapping of argument matchers, got {_type_name(arguments)}",
                r.line_of(item, "arguments"),
            )
        elif arguments:
            for arg_name, spec in arguments.items():
                matcher = _matcher(r, arguments, arg_name, f"{field}.arguments.{arg_name}", spec)
                if matcher is not None:
                    matchers[str(arg_name)] = matcher
        if tool is not None and accept_any is not None:
            found.append(
                ExpectedToolCall(tool=tool, arguments=matchers, accept_any_arguments=accept_any)
            )
    return tuple(found)


def _matcher(
    r: FieldReader, arguments: dict, key: Any, field: str, spec: Any
) -> ArgumentMatcher | None:
    if r.mapping(arguments, key, field, ("match_type", "value", "criteria")) is None:
        return None
    match_type = spec.get("match_type")
    line = r.line_of(spec, "match_type") if "match_type" in spec else r.line_of(arguments, key)
    if match_type not in MATCH_TYPES:
        r.problem(
            f"{field}.match_type",
            f"unknown matcher {match_type!r}; expected one of: {', '.join(MATCH_TYPES)}",
            line,
        )
        return None
    if match_type == "exact" and "value" not in spec:
        r.problem(f"{field}.value", "an `exact` matcher needs the expected `value`", line)
        return None
    if match_type == "llm_judge":
        criteria = r.text(spec, "criteria", f"{field}.criteria", required=True)
        return ArgumentMatcher("llm_judge", criteria=criteria) if criteria else None
    if match_type == "exact":
        return ArgumentMatcher("exact", value=_plain(spec["value"]))
    return ArgumentMatcher("any")


def parse_evaluators(r: FieldReader, data: dict) -> tuple[Evaluator, ...]:
    found: list[Evaluator] = []
    seen: set[str] = set()
    evaluators = data["evaluators"]
    for i, item in r.items(data, "evaluators", "evaluators"):
        field = f"evaluators[{i}]"
        if r.mapping(evaluators, i, field, ("name", "criteria")) is None:
            continue
        name = r.text(item, "name", f"{field}.name", required=True)
        criteria = r.text(item, "criteria", f"{field}.criteria", required=True)
        if name is not None and name in seen:
            r.problem(
                f"{field}.name", f"evaluator {name!r} is listed twice", r.line_of(item, "name")
            )
            continue
        if name is not None and criteria is not None:
            seen.add(name)
            found.append(Evaluator(name=name, criteria=criteria))
    return tuple(found)


def parse_consistency(r: FieldReader, data: dict) -> Consistency | None:
    value = r.mapping(data, "consistency", "consistency", ("n", "prompt", "min_accuracy"))
    if value is None:
        return None
    n = (
        r.integer(value, "n", "consistency.n", minimum=2, maximum=MAX_CONSISTENCY_RUNS)
        if "n" in value
        else Consistency.n
    )
    min_accuracy = (
        r.number(value, "min_accuracy", "consistency.min_accuracy")
        if "min_accuracy" in value
        else Consistency.min_accuracy
    )
    if min_accuracy is not None and min_accuracy > 1:
        r.problem(
            "consistency.min_accuracy", f"expected a fraction between 0 and 1, got {min_accuracy}"
        )
        return None
    prompt = (
        r.text(value, "prompt", "consistency.prompt") if value.get("prompt") is not None else None
    )
    if prompt is not None:
        missing = [v for v in _SUBMISSION_VARS if not re.search(r"{{\s*" + v + r"\s*}}", prompt)]
        if missing:
            r.problem(
                "consistency.prompt",
                "a custom consistency prompt must contain "
                + " and ".join(f"{{{{ {v} }}}}" for v in missing),
                r.line_of(value, "prompt"),
            )
            return None
    if n is None or min_accuracy is None:
        return None
    return Consistency(n=n, prompt=prompt, min_accuracy=min_accuracy)


def parse_semantic(r: FieldReader, container: dict, field: str) -> Semantic | None:
    """`semantic: {variants: 8, seed: 0}` (a test's, or the `test:` block's default)."""
    value = r.mapping(container, "semantic", field, SEMANTIC_KEYS)
    if value is None:
        return None
    defaults = Semantic()
    variants = (
        r.integer(value, "variants", f"{field}.variants", minimum=1, maximum=MAX_VARIANTS)
        if "variants" in value
        else defaults.variants
    )
    seed = r.integer(value, "seed", f"{field}.seed", minimum=0) if "seed" in value else 0
    if variants is None or seed is None:
        return None
    return Semantic(variants=variants, seed=seed)


def _tags(r: FieldReader, data: dict) -> tuple[str, ...]:
    tags: list[str] = []
    for i, tag in r.items(data, "tags", "tags"):
        if not isinstance(tag, str) or not tag.strip():
            r.problem(
                f"tags[{i}]",
                f"expected a non-empty string, got {_type_name(tag)}",
                r.line_of(data["tags"], i),
            )
        else:
            tags.append(tag.strip())
    return tuple(tags)


def _plain(value: Any) -> Any:
    """Strip the line-number wrappers so values compare and hash as plain data."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
