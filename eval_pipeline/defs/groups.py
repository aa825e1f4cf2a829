"""The asset groups of the Dagster UI, named once (assets, selections and schedules use these)."""

SUITE = "suite"  # what the user writes: test cases, the agent's context, the grading rules
WAREHOUSE = "warehouse"  # the suite's dbt models, keyed `warehouse/<model>`
EVALUATION = "evaluation"  # references, runs, grades, summaries, leaderboard, report
HISTORY = "history"  # the history marts (dbt over the results), keyed `history/<model>`
USAGE = "usage"  # production conversations, their friction, recommendations, test drafts
