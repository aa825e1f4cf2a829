"""Production usage, the online half of the loop: conversations imported from traces or logs, the friction in them, recommendations of what context to change, and tests drawn from them."""

from eval_pipeline.usage._conversation import Conversation, ToolCall, Turn, UsageProblem
from eval_pipeline.usage._history import (
    STATUSES,
    WINDOW_DAYS,
    ImportReport,
    Ranking,
    Source,
    import_usage,
    rank,
    refresh_signals,
    set_status,
    sniff_source,
    statuses,
    stored_conversations,
    stored_days,
    stored_signals,
    trace_files,
    write_recommendations,
)
from eval_pipeline.usage._nao import is_database_url, shown_url
from eval_pipeline.usage._privacy import Privacy
from eval_pipeline.usage._promote import TestDraft, draft_test, write_draft
from eval_pipeline.usage._recommend import ContextFiles, Recommendation, recommend
from eval_pipeline.usage._signals import (
    SIGNAL_KINDS,
    Signal,
    SignalKind,
    prompts_of,
    signals_of,
    worded_correction,
)

__all__ = [
    "SIGNAL_KINDS",
    "STATUSES",
    "WINDOW_DAYS",
    "ContextFiles",
    "Conversation",
    "ImportReport",
    "Privacy",
    "Ranking",
    "Recommendation",
    "Signal",
    "SignalKind",
    "Source",
    "TestDraft",
    "ToolCall",
    "Turn",
    "UsageProblem",
    "draft_test",
    "import_usage",
    "is_database_url",
    "prompts_of",
    "rank",
    "recommend",
    "refresh_signals",
    "set_status",
    "shown_url",
    "signals_of",
    "sniff_source",
    "statuses",
    "stored_conversations",
    "stored_days",
    "stored_signals",
    "trace_files",
    "worded_correction",
    "write_draft",
    "write_recommendations",
]
