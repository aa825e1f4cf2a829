"""`eval-pipeline test` started in a shell's background (`eval-pipeline test &` in a script)
stops on SIGTERM while its models run, as `kill <pid>` or a CI runner's cancel sends it.

A shell starts a background command with SIGINT ignored. The command's Dagster runs map
SIGTERM onto SIGINT's disposition as they end, so without care the command ignored SIGTERM
from its first Dagster run on and ran until its models answered."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from eval_pipeline_tests.agents.servers import ScriptedServer, agent_reply, repeat
from eval_pipeline_tests.agents.tiny_suite import write_suite
from eval_pipeline_tests.cli.console import SCRIPT, cli_env

pytestmark = pytest.mark.slow

#: How long the agent takes to answer: far longer than the command may take to stop.
AGENT_DELAY_S = 90


def test_a_background_command_stops_on_sigterm_while_its_models_run(tmp_path):
    with ScriptedServer("agent") as server:
        server.set_script(repeat(agent_reply("late", delay_s=AGENT_DELAY_S)))
        root = write_suite(
            tmp_path / "suite",
            cases={"slow": "Will you answer?"},
            agents=[{"name": "slow", "url": server.base_url}],
            dbt=False,
        )
        log = tmp_path / "test.log"
        with log.open("w") as out:
            process = subprocess.Popen(
                [str(SCRIPT), "test", "-m", "http:slow", "--date", "2026-03-02"],
                cwd=root,
                env=cli_env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
            )
            try:
                deadline = time.monotonic() + 120
                while not server.requests and time.monotonic() < deadline:
                    assert process.poll() is None, log.read_text()
                    time.sleep(0.2)
                assert server.requests, "the agent was never asked:\n" + log.read_text()
                asked = time.monotonic()
                process.send_signal(signal.SIGTERM)
                code = process.wait(timeout=AGENT_DELAY_S / 2)
                stopped_after = time.monotonic() - asked
            finally:
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGKILL)
    assert code == -signal.SIGTERM, log.read_text()
    assert stopped_after < AGENT_DELAY_S / 3, stopped_after


def test_ctrl_c_that_a_library_turns_into_its_own_error_still_ends_as_interrupted(
    monkeypatch, capsys
):
    """DuckDB answers a Ctrl-C that arrives during a query with its own error ("Query
    interrupted"), not KeyboardInterrupt: the command still ends as interrupted (130, one
    line), not as a failure to run (3, "could not run")."""
    import os
    import signal
    import time

    from eval_pipeline.cli import _main  # the unit itself: the command's dispatch

    def stopped(_args):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # Ctrl-C arrives here
        except KeyboardInterrupt:
            raise RuntimeError("Query interrupted") from None  # as DuckDB turns it
        raise AssertionError("no Ctrl-C came")

    monkeypatch.setattr(_main, "cmd_list", stopped)
    assert _main.main(["list"]) == 130
    assert capsys.readouterr().err.strip() == "interrupted"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
