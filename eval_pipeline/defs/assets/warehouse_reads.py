"""Which warehouse models the evaluation reads: the tables the suite's reference SQL names (sqlglot), else the marts."""

from collections.abc import Iterable, Mapping, Set

import dagster as dg
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from eval_pipeline.suite import Suite


def tables_read(sql: str, dialect: str = "duckdb") -> set[str]:
    """The lower-cased names of the tables a query reads (its CTEs are not tables); none when
    sqlglot cannot parse it."""
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except SqlglotError:
        return set()
    names: set[str] = set()
    for statement in statements:
        ctes = {cte.alias_or_name.lower() for cte in statement.find_all(exp.CTE)}
        names |= {t.name.lower() for t in statement.find_all(exp.Table) if t.name} - ctes
    return names


def leaf_models(
    models: Iterable[dg.AssetKey], upstream: Mapping[dg.AssetKey, Set[dg.AssetKey]]
) -> list[dg.AssetKey]:
    """The models no other model is built from (the marts): what an agent is meant to query."""
    models = list(models)
    used = {parent for key in models for parent in upstream.get(key, set())}
    return [key for key in models if key not in used]


def models_read(
    suite: Suite | None,
    models: Iterable[dg.AssetKey],
    upstream: Mapping[dg.AssetKey, Set[dg.AssetKey]],
) -> list[dg.AssetKey]:
    """The warehouse models the suite's reference SQL reads, by table name; the marts when
    reads none of them (no reference SQL yet, SQL sqlglot cannot parse, no valid `suite`).
    A change to a staging model still reaches these through the dbt graph."""
    models = list(models)
    by_name = {key.path[-1].lower(): key for key in models}
    cases = suite.cases if suite is not None else ()
    read = {name for case in cases if case.sql for name in tables_read(case.sql)}
    keys = sorted((by_name[name] for name in read if name in by_name), key=lambda k: k.path)
    return keys or leaf_models(models, upstream)
