"""Assets for what the user writes: the test cases, the context the built-in agent reads, the judge."""

import hashlib
from collections import Counter

import dagster as dg

from eval_pipeline.defs import groups
from eval_pipeline.defs.resources import SuiteResource
from eval_pipeline.grading import PROMPTS_VERSION, judge_label
from eval_pipeline.pipeline import record_cases
from eval_pipeline.suite import Case


def _cases_table(cases: list[Case]) -> str:
    lines = ["| test | file | checks | tags | difficulty |", "|---|---|---|---|---|"]
    for case in cases:
        checks = ", ".join(case.kinds) or "**no verification**"
        tags = ", ".join(case.tags)
        lines.append(
            f"| {case.name} | {case.relative_path} | {checks} | {tags} | {case.difficulty or ''} |"
        )
    return "\n".join(lines)


@dg.asset(
    group_name=groups.SUITE,
    kinds={"yaml", "duckdb"},
    description="The suite's test files, validated. Its data version is the suite hash, so "
    "editing a test marks the runs and grades that depend on it as unsynced.",
)
def test_cases(context: dg.AssetExecutionContext, suite: SuiteResource) -> dg.MaterializeResult:
    loaded = suite.load()
    record_cases(loaded, suite.store())
    cases = list(loaded.cases)
    kinds = Counter(kind for case in cases for kind in case.kinds)
    unverified = [case.name for case in cases if not case.kinds]
    context.log.info(f"{len(cases)} test cases loaded from {loaded.cases_dir}")
    return dg.MaterializeResult(
        data_version=dg.DataVersion(loaded.hash),
        metadata={
            "cases": len(cases),
            **{f"cases_with_{kind}": count for kind, count in sorted(kinds.items())},
            "without_verification": len(unverified),
            "suite_hash": loaded.hash,
            "suite": dg.MetadataValue.path(str(loaded.root)),
            "cases_table": dg.MetadataValue.md(_cases_table(cases)),
        },
    )


@dg.asset(
    group_name=groups.SUITE,
    kinds={"markdown", "dbt"},
    description="What the built-in agent is told besides the question: the configured context "
    "files (RULES.md) and the dbt model documentation. Editing them marks agent runs unsynced.",
)
def agent_context(context: dg.AssetExecutionContext, suite: SuiteResource) -> dg.MaterializeResult:
    loaded = suite.agent_context()
    rows = ["| file | kind | characters |", "|---|---|---|"]
    rows += [f"| {f.label} | context | {len(f.text):,} |" for f in loaded.files]
    rows += [f"| {f.label} | dbt docs | {len(f.text):,} |" for f in loaded.dbt_docs]
    context.log.info(f"agent context hash {loaded.hash}")
    return dg.MaterializeResult(
        data_version=dg.DataVersion(loaded.hash),
        metadata={
            "context_hash": loaded.hash,
            "context_files": len(loaded.files),
            "dbt_doc_files": len(loaded.dbt_docs),
            "files": dg.MetadataValue.md("\n".join(rows)),
        },
    )


@dg.asset(
    group_name=groups.SUITE,
    kinds={"python"},
    description="Who decides the judged checks (evaluators, consistency, llm_judge arguments) "
    "and extracts answers: test.judge_model, its prompt version and test.extraction. A new "
    "judge marks the grades unsynced; regrading reads the stored runs, with no agent call.",
)
def judge(context: dg.AssetExecutionContext, suite: SuiteResource) -> dg.MaterializeResult:
    settings = suite.config().test
    label = judge_label(settings.judge_model) if settings.judge_model else "no judge"
    identity = f"{label}; extraction: {settings.extraction}"
    context.log.info(f"judge: {identity}")
    return dg.MaterializeResult(
        data_version=dg.DataVersion(hashlib.sha256(identity.encode()).hexdigest()[:16]),
        metadata={
            "judge_model": settings.judge_model or "(none)",
            "prompt_version": PROMPTS_VERSION,
            "extraction": settings.extraction,
        },
    )
