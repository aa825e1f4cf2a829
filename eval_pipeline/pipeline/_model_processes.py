"""Each model's partition of a large evaluation in a process of its own, so that the models' runs use every core.

A command evaluating several models runs their partitions at the same time. In one process
they share its interpreter lock, and with a fast model the lock, not the provider, sets the
pace: a run spends about 3 ms of Python between its two completions and its query. Past
`PROCESSES_FROM_RUNS` planned runs, on a machine with two cores or more, the command keeps
the first model's partition and each other runs in a worker process. The workers are forked
from a server process that imports the pipeline once (multiprocessing's `forkserver`),
started as the evaluation begins, so those imports overlap the suite's inputs and
references, and no worker inherits the threads or open databases of the command.

A worker sends back what its stages wrote (the `StageRun` of its partition) and, as they
happen, each finished run and grade for the command's progress (`publish` in the command).
A worker that dies fails its partition, as a stage would; a command that stops (Ctrl-C,
SIGTERM, SIGKILL) takes its workers with it. What a worker stored stays stored, as for any
interrupted evaluation: finished runs are reused by the next one.

`EVAL_PIPELINE_MODEL_PROCESSES` decides: `auto` (the default, as above), `on` (whenever two
models or more are evaluated), `off` (always in the command's own process).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import multiprocessing.forkserver
import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

import pyarrow

from eval_pipeline.pipeline._progress import publish, subscribe

__all__ = [
    "MODEL_PROCESSES_ENV",
    "PROCESSES_FROM_RUNS",
    "ModelJob",
    "WorkerDied",
    "prepare_workers",
    "run_in_workers",
    "use_workers",
]

#: The environment variable that turns the worker processes on, off or automatic.
MODEL_PROCESSES_ENV = "EVAL_PIPELINE_MODEL_PROCESSES"

#: Planned runs (over every model) from which `auto` evaluates each model in a worker: a
#: worker costs about 50 ms to fork and the server a second of CPU to import the pipeline,
#: what about 300 runs of a fast model save.
PROCESSES_FROM_RUNS = 300

#: How long a stopped command waits for its workers to end on SIGTERM before SIGKILL.
_STOP_GRACE_S = 5.0

#: The modules the server imports once for every worker: the stages, and the command's main
#: module, which each worker would import again otherwise (multiprocessing runs it there).
_PRELOAD = ["__main__", "eval_pipeline.pipeline._worker_preload"]

_DONE = "eval-pipeline: no more progress"

Outcome = TypeVar("Outcome")


class ModelJob(Protocol[Outcome]):
    """One model's partition to evaluate: picklable, evaluated once in a worker (or in place)."""

    model: str

    def evaluate(self) -> Outcome: ...


class WorkerDied(RuntimeError):
    """The worker process of a model ended before it sent back its partition."""

    def __init__(self, model: str, exitcode: int | None) -> None:
        if exitcode is None:
            how = "no exit code"
        elif exitcode < 0:
            how = f"signal {-exitcode}"
        else:
            how = f"exit code {exitcode}"
        super().__init__(
            f"the process evaluating {model} ended ({how}) before it "
            "finished; the runs it stored are kept and reused by the next evaluation"
        )
        self.model = model
        self.exitcode = exitcode


def use_workers(models: int, planned: int) -> bool:
    """Whether an evaluation of `models` partitions holding `planned` runs in all evaluates
    each partition in a worker process (`EVAL_PIPELINE_MODEL_PROCESSES`)."""
    setting = os.environ.get(MODEL_PROCESSES_ENV, "auto").strip().lower() or "auto"
    if setting not in {"auto", "on", "off"}:
        raise ValueError(f"{MODEL_PROCESSES_ENV} must be auto, on or off, not {setting!r}")
    if setting == "off" or models < 2:
        return False
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return False  # Windows: the partitions share the command's process
    if setting == "on":
        return True
    return planned >= PROCESSES_FROM_RUNS and _cores() >= 2


def prepare_workers() -> None:
    """Start the server the workers are forked from, if it is not running: it imports the
    pipeline meanwhile, while this process goes on (the first worker waits for it)."""
    multiprocessing.set_forkserver_preload(_PRELOAD)
    multiprocessing.forkserver.ensure_running()
    _return_freed_memory()


def run_in_workers(
    jobs: Sequence[ModelJob[Outcome]],
    at_once: int,
    *,
    died: Callable[[ModelJob[Outcome], WorkerDied], Outcome],
) -> list[Outcome]:
    """Evaluate the first job in this process and each other in a worker process, at most
    `at_once` jobs at a time in all; their outcomes in the order of `jobs`. A worker that
    ends without one gives `died(job, error)` instead. The runs and grades the workers
    publish are published here as they come.

    This process keeps one partition: it holds the suite and the imports already, so one
    worker fewer costs no memory, and it still has the interpreter lock of a process to
    itself beside its workers.

    Raises:
        BaseException: whatever stopped this process meanwhile (KeyboardInterrupt...),
            once the workers still running are stopped.
    """
    if not jobs:
        return []
    with ThreadPoolExecutor(1, thread_name_prefix="eval-pipeline: model") as here:
        first = here.submit(jobs[0].evaluate)
        others = _in_workers(jobs[1:], max(1, at_once - 1), died=died)
        return [first.result(), *others]


def _in_workers(
    jobs: Sequence[ModelJob[Outcome]],
    at_once: int,
    *,
    died: Callable[[ModelJob[Outcome], WorkerDied], Outcome],
) -> list[Outcome]:
    prepare_workers()
    context = multiprocessing.get_context("forkserver")
    progress = context.SimpleQueue()
    forwarder = _Forwarder(progress)
    forwarder.start()
    outcomes: dict[int, Outcome] = {}
    waiting = list(enumerate(jobs))
    running: dict[Any, tuple[int, multiprocessing.process.BaseProcess]] = {}
    try:
        while waiting or running:
            while waiting and len(running) < at_once:
                index, job = waiting.pop(0)
                receive, send = context.Pipe(duplex=False)
                worker = context.Process(
                    target=_work,
                    args=(job, send, progress),
                    name=f"eval-pipeline: {job.model}",
                )
                worker.start()
                send.close()  # the worker's end: EOF here once it is gone
                running[receive] = (index, worker)
            for ready in multiprocessing.connection.wait(list(running)):
                index, worker = running.pop(ready)
                try:
                    outcomes[index] = ready.recv()  # before the join: it may be large
                except EOFError:
                    pass  # gone without one: its exit code says how
                finally:
                    ready.close()
                worker.join()
                if index not in outcomes:
                    error = WorkerDied(jobs[index].model, worker.exitcode)
                    outcomes[index] = died(jobs[index], error)
    except BaseException:
        _stop([worker for _, worker in running.values()])
        raise
    finally:
        progress.put(_DONE)
        forwarder.join()
        progress.close()
    forwarder.raise_failure()
    return [outcomes[index] for index in range(len(jobs))]


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def _stop(workers: list[multiprocessing.process.BaseProcess]) -> None:
    for worker in workers:
        worker.terminate()
    for worker in workers:
        worker.join(_STOP_GRACE_S)
        if worker.is_alive():
            worker.kill()
            worker.join()


class _Forwarder(threading.Thread):
    """Publishes here what the workers publish, until told `_DONE`. A listener that fails
    does not stop the forwarding (the workers would block on a full pipe): its first error
    is raised once the workers are done."""

    def __init__(self, progress: Any) -> None:
        super().__init__(name="eval-pipeline: worker progress", daemon=True)
        self._progress = progress
        self._failure: BaseException | None = None

    def run(self) -> None:
        while (item := self._progress.get()) != _DONE:
            try:
                publish(item)
            except Exception as error:  # raised by raise_failure, once the workers end
                self._failure = self._failure or error

    def raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure


def _work(job: ModelJob[Any], send: multiprocessing.connection.Connection, progress: Any) -> None:
    """A worker: run the job, publishing its progress to `progress`, and send its outcome."""
    # Only the command's report reaches its stdout: a stray print goes to stderr.
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    _end_with_the_command()
    _return_freed_memory()
    subscribe(progress.put)
    send.send(job.evaluate())
    send.close()


def _return_freed_memory() -> None:
    """Arrow's default pool (jemalloc) keeps what it freed for a while: 20-35 MB held for
    nothing in each process of the evaluation. The C library's pool gives it back."""
    pyarrow.set_memory_pool(pyarrow.system_memory_pool())


def _end_with_the_command() -> None:
    """End this worker as soon as the command that asked for it is gone (killed, say)."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        with contextlib.suppress(OSError, ValueError):
            multiprocessing.connection.wait([parent.sentinel])
        os._exit(1)

    threading.Thread(target=watch, name="eval-pipeline: command watch", daemon=True).start()
