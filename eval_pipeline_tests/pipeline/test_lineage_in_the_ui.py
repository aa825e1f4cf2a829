"""What the Dagster UI shows after a test file is edited, read from the webserver's GraphQL API.

The test starts `dagster-webserver` on 127.0.0.1 over the suite's instance, as `eval-pipeline
ui` would, and asks it what its pages show: each model's runs unsynced, caused by
`test_cases`. With Chromium and Playwright present it also takes the screenshot the README
shows (saved to docs/screenshots with EVAL_SAVE_SCREENSHOTS=1).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import httpx
import pytest

from eval_pipeline.defs.instance import default_instance_yaml
from eval_pipeline.defs.partitions import model_day_key
from eval_pipeline_tests.pipeline.automation import run_requested, watch_tick
from eval_pipeline_tests.pipeline.services import graphql, stop_group
from eval_pipeline_tests.pipeline.small_suite import DAY, MODELS, evaluate, prepare
from eval_pipeline_tests.warehouses.servers import free_port

pytestmark = pytest.mark.slow

WEBSERVER = Path(sys.executable).with_name("dagster-webserver")
CHROMIUM = Path("/usr/bin/chromium")
SAVING = os.environ.get("EVAL_SAVE_SCREENSHOTS") == "1"
SCREENSHOTS = (
    Path(__file__).resolve().parents[2] / "docs" / "screenshots"
    if SAVING
    else Path(tempfile.gettempdir()) / "eval_pipeline_screenshots"
)
STALE = """
query Stale($partitions: [String!]) {
  assetNodes(assetKeys: [{path: ["agent_runs"]}]) {
    staleStatusByPartition(partitions: $partitions)
    staleCausesByPartition(partitions: $partitions) { key { path } reason }
  }
}
"""
LOADED = "{ workspaceOrError { ... on Workspace { locationEntries { locationOrLoadError { __typename } } } } }"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(default_instance_yaml())
    return home


@contextmanager
def webserver(suite: Path, home: Path) -> Iterator[str]:
    """`dagster-webserver` over the suite's code location and instance; its base URL."""
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "EVAL_SUITE_DIR": str(suite)}
    process = subprocess.Popen(
        [str(WEBSERVER), "-m", "eval_pipeline.definitions", "-h", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and process.poll() is None:
            try:
                entries = graphql(base, LOADED)["workspaceOrError"]["locationEntries"]
                if entries and all(e["locationOrLoadError"] for e in entries):
                    break
            except (httpx.HTTPError, KeyError, TypeError, ValueError):
                pass
            time.sleep(1)
        else:
            raise AssertionError("the webserver did not come up")
        yield base
    finally:
        stop_group(process, timeout_s=30)


def screenshots(base: str, pages: dict[str, str]) -> None:
    """Save each page (path → file name) as the UI renders it, when a browser is at hand.
    The pauses that let the graph lay itself out (and close the first-visit box) are for the
    pictures the docs keep: only when saving them (EVAL_SAVE_SCREENSHOTS=1)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return
    if not CHROMIUM.exists():
        return
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        skip = page.get_by_role("button", name="Skip")
        for path, name in pages.items():
            page.goto(f"{base}{path}", wait_until="networkidle", timeout=120_000)
            if SAVING:
                page.wait_for_timeout(6000)  # the graph lays itself out after the data arrives
                if skip.count() and skip.first.is_visible():  # the first-visit newsletter box
                    skip.first.click()
                    page.wait_for_timeout(1500)
            page.screenshot(path=str(SCREENSHOTS / name))
        browser.close()


def test_the_ui_shows_each_models_runs_unsynced_by_the_edited_test(small_suite, home):
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.add_dynamic_partitions("models", list(MODELS))
        defs = prepare(small_suite, instance)
        for model in MODELS:
            evaluate(defs, instance, model)
        small_suite.edit_case("orders_by_region", prompt="How many orders per region, in 2024?")
        (request,) = watch_tick(defs, instance).run_requests
        run_requested(defs, instance, request)

    partitions = [str(model_day_key(model, DAY)) for model in MODELS]
    with webserver(small_suite.root, home) as base:
        (node,) = graphql(base, STALE, {"partitions": partitions})["assetNodes"]
        assert node["staleStatusByPartition"] == ["STALE", "STALE"]
        for causes in node["staleCausesByPartition"]:
            assert causes == [{"key": {"path": ["test_cases"]}, "reason": "has a new data version"}]
        screenshots(
            base,
            {
                f"/assets/agent_runs?view=partitions&partition={partitions[0]}": (
                    "dagster-unsynced-partitions.png"
                ),
                "/assets/model_summaries?view=checks": "dagster-partitioned-checks.png",
            },
        )
