"""`eval-pipeline recommend` and `promote` on a generated month: the planted clusters ranked first with the right kind and file, statuses kept across re-runs, a test drawn from one, and the cluster covered once the test is in the suite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from eval_pipeline_tests.cli.console import run_cli
from eval_pipeline_tests.usage.production import PLANTED, write_month, write_project

REQUIRED_KEYS = {"id", "kind", "score", "file", "conversations", "summary"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = write_project(tmp_path / "project")
    traces = write_month(root / "traces.jsonl", 2_000, seed=11)
    done = run_cli("usage", "import", str(traces), cwd=root)
    assert done.returncode == 0, done.stderr
    return root


def recommendations(project: Path, *flags: str) -> list[dict]:
    done = run_cli("recommend", "--format", "json", *flags, cwd=project)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def found(planted, items) -> dict | None:
    return next(
        (
            r
            for r in items
            if r["kind"] == planted.kind
            and r["file"] == planted.file
            and (
                planted.table is None
                or planted.table in r["tables"]
                or planted.kind == "correction"
            )
            and len(r["conversations"]) >= planted.conversations * 0.9
        ),
        None,
    )


def test_the_planted_clusters_lead_with_their_kind_and_file(project):
    items = recommendations(project)
    assert all(set(r) >= REQUIRED_KEYS for r in items)
    assert [r["score"] for r in items] == sorted((r["score"] for r in items), reverse=True)
    top = items[:10]
    missing = [p.name for p in PLANTED if found(p, top) is None]
    assert not missing, [(r["kind"], r["file"], len(r["conversations"])) for r in top]
    refunds = found(PLANTED[0], top)
    assert "refund_amount" in refunds["error"] and "refunds" in refunds["summary"]
    assert refunds["users"] >= 10


def test_a_status_survives_a_re_import_and_hides_the_recommendation(project):
    items = recommendations(project)
    first, second = items[0]["id"], items[1]["id"]
    assert run_cli("recommend", "--dismiss", first, "--note", "known", cwd=project).stdout == (
        f"{first}: dismissed\n"
    )
    run_cli("recommend", "--ack", second, cwd=project)
    again = run_cli("usage", "import", str(project / "traces.jsonl"), cwd=project)
    assert "0 new, 0 updated, 2000 unchanged" in again.stdout
    shown = recommendations(project)
    assert first not in {r["id"] for r in shown}
    assert next(r for r in shown if r["id"] == second)["status"] == "acknowledged"
    everything = {r["id"]: r for r in recommendations(project, "--all")}
    assert everything[first]["status"] == "dismissed" and everything[first]["note"] == "known"
    unknown = run_cli("recommend", "--done", "r_nope", cwd=project)
    assert unknown.returncode == 2 and "r_nope" in unknown.stderr


def test_promote_drafts_the_accepted_query_and_the_promoted_question_is_covered_after(project):
    items = recommendations(project)
    corrected = found(next(p for p in PLANTED if p.name == "net_revenue_corrected"), items)
    done = run_cli("promote", corrected["id"], cwd=project)
    assert done.returncode == 0, done.stderr
    path = Path(done.stdout.split("wrote ", 1)[1].strip())
    assert path.parent == project / "cases"
    test = yaml.safe_load(path.read_text())
    assert test["prompt"].startswith(("What was net revenue", "Net revenue for"))
    # The query of the answer after the user's correction, not the one they said was wrong.
    assert test["sql"].startswith("SELECT sum(o.amount) - sum(r.amount_usd)")
    assert "from-production" in test["tags"]
    written = path.read_text()
    path.write_text(written + "# edited by hand\n")
    again = run_cli("promote", corrected["id"], cwd=project)
    assert again.returncode == 2 and "exists" in again.stderr
    assert path.read_text().endswith("# edited by hand\n")  # never overwritten

    uncovered = found(next(p for p in PLANTED if p.name == "inventory_uncovered"), items)
    promoted = run_cli("promote", uncovered["id"], "--name", "inventory_turnover", cwd=project)
    assert promoted.returncode == 0, promoted.stderr
    drafted = yaml.safe_load((project / "cases" / "inventory_turnover.yml").read_text())
    assert drafted["name"] == "inventory_turnover" and "sql" in drafted
    after = {r["id"] for r in recommendations(project)}
    assert uncovered["id"] not in after  # a test asks it now
    assert corrected["id"] in after  # a test does not fix the context the users corrected


def test_a_question_without_an_accepted_query_is_drafted_as_needing_a_reference(project):
    items = recommendations(project)
    unanswered = found(next(p for p in PLANTED if p.name == "marketing_unanswered"), items)
    done = run_cli("promote", unanswered["id"], cwd=project)
    assert done.returncode == 0
    assert "it needs a reference" in done.stderr
    path = Path(done.stdout.split("wrote ", 1)[1].strip())
    assert path.read_text().startswith("# Drawn from production usage")
    drafted = yaml.safe_load(path.read_text())
    assert "sql" not in drafted and "needs-reference" in drafted["tags"]
    listed = run_cli("list", cwd=project)
    assert listed.returncode == 0 and drafted["name"] in listed.stdout


def test_recommend_before_any_import_says_how_to_start(tmp_path):
    root = write_project(tmp_path / "empty")
    done = run_cli("recommend", cwd=root)
    assert done.returncode == 0
    assert "eval-pipeline usage import" in done.stdout


JUDGE_CONFIG = """\
test:
  models: [replay:demo]
  judge_model: judge:summarizer
llm:
  providers:
    - {{provider: judge, base_url: "{url}", api_key: sk-test, timeout_s: 30}}
"""


def test_with_a_judge_the_top_recommendations_are_summed_up_once_and_cached(tmp_path):
    from eval_pipeline_tests.agents.servers import ScriptedServer
    from eval_pipeline_tests.agents.steps import answer, error, repeat

    paragraph = "Users asking about refunds hit a column that does not exist: document amount_usd."
    with ScriptedServer("openai", script=repeat(answer(paragraph))) as server:
        root = write_project(tmp_path / "judged")
        (root / "eval_config.yaml").write_text(JUDGE_CONFIG.format(url=server.base_url))
        traces = write_month(root / "traces.jsonl", 1_000, seed=4)
        assert run_cli("usage", "import", str(traces), cwd=root).returncode == 0
        items = recommendations(root)
        asked = len(server.requests)
        assert asked == 10
        assert [r["summarized_by"] for r in items[:10]] == ["judge:summarizer"] * 10
        assert all(r["summary"] == paragraph for r in items[:10])
        assert all(r["summarized_by"] == "rules" for r in items[10:])
        # What the judge read: the cluster's finding and its conversations, masked as stored.
        prompt = server.requests[0].messages[-1]["content"]
        assert "File to change:" in prompt and "conversation conv-" in prompt
        assert "@example.com" not in prompt
        recommendations(root)  # nothing changed: the cached answers, no request
        assert len(server.requests) == asked

    with ScriptedServer("openai", script=repeat(error(400, "bad request"))) as broken:
        (root / "eval_config.yaml").write_text(JUDGE_CONFIG.format(url=broken.base_url))
        items = recommendations(root, "--rejudge")
    # A judge that does not answer leaves the rules' text, and the command goes on.
    assert all(r["summarized_by"] == "rules" for r in items)
    assert all(r["summary"] != paragraph for r in items)


def test_with_confirm_corrections_the_judge_keeps_only_the_corrections_it_confirms(tmp_path):
    from eval_pipeline_tests.agents.servers import ScriptedServer
    from eval_pipeline_tests.agents.steps import answer

    def judge(request, _index):
        prompt = request.messages[-1]["content"]
        if "The user's next message:" not in prompt:
            return answer("A paragraph.")  # a summary
        return answer("OTHER" if "thanks" in prompt.split("next message:")[1] else "CORRECTION")

    def conversation(ident: str, question: str, reply: str, follow_up: str) -> str:
        return json.dumps(
            {
                "conversation_id": ident,
                "user": f"{ident}@example.com",
                "model": "gpt-4.1",
                "started_at": "2026-11-03T09:00:00Z",
                "messages": [
                    {"role": "user", "content": question},
                    {"role": "assistant", "content": reply},
                    {"role": "user", "content": follow_up},
                    {"role": "assistant", "content": "Noted."},
                ],
            }
        )

    with ScriptedServer("openai", script=judge) as server:
        root = write_project(tmp_path / "confirmed")
        (root / "eval_config.yaml").write_text(
            JUDGE_CONFIG.format(url=server.base_url) + "usage:\n  confirm_corrections: true\n"
        )
        (root / "chats.jsonl").write_text(
            conversation(
                "refunds",
                "What was net revenue in October?",
                "Net revenue was 129,400.",
                "That's wrong, net revenue excludes refunds.",
            )
            + "\n"
            + conversation(
                "thanks",
                "How many orders were placed in October?",
                "There were 1,204 orders.",
                "No, that's all, thanks! Which region sold most?",
            )
            + "\n"
        )
        assert run_cli("usage", "import", "chats.jsonl", cwd=root).returncode == 0
        done = run_cli("recommend", "--format", "json", cwd=root)
        assert done.returncode == 0, done.stderr
        items = json.loads(done.stdout)
        corrections = [c for r in items if r["kind"] == "correction" for c in r["conversations"]]
        # The rules flag both ("No, …" reads as a correction); the judge keeps one.
        assert corrections == ["refunds"]
        assert "found 1 correction(s) in the users' words to be none" in done.stderr
        asked = [r for r in server.requests if "next message:" in r.messages[-1]["content"]]
        assert len(asked) == 2
        assert (
            "excludes refunds"
            in asked[0].messages[-1]["content"] + asked[1].messages[-1]["content"]
        )
        run_cli("recommend", "--format", "json", cwd=root)  # cached: nothing asked again
        assert (
            len([r for r in server.requests if "next message:" in r.messages[-1]["content"]]) == 2
        )

    # Without the setting, the judge is asked nothing of them and the rules decide.
    root2 = write_project(tmp_path / "rules")
    (root2 / "chats.jsonl").write_text((root / "chats.jsonl").read_text())
    assert run_cli("usage", "import", "chats.jsonl", cwd=root2).returncode == 0
    items = recommendations(root2)
    corrections = sorted(c for r in items if r["kind"] == "correction" for c in r["conversations"])
    assert corrections == ["refunds", "thanks"]
