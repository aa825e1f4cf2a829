"""A team's Dagster project: its own assets, and two eval_pipeline suites as components."""
