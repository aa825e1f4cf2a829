"""Each model's partition of a large evaluation in a process of its own, so that the models' runs use every core.

A command evaluating several models runs their partitions at the same time. In one process
they share its interpreter lock, and with a fast model the lock, not the provider, sets the
pace: a run spends about 3 ms of Python between its two completions and its query. Past
`PROCESSES_FROM_RUNS` planned runs, on a machine with two cores or more, the command keeps
the first model's partition and each other runs in a worker process.

The workers are forked from the command as the evaluation begins (`prepare_workers`), before
it starts any thread or opens any database: a worker then shares the command's imports and
their memory, and waits for its partition until the suite's inputs and references are read.
When the process cannot fork safely at that moment (another thread runs, as in a test
runner's process; macOS), the workers are forked instead from a server process that imports
the pipeline once (multiprocessing's `forkserver`), started as the evaluation begins, so
those imports overlap the inputs and references. Forked ahead, the workers of a 1,500-run
evaluation cost a second of CPU and 130 MB less than from the server.

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
import gc
import multiprocessing
import multiprocessing.connection
import multiprocessing.forkserver
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import pyarrow

from eval_pipeline.pipeline._progress import publish, subscribe

__all__ = [
    "MODEL_PROCESSES_ENV",
    "PROCESSES_FROM_RUNS",
    "ModelJob",
    "WorkerDied",
    "dismiss_workers",
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

#: Most workers forked ahead (`prepare_workers`); an evaluation of more models has its
#: workers forked from the server instead (they run a few at a time, the others would wait).
_MOST_AHEAD = 8

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


@dataclass(frozen=True)
class _Waiting:
    """A worker forked ahead of its partition (`_wait_for_job`)."""

    process: multiprocessing.process.BaseProcess
    #: where its job is sent; closed unsent, the worker ends (dismissed)
    job: multiprocessing.connection.Connection
    #: where its outcome comes back; EOF: it ended without one
    outcome: multiprocessing.connection.Connection


@dataclass(frozen=True)
class _Ahead:
    """The workers forked ahead for the current evaluation, and the queue of their progress."""

    workers: list[_Waiting]
    progress: Any


_AHEAD: _Ahead | None = None


def prepare_workers(count: int = 1) -> None:
    """Have workers ready for up to `count` partitions: forked now from this process, when
    only its main thread runs (they wait for their jobs, `run_in_workers`; `dismiss_workers`
    ends those left without one); otherwise the server they will be forked from, started
    unless it runs, importing the pipeline while this process goes on."""
    global _AHEAD
    _return_freed_memory()  # before forking: the workers inherit the pool
    if _AHEAD is None and 0 < count <= _MOST_AHEAD and _may_fork_here():
        # A Ctrl-C that came while forking would interrupt the standard library's fork
        # handlers (logging's lock), which swallow it: it waits until the workers are kept,
        # so `dismiss_workers` ends them once the command stops.
        with _interrupts_held():
            _AHEAD = _fork_ahead(count)
    elif _AHEAD is None:
        multiprocessing.set_forkserver_preload(_PRELOAD)
        multiprocessing.forkserver.ensure_running()


def dismiss_workers() -> None:
    """End the workers forked ahead that were given no job (`prepare_workers`)."""
    global _AHEAD
    ahead, _AHEAD = _AHEAD, None
    if ahead is not None:
        _dismiss(ahead.workers)
        ahead.progress.close()


def _dismiss(workers: Sequence[_Waiting]) -> None:
    """End these workers, waiting for their jobs: their job pipe closes unsent."""
    for worker in workers:
        worker.job.close()
        worker.outcome.close()
    for worker in workers:
        worker.process.join(_STOP_GRACE_S)
    _stop([worker.process for worker in workers if worker.process.is_alive()])


def _may_fork_here() -> bool:
    """Whether this process may fork workers now: on Linux (macOS's system libraries are
    not safe to fork), with no thread but the main one, which could hold a lock a worker
    would then wait on forever. (The threads of Arrow's pool and its allocator are forked
    safely: Arrow resets them in the child.)"""
    return (
        sys.platform.startswith("linux")
        and "fork" in multiprocessing.get_all_start_methods()
        and threading.active_count() == 1
        and threading.current_thread() is threading.main_thread()
    )


def _fork_ahead(count: int) -> _Ahead:
    context = multiprocessing.get_context("fork")
    progress = context.SimpleQueue()
    pipes = [(context.Pipe(duplex=False), context.Pipe(duplex=False)) for _ in range(count)]
    # The objects made so far stay where they are: a worker's garbage collector then never
    # writes to their pages, which stay shared with this process instead of being copied.
    gc.freeze()
    try:
        workers = []
        for index, ((job_in, job_out), (outcome_in, outcome_out)) in enumerate(pipes):
            # A worker holds only its own ends: one that held another's would keep that
            # pipe open (no EOF for a worker gone, or dismissed).
            others = [
                end
                for other, pair in enumerate(pipes)
                for end in (pair[0] + pair[1] if other != index else (job_out, outcome_in))
            ]
            process = context.Process(
                target=_wait_for_job,
                args=(job_in, outcome_out, progress, others),
                name=f"eval-pipeline: model worker {index + 1}",
            )
            process.start()
            job_in.close()
            outcome_out.close()
            workers.append(_Waiting(process, job_out, outcome_in))
    finally:
        gc.unfreeze()
    return _Ahead(workers, progress)


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
    here = ThreadPoolExecutor(1, thread_name_prefix="eval-pipeline: model")
    try:
        first = here.submit(jobs[0].evaluate)
        others = _in_workers(jobs[1:], max(1, at_once - 1), died=died)
        outcomes = [first.result(), *others]
    except BaseException:
        # Ctrl-C: the model this process evaluates may wait on an answer for minutes; the
        # command ends without it (the runs it finished are stored, the rest rerun next time).
        here.shutdown(wait=False, cancel_futures=True)
        raise
    here.shutdown()
    return outcomes


def _in_workers(
    jobs: Sequence[ModelJob[Outcome]],
    at_once: int,
    *,
    died: Callable[[ModelJob[Outcome], WorkerDied], Outcome],
) -> list[Outcome]:
    global _AHEAD
    if _AHEAD is not None and len(_AHEAD.workers) < len(jobs):  # not forked for these jobs
        dismiss_workers()
    ahead, _AHEAD = _AHEAD, None
    context = multiprocessing.get_context("forkserver")
    if ahead is None:
        prepare_workers()
        progress = context.SimpleQueue()
    else:
        progress = ahead.progress
    # Forked ahead and not (yet) given a job: dismissed once the jobs are done or failed.
    idle = list(ahead.workers) if ahead is not None else []
    forwarder = _Forwarder(progress)
    forwarder.start()
    outcomes: dict[int, Outcome] = {}
    waiting = list(enumerate(jobs))
    running: dict[Any, tuple[int, multiprocessing.process.BaseProcess]] = {}
    try:
        while waiting or running:
            while waiting and len(running) < at_once:
                index, job = waiting.pop(0)
                if ahead is not None:
                    ready = ahead.workers[index]
                    idle.remove(ready)
                    # A worker gone meanwhile is told apart below, by its exit code.
                    with contextlib.suppress(OSError):
                        ready.job.send(job)
                    ready.job.close()
                    running[ready.outcome] = (index, ready.process)
                    continue
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
        _dismiss(idle)
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


def _wait_for_job(
    job: multiprocessing.connection.Connection,
    send: multiprocessing.connection.Connection,
    progress: Any,
    others: list[multiprocessing.connection.Connection],
) -> None:
    """A worker forked ahead: once its job comes, `_work`; none (dismissed): it ends."""
    _leave_interrupts_to_the_command()
    for end in others:
        end.close()
    try:
        work = job.recv()
    except EOFError:
        return
    finally:
        job.close()
    _work(work, send, progress)


def _work(job: ModelJob[Any], send: multiprocessing.connection.Connection, progress: Any) -> None:
    """A worker: run the job, publishing its progress to `progress`, and send its outcome."""
    _leave_interrupts_to_the_command()
    # Only the command's report reaches its stdout: a stray print goes to stderr.
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    _end_with_the_command()
    _return_freed_memory()
    subscribe(progress.put)
    send.send(job.evaluate())
    send.close()


def _leave_interrupts_to_the_command() -> None:
    """A terminal's Ctrl-C reaches every process of the command: a worker leaves it to the
    command, which stops its workers and says so once, rather than each printing a trace."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """A SIGINT that comes during the block is noted, and handled as this process handles
    it (KeyboardInterrupt, unless it ignores it) once the block ends. (Masking the signal
    would not do: another thread of the process, Arrow's, would take it.)"""
    came: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: came.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if came and callable(previous):
        previous(signal.SIGINT, None)


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
