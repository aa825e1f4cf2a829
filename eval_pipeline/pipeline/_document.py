"""The results document as a type: what one evaluation of a day reports, and its JSON rendering.

`build_results` builds a `ResultsDocument` once; nothing changes it after (a new document comes
from `with_evaluation` or `labelled`). The CLI's tables, JUnit and CSV, `export` and the
viewer's day pages read its fields; the results file and `eval-pipeline test --format json` are
its JSON rendering (`to_json`), nao 0.3.29's keys with nao's value kinds, plus ours.

The document holds, in the order the JSON gives them:

* `timestamp`, `run_date`: when it was built, and the evaluated day;
* `results`: one `ResultEntry` per run (test × model × attempt), its `details` a
  `ResultDetails` (the reply, the data compared and their diff, nao's tool calls, our checks,
  and for a run of nao's agent the verdict nao's own comparison gave it);
* `summary`: a `Summary` of every run; `by_model`: a `ModelEntry` per model, ranked, with its
  pass@k and its pass rate's 95% interval;
* `pass_metrics` (nao's `PassMetrics`), `pass_metrics_by_test` (ours: `CaseMetrics` per test
  and model), `judge_noise` (with `--rejudge-samples`: `JudgeNoise` per test and model);
* `comparisons`: a `ModelComparison` per pair of models;
* after an evaluation: `executed_runs`, `reused_runs` and the gate's `Threshold`.

Payloads that are JSON as the grading wrote them (a check's details, the data and diff, a tool
call's arguments and result) stay JSON values (`JsonValue`).
"""

from __future__ import annotations

import functools
import json
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, is_dataclass, replace
from datetime import date, datetime
from typing import Any

from eval_pipeline.grading import CaseMetrics, JudgeNoise
from eval_pipeline.pipeline._budget_outcome import BudgetOutcome
from eval_pipeline.pipeline._comparisons import detectable_difference
from eval_pipeline.suite import ThresholdMode

#: A value as JSON holds it (dicts, lists, text, numbers, booleans, null), kept as it came.
JsonValue = Any

# The field's key is left out of the JSON when its value is None or empty, as it always was.
_OMITTED_WHEN_EMPTY = {"omitted_when_empty": True}
# nao's `attempt` counts from 1; the document (and the store) count from 0.
_COUNTED_FROM_ONE = {"rendered": lambda attempt: attempt + 1}


@dataclass(frozen=True)
class ResultDetails:
    """What a run said and what it was compared with: nao's `details` keys, then ours
    (`checks`, `error`, what the data check found beyond the comparison, and nao's own
    verdict of a run of nao's agent)."""

    response_text: str | None
    actual_data: JsonValue
    expected_data: JsonValue
    diff: JsonValue
    reference_sql: str | None
    verification_sql: str | None
    #: nao's: the text of the data comparison's differences (null when the data matched or
    #: was not compared), which nao's viewer shows under "Diff".
    comparison: str | None
    #: nao's shape: `toolName`, `toolCallId`, `args`, `result` (an `execute_sql` result is
    #: the query's `columns`, `data`, `row_count`, `dialect`, `id`), our `error`, `duration_ms`.
    tool_calls: tuple[dict[str, JsonValue], ...]
    checks: tuple[dict[str, JsonValue], ...]
    error: str | None
    reference_warnings: tuple[JsonValue, ...]
    semantic: JsonValue
    failure_kind: str | None
    #: The data check's tolerances (`rtol`, `atol`, `decimals`); null without a data check.
    tolerances: JsonValue
    #: A run of nao's agent (`nao:` models): the verdict nao's own comparison gives nao's
    #: verification (`passed`, `message`, `sql`, `error`); null for other agents. `passed`
    #: is null, and `message` says why, when nao's comparison could not be computed.
    nao_verdict: JsonValue


#: The fields of `ResultDetails` that hold tuples (JSON gives lists).
_TUPLE_DETAILS = ("tool_calls", "checks", "reference_warnings")


def details_from_json(value: Mapping[str, Any]) -> ResultDetails:
    """`ResultDetails` from its JSON (`_json` of it)."""
    parts = dict(value)
    for name in _TUPLE_DETAILS:
        parts[name] = tuple(parts.get(name) or ())
    return ResultDetails(**parts)


class DetailsSpill:
    """The details of a document's results kept in a temporary file rather than in memory,
    each as the JSON the results file gives it: a document keeps a small entry per run, and
    its memory does not grow with the size of what the runs said. The file has no name (it
    is gone once closed, or once the process ends), and is read back one result at a time
    (`SpilledDetails`)."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile()  # noqa: SIM115  # open as long as the document lives
        self._end = 0
        self._lock = threading.Lock()  # a document may be read from several threads
        self._last: tuple[int, ResultDetails] | None = None

    def keep(self, details: ResultDetails) -> SpilledDetails:
        """`details` written to the file; what reads them back."""
        data = _dumps(_json(details)).encode()
        with self._lock:
            self._file.seek(self._end)
            self._file.write(data)
            offset, self._end = self._end, self._end + len(data)
        return SpilledDetails(self, offset, len(data))

    def text(self, offset: int, length: int) -> str:
        with self._lock:
            self._file.seek(offset)
            return self._file.read(length).decode()

    def load(self, offset: int, length: int) -> ResultDetails:
        last = self._last
        if last is not None and last[0] == offset:
            return last[1]  # a reader asks for several fields of one result in a row
        details = details_from_json(json.loads(self.text(offset, length)))
        self._last = (offset, details)
        return details


class SpilledDetails:
    """A result's `ResultDetails`, read back from its document's `DetailsSpill` when a field
    is read: it answers as the details do (`entry.details.diff`)."""

    __slots__ = ("_length", "_offset", "_spill")

    def __init__(self, spill: DetailsSpill, offset: int, length: int) -> None:
        self._spill, self._offset, self._length = spill, offset, length

    def text(self) -> str:
        """The details as the results file gives them: one line of JSON."""
        return self._spill.text(self._offset, self._length)

    def load(self) -> ResultDetails:
        return self._spill.load(self._offset, self._length)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.load(), name)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SpilledDetails):
            other = other.load()
        return self.load() == other

    __hash__ = None  # type: ignore[assignment]  # as ResultDetails: it holds dicts

    def __repr__(self) -> str:
        return repr(self.load())

    def __reduce__(self) -> tuple[Any, ...]:
        # A copy elsewhere (another process) carries the details themselves.
        return (details_from_json, (json.loads(self.text()),))


@dataclass(frozen=True)
class ResultEntry:
    """One run: nao's keys (`attempt` counts from 1 in the JSON, as nao's; an unknown `cost`
    is null, as nao 0.3.29 writes it) and ours (`status`, `run_key`, `verified`, `cost_usd`,
    `run_date`)."""

    name: str
    model: str
    passed: bool
    status: str  # passed / failed / error
    attempt: int = field(metadata=_COUNTED_FROM_ONE)  # from 0 here, as the store counts
    #: The stored run's key: importing the file into a store that has the run adds nothing.
    run_key: str | None
    message: str
    verified: bool
    tokens: int
    cost: float | None
    cost_usd: float | None
    duration_ms: int
    tool_call_count: int
    #: nao's meaning: why the run could not be graded (set for an `error` status only).
    error: str | None
    run_date: date
    #: With `--rejudge-samples`: the run's verdicts, and how many agree with their majority
    #: (both left out of the JSON when the run was judged once).
    judge_samples: tuple[bool, ...] | None = field(metadata=_OMITTED_WHEN_EMPTY)
    judge_self_agreement: float | None = field(metadata=_OMITTED_WHEN_EMPTY)
    #: Last: the results file splices its JSON in as the spill holds it (`SpilledDetails`).
    details: ResultDetails | SpilledDetails


@dataclass(frozen=True)
class Summary:
    """Every run of the document. `failed` is nao's: every run that did not pass (`errors`
    says how many of those were infrastructure errors); `total_cost` is nao's number (0 when
    unknown), `total_cost_usd` ours (null when no run had a price)."""

    total: int
    passed: int
    failed: int
    errors: int
    unverified: int
    pass_rate: float  # percent
    total_tokens: int
    total_cost: float
    total_cost_usd: float | None
    cost_complete: bool
    total_duration_ms: int
    total_duration_s: float
    total_tool_calls: int
    avg_duration_ms: int
    avg_tool_calls: float


@dataclass(frozen=True)
class ModelEntry:
    """One model over its runs (nao's `by_model[]` keys and ours), ranked by pass rate, then
    cost; `pass_rate_ci95` is [low, high] in percent, the unit of `pass_rate`."""

    model: str
    total: int
    passed: int
    failed: int
    errors: int
    pass_rate: float  # percent
    total_tokens: int
    total_cost: float
    total_cost_usd: float | None
    cost_complete: bool
    total_duration_ms: int
    avg_duration_ms: int
    p50_duration_ms: int
    p95_duration_ms: int
    total_tool_calls: int
    avg_tool_calls: float
    k: int
    pass_at_1: float
    pass_at_k: float
    pass_hat_k: float
    pass_rate_ci95: tuple[float, float]


@dataclass(frozen=True)
class PassAggregate:
    """Means over (test, model) pairs of their pass@1, pass@k and pass^k."""

    pass_at_1: float
    pass_at_k: float
    pass_hat_k: float


@dataclass(frozen=True)
class TestPassMetrics:
    """nao's `pass_metrics.by_test[]`: one (test, model) pair, rounded as nao writes it."""

    __test__ = False  # a name pytest would otherwise collect

    name: str
    model: str
    k: int
    pass_at_1: float
    pass_at_k: float
    pass_hat_k: float  # 1.0 or 0.0


@dataclass(frozen=True)
class PassMetrics:
    """nao's `pass_metrics`: `k` is the most attempts any (test, model) pair had."""

    k: int
    aggregate: PassAggregate
    by_test: tuple[TestPassMetrics, ...]


@dataclass(frozen=True)
class ModelComparison:
    """Is the difference real? One pair of models on their shared tests (`model_a` the better
    ranked), its exact paired test's p-value and the Holm-adjusted one across the pairs."""

    model_a: str
    model_b: str
    tests: int
    a_only: int
    b_only: int
    p_value: float
    p_adjusted: float
    significant: bool


@dataclass(frozen=True)
class Threshold:
    """The gate of an evaluation: `passed` is the command's exit, with or without a minimum.
    Runs that ended as `error` fail it (exit 3) unless `allow_errors`, where they count as
    not passed; `passed` is then the accuracy's verdict alone. The keys before `errors` are
    the ones readers of older files know: new ones only come after them."""

    min_accuracy: float | None
    mode: ThresholdMode
    accuracy: float
    passed: bool
    #: Runs that ended as `error` (the provider, an agent endpoint, a timeout, the judge).
    errors: int = 0
    allow_errors: bool = False


@dataclass(frozen=True)
class ResultsDocument:
    """One evaluated day of some models (see the module's docstring for its parts)."""

    timestamp: datetime
    run_date: date
    results: tuple[ResultEntry, ...]
    summary: Summary
    by_model: tuple[ModelEntry, ...]
    pass_metrics: PassMetrics
    pass_metrics_by_test: tuple[CaseMetrics, ...]
    judge_noise: tuple[JudgeNoise, ...] = field(metadata=_OMITTED_WHEN_EMPTY)
    comparisons: tuple[ModelComparison, ...]
    executed_runs: int | None = field(default=None, metadata=_OMITTED_WHEN_EMPTY)
    reused_runs: int | None = field(default=None, metadata=_OMITTED_WHEN_EMPTY)
    threshold: Threshold | None = field(default=None, metadata=_OMITTED_WHEN_EMPTY)
    #: What an attempt budget spent and decided (`--budget`); its models keep our ids.
    budget: BudgetOutcome | None = field(
        default=None,
        metadata={"omitted_when_empty": True, "rendered": lambda b: b.to_json()},
    )

    def with_evaluation(
        self,
        *,
        executed_runs: int,
        reused_runs: int,
        threshold: Threshold,
        budget: BudgetOutcome | None = None,
    ) -> ResultsDocument:
        """This document with what the evaluation ran and reused, its gate and its budget."""
        return replace(
            self,
            executed_runs=executed_runs,
            reused_runs=reused_runs,
            threshold=threshold,
            budget=budget,
        )

    def labelled(self, label: Callable[[str], str]) -> ResultsDocument:
        """This document with the model of every result, model entry and pass metric in the
        user's spelling (nao's `openaiCompatible/vllm:qwen3` for our `vllm:qwen3`), as nao
        writes `model`; comparisons and judge noise keep our ids."""

        def relabel(entries: Sequence[Any]) -> tuple[Any, ...]:
            return tuple(replace(entry, model=label(entry.model)) for entry in entries)

        return replace(
            self,
            results=relabel(self.results),
            by_model=relabel(self.by_model),
            pass_metrics=replace(self.pass_metrics, by_test=relabel(self.pass_metrics.by_test)),
            pass_metrics_by_test=relabel(self.pass_metrics_by_test),
        )

    @property
    def models(self) -> list[str]:
        """The document's models, ranked."""
        return [entry.model for entry in self.by_model]

    def detectable_difference(self) -> str | None:
        """The minimum-detectable-difference sentence of the comparisons (None: no pair)."""
        return detectable_difference([_json(c) for c in self.comparisons])

    def to_json(self, *, results: bool = True) -> dict[str, Any]:
        """The results file's JSON: every key in the order the file gives it (`results`
        False: its list left empty, for a writer that renders each result, `result_line`)."""
        return _json(self if results else replace(self, results=()))


def _json(value: Any) -> Any:
    """A part of the document as JSON values, keys in field order; dates as ISO text."""
    if value is None or isinstance(value, str | int | float | dict | list):
        return value  # most of a document: nothing to render
    if isinstance(value, tuple):
        return [_json(item) for item in value]
    if isinstance(value, CaseMetrics):
        return {**asdict(value), "flaky": value.flaky}
    if isinstance(value, JudgeNoise):
        return value.to_row()
    if isinstance(value, SpilledDetails):
        return json.loads(value.text())
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, type) or not is_dataclass(value):
        return value
    return _json_object(value)


def _json_object(value: Any, *, leaving_out: str | None = None) -> dict[str, Any]:
    rendered = {}
    for name, omitted_when_empty, render in _json_fields(type(value)):
        if name == leaving_out:
            continue
        item = getattr(value, name)
        if omitted_when_empty and (item is None or item == ()):
            continue
        if render is not None:
            item = render(item)
        rendered[name] = _json(item)
    return rendered


def result_line(entry: ResultEntry, redacted: Callable[[Any], Any] | None = None) -> str:
    """One result as the results file gives it, one line of JSON; `redacted` rewrites its
    JSON values (secrets). Spilled details are spliced in as their spill holds them."""
    redact = redacted or (lambda value: value)
    details = entry.details
    if isinstance(details, SpilledDetails) and redacted is None:
        tail = details.text()
    else:
        tail = _dumps(redact(_json(details)))
    head = _dumps(redact(_json_object(entry, leaving_out="details")))
    return f'{head[:-1]}, "details": {tail}}}'


def _dumps(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


@functools.cache
def _json_fields(kind: type) -> tuple[tuple[str, bool, Callable[[Any], Any] | None], ...]:
    """Each field of a document's dataclass as `_json` writes it: its name, whether it is
    left out when empty, and how it is rendered. Worked out once per class: `fields` and
    its metadata, asked of every run of a large document, took a tenth of a second."""
    return tuple(
        (part.name, bool(part.metadata.get("omitted_when_empty")), part.metadata.get("rendered"))
        for part in fields(kind)
    )


def model_comparisons(comparisons: Sequence[Mapping[str, Any]]) -> tuple[ModelComparison, ...]:
    """`comparisons_of`'s records as the document's pairs."""
    return tuple(ModelComparison(**c) for c in comparisons)
