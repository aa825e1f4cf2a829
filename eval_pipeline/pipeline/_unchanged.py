"""Skipping what did not change: the one owner of that decision, at each of its three levels.

1. The whole command. `LastEvaluation` compares a digest of everything an evaluation reads
   besides the store (`_inputs`: the tests, the context, the configuration, the warehouse
   files, the request, today, the code, the Dagster home) and the names of the day's files in
   the store (`store.day_state`) with what the last evaluation that graded every planned run
   left. `pipeline/_evaluate.py::evaluate` asks it first: when both match, the results come
   from the store and Dagster is not started.
2. Each model's partition. `LastPartition` keeps, per model and day, a digest of what its
   last runs, grades and summary read (the data versions of the day's inputs as that
   command's stages wrote them, the grading code, the package's code) and its runs' summary;
   `partition_unchanged` (here) compares those runs (their answerer, their count against
   the planned runs, no error, none carried over), the store's grades and the request's
   options. When both say unchanged, the partition's stages are skipped (and so is its
   Dagster run).
3. Each run. Inside a partition's run, `pipeline/_runs.py::_reusable` keeps the stored
   completed runs by key (the case's content, its input, model, context, attempt and day);
   `run_partition` reuses one made by the same answerer (`answerer_identity`) instead of
   asking the model again.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from pathlib import Path

import eval_pipeline
from eval_pipeline.agents import answerer_identity
from eval_pipeline.grading import (
    PROMPTS_VERSION,
    GradeStatus,
    any_may_vary_within_day,
    grade_retried,
    grading_code,
)
from eval_pipeline.pipeline._evaluation import EvaluationRequest, today
from eval_pipeline.pipeline._runs import plan_requests
from eval_pipeline.store import (
    StateFolder,
    awaiting_rerun,
    day_state,
    decode_json_rows,
    read_latest,
)
from eval_pipeline.suite import Suite, SuiteConfig, load_agent_context

__all__ = [
    "LastEvaluation",
    "LastPartition",
    "grades_complete",
    "partition_unchanged",
    "planned_runs",
]

# Kept in the Dagster home: a new (or wiped) instance has none, so its first evaluation
# records its runs there, as the UI should show them.
STAMP_FILE = "eval_pipeline_last_evaluation.json"


def planned_runs(
    suite: Suite,
    model: str,
    k: int,
    select: Sequence[str] = (),
    attempts: Mapping[str, int] | None = None,
) -> int:
    """How many runs an evaluation of the model holds: every selected test (all by default)
    times its attempts (`attempts`: where an attempt budget gave a test more)."""
    selected = suite.select(list(select) or None)
    return len(plan_requests(selected, model, date.min, "", k=k, attempts=attempts))


def grades_complete(
    layout: StateFolder,
    model: str,
    run_date: date,
    planned: int,
    names: Sequence[str] | None = None,
) -> bool:
    """The store holds the partition's grade for each planned run of the tests `names` (all
    by default), none that the next grading would make again though nothing changed
    (`grade_retried`: the run failed, or the judge did not answer). A judge's answer without
    a verdict is its answer: kept, like the error grade it made, until `--rejudge`."""
    grades = read_latest(layout, "grades", model=model, run_date=run_date)
    if names is not None:
        wanted = set(names)
        grades = [grade for grade in grades if grade["name"] in wanted]
    if len(grades) != planned:
        return False
    # Only an error grade can be retried: the others' checks are not decoded.
    errors = [grade for grade in grades if grade["status"] == GradeStatus.ERROR]
    decoded = decode_json_rows("grades", errors)
    return not any(grade_retried(grade["status"], grade["checks"]) for grade in decoded)


def _asks_for_new(request: EvaluationRequest) -> bool:
    """The request asks for runs or verdicts made again whatever is stored (--no-cache,
    --record, --rejudge, --rejudge-samples)."""
    return request.no_cache or request.recording or request.rejudge or request.rejudge_samples > 1


def partition_unchanged(
    request: EvaluationRequest,
    config: SuiteConfig,
    model: str,
    planned: int,
    *,
    last_runs: Mapping[str, object] | None,
) -> bool:
    """Whether the model's partition of the request's day would reuse every stored run and
    run nothing, given what the orchestrator knows of it.

    That holds when the model answers as it did (the same endpoint, request settings and
    agent: `answerer_identity`), the last runs materialization holds a completed run for
    every planned one (none carried from an earlier selection, none in error: errors are
    retried), the store still holds a grade for each, none to make again (`grades_complete`),
    no file of the partition was set aside as damaged since its last
    write (`awaiting_rerun`: the stages rebuild it), and the request asks for nothing new (no --no-cache, --record, --rejudge or --rejudge-samples).

    Args:
        planned: the partition's planned runs, every test's (`planned_runs` without a
            selection): a partition is unchanged only as a whole.
        last_runs: the metadata of the partition's latest runs materialization when its
            runs, grades and summary read the inputs they would read now (`LastPartition`);
            None when they did not, or never were materialized.
    """
    if _asks_for_new(request) or last_runs is None:
        return False
    if last_runs.get("errors") != 0 or last_runs.get("carried_over") != 0:
        return False
    if last_runs.get("answerer") != answerer_identity(config, model):
        return False
    layout = StateFolder.of(config)
    if awaiting_rerun(layout, run_date=request.run_date, models=[model]):
        return False  # a file of the partition was set aside as damaged: rebuild it
    return last_runs.get("runs") == planned and grades_complete(
        layout, model, request.run_date, planned
    )


def _file_identity(path: Path) -> list[int] | None:
    """What changes when a file is written or replaced (size, times, inode); None: absent."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]


def _code_identity() -> list[object]:
    """The package's version and its source files' identity: an edited checkout (an editable
    install) or a reinstall of another commit under the same version is other code."""
    package = Path(eval_pipeline.__file__).parent
    newest, count = 0, 0
    for folder, _, names in os.walk(package):
        for name in names:
            if name.endswith(".py"):
                newest = max(newest, os.stat(os.path.join(folder, name)).st_mtime_ns)
                count += 1
    return [eval_pipeline.__version__, PROMPTS_VERSION, newest, count]


def _inputs(suite: Suite, request: EvaluationRequest, home: Path) -> str | None:
    """A digest of everything an evaluation's outcome depends on besides the store, or None
    when the request must run whatever the store holds.

    It covers what the pipeline's data versions cover and more: every field of every test
    (tags and notes too: the test_cases table shows them), the agent's context, every setting
    of the configuration (the judge among them), the warehouse files, the request (models,
    day, attempts, selection), today's date, the package's code and judge prompts, the
    grading code with any check added from outside the package, and the Dagster instance
    (`home`).

    A DuckDB file answers from itself alone (the sandbox turns off file and URL access, so a
    view over a file outside it fails), so its identity and its write-ahead log's stand for
    its data. A database on a server changes with nothing here to look at, and a reference
    calling a function DuckDB does not declare consistent (the clock, randomness, a setting)
    or one it cannot classify may answer otherwise within the day (`any_may_vary_within_day`):
    an evaluation with either always runs its references.
    """
    if _asks_for_new(request):
        return None
    config = suite.config
    files = []
    for database in config.databases:
        if database.url is not None or database.path is None or not database.path.is_file():
            return None
        wal = database.path.with_name(database.path.name + ".wal")
        files.append([str(database.path), _file_identity(database.path), _file_identity(wal)])
    if any_may_vary_within_day(case.sql for case in suite.cases if case.sql is not None):
        return None
    payload = [
        _code_identity(),
        grading_code(),  # checks added from outside the package included
        str(home),
        today().isoformat(),
        repr(tuple(suite.cases)),
        load_agent_context(config).hash,
        repr(config),
        files,
        [list(request.models), request.run_date.isoformat(), request.k, list(request.select)],
        [repr(request.budget), list(request.attempts)],
    ]
    return hashlib.sha256(json.dumps(payload, default=str).encode()).hexdigest()


class LastEvaluation:
    """What the last evaluation that left every planned run of its models graded saw: its
    inputs' digest, and the store's files of its day as it left them (`store.day_state`).

    When both are the same now, evaluating again would run nothing and rewrite nothing:
    the CLI writes its results from the store without starting Dagster. Any other writer
    (another command, the UI, a schedule, another machine on a bucket) adds a file to the
    day's partitions and so ends the match; so does any edit to the inputs.

    An evaluation calls `forget` before it writes anything, `capture` once the warehouse is
    built (before it reads an input) and `save` after its last write.
    """

    def __init__(self, suite: Suite, request: EvaluationRequest, home: Path) -> None:
        self._suite = suite
        self._request = request
        self._home = home
        self._path = home / STAMP_FILE
        self._layout = StateFolder.of(suite.config)
        self._captured: str | None = None

    def _all_graded(self) -> bool:
        """Every model's partition holds a grade for each planned run of the selected tests
        (all tests without a selection), none to make again (`grades_complete`): a selection is decided by its own
        runs, whatever the other tests' are."""
        run_date, select = self._request.run_date, self._request.select
        names = [case.name for case in self._suite.select(list(select))] if select else None
        return all(
            grades_complete(self._layout, m, run_date, self._planned(m), names)
            for m in self._request.models
        )

    def reused(self) -> int | None:
        """The stored runs an evaluation would reuse, all of them and nothing else, when the
        inputs and the store are as the last complete evaluation left them; else None."""
        try:  # no record (a first evaluation): nothing to compare the inputs with
            stamp = json.loads(self._path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(stamp, dict):
            return None
        inputs = _inputs(self._suite, self._request, self._home)
        run_date, models = self._request.run_date, self._request.models
        if inputs is None or stamp.get("inputs") != inputs:
            return None
        try:
            if stamp.get("store") != day_state(self._layout, models, run_date):
                return None
            if not self._all_graded():
                return None
        except Exception:  # any failure here means "run": the pipeline reads the store
            return None  # again and says what failed, naming the stage
        return sum(self._planned(m) for m in models)

    def _planned(self, model: str) -> int:
        request = self._request
        k = request.k or self._suite.config.test.k
        return planned_runs(self._suite, model, k, request.select, request.attempts_of(model))

    def capture(self) -> None:
        """Take the inputs as the evaluation is about to read them."""
        self._captured = _inputs(self._suite, self._request, self._home)

    def save(self) -> None:
        """Record that the evaluation completed with every planned run graded, for the inputs
        `capture` took (none taken: nothing is recorded). Best effort: when the store cannot
        be listed or the record written, there is no record and the next command runs."""
        try:
            stamp = self._stamp()
            if stamp is None:
                self.forget()
                return
            partial = self._path.with_name(f".{self._path.name}.{os.getpid()}")
            partial.write_text(json.dumps(stamp, indent=2), encoding="utf-8")
            partial.replace(self._path)
        except Exception:  # the evaluation is done; without a record the next command
            self.forget()  # runs the pipeline, which reports any failure

    def _stamp(self) -> dict[str, object] | None:
        if self._captured is None:
            return None
        if not self._all_graded():
            return None
        run_date = self._request.run_date
        return {
            "inputs": self._captured,
            "store": day_state(self._layout, self._request.models, run_date),
            "day": run_date.isoformat(),
            "models": list(self._request.models),
            "saved_at": datetime.now(UTC).isoformat(),
        }

    def forget(self) -> None:
        """The evaluation left something to do (an error, a run not graded): the next one runs."""
        self._path.unlink(missing_ok=True)


#: Kept in the Dagster home beside `STAMP_FILE`: one file per (model, day) partition.
PARTITIONS_DIR = "eval_pipeline_partitions"


class LastPartition:
    """What the last evaluation of a (model, day) partition read and did: a digest of its
    inputs (`digest`) and the metadata of its runs' materialization. An evaluation calls
    `forget` before the partition's stages and `save` once they succeed."""

    def __init__(self, home: Path, model: str, run_date: date) -> None:
        name = hashlib.sha256(f"{model}|{run_date.isoformat()}".encode()).hexdigest()[:24]
        self._path = home / PARTITIONS_DIR / f"{name}.json"
        self._model, self._run_date = model, run_date

    @staticmethod
    def digest(input_versions: Mapping[str, str | None]) -> str:
        """The inputs of a partition's runs, grades and summary: the data versions of the
        day's inputs (tests, context, grading rules, references, variants), the grading
        code and the package's code."""
        payload = [sorted(input_versions.items()), grading_code(), _code_identity()]
        return hashlib.sha256(json.dumps(payload, default=str).encode()).hexdigest()

    def unchanged(
        self, request: EvaluationRequest, config: SuiteConfig, planned: int, inputs: str
    ) -> bool:
        """Whether the partition would run nothing (`partition_unchanged`) with these inputs."""
        try:
            stamp = json.loads(self._path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        if not isinstance(stamp, dict) or stamp.get("inputs") != inputs:
            return False
        runs = stamp.get("runs")
        return partition_unchanged(
            request,
            config,
            self._model,
            planned,
            last_runs=runs if isinstance(runs, dict) else None,
        )

    def save(self, inputs: str, runs: Mapping[str, object]) -> None:
        """Record the inputs the partition's stages read and its runs' metadata (best effort:
        without it the next evaluation runs the partition)."""
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            partial = self._path.with_name(f".{self._path.name}.{os.getpid()}")
            partial.write_text(json.dumps({"inputs": inputs, "runs": dict(runs)}), encoding="utf-8")
            partial.replace(self._path)
        except OSError:
            self.forget()

    def forget(self) -> None:
        self._path.unlink(missing_ok=True)
