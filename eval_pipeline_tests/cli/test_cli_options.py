"""`eval-pipeline test`'s option checks, in process (the fast lane): a bad option exits 2 with
one line naming it, before anything is planned, run or written."""

from __future__ import annotations

import pytest

from eval_pipeline.cli import main
from eval_pipeline_tests.agents.tiny_suite import write_suite

BAD_OPTIONS = {
    "-k 0": (["-k", "0"], "-k: expected an integer from 1 to 100"),
    "--rejudge-samples 21": (["--rejudge-samples", "21"], "--rejudge-samples: expected an integer from 1 to 20"),
    "--min-accuracy 1.5": (["--min-accuracy", "1.5"], "--min-accuracy: expected a fraction between 0 and 1"),
    "a date before 2000": (["--date", "1999-12-31"], "--date"),
    "an unknown provider": (["-m", "nowhere:gpt-a"], "nowhere"),
    "an unknown test": (["-s", "no_such_test"], "no_such_test"),
}  # fmt: skip


@pytest.fixture
def suite(tmp_path):
    return write_suite(
        tmp_path / "suite",
        cases={"q0": "What is the revenue?"},
        dbt=False,
        providers=[{"provider": "local", "base_url": "http://127.0.0.1:9/v1", "timeout_s": 5}],
    )


@pytest.mark.parametrize("case", BAD_OPTIONS, ids=list(BAD_OPTIONS))
def test_a_bad_option_exits_2_naming_it_and_nothing_is_written(suite, capsys, case):
    options, named = BAD_OPTIONS[case]
    code = main(["test", "--suite", str(suite), "-m", "local:a", *options])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert err.startswith("error: ") and named in err, err
    assert "Traceback" not in out + err
    assert not (suite / "outputs").exists() or not list((suite / "outputs").iterdir())
    assert not (suite / ".eval" / "store").exists(), "a refused command wrote to the store"
