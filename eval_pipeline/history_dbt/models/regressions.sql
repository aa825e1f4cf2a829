-- "Regressed since the model's previous evaluated day": a test that passed on the last earlier
-- day the model was evaluated (every attempt passed) and failed on the day (some attempt failed;
-- runs that only ended in errors say nothing of the agent: no regression). The SQL form of the rule, run as it is by the viewer too
-- (eval_pipeline.pipeline._gates.regressions_sql: keep the source call its only Jinja); the
-- no_regression check's Python form (`since_previous_day`) is tested to agree with it.
WITH case_days AS (
    SELECT
        name,
        model,
        run_date,
        bool_and(passed) AS passed,
        bool_or(status = 'failed') AS failed,
        count(*) AS attempts,
        min(attempt) FILTER (WHERE status = 'failed') AS first_failed_attempt
    FROM {{ source('results', 'grades') }}
    GROUP BY name, model, run_date
),
model_days AS (
    SELECT
        model,
        run_date,
        lag(run_date) OVER (PARTITION BY model ORDER BY run_date) AS previous_date
    FROM (SELECT DISTINCT model, run_date FROM case_days)
)
SELECT
    today.name,
    today.model,
    today.run_date,
    days.previous_date,
    today.attempts,
    today.first_failed_attempt AS attempt,
    failure.status,
    failure.message AS first_failure
FROM case_days AS today
JOIN model_days AS days
  ON days.model = today.model AND days.run_date = today.run_date
JOIN case_days AS before
  ON before.name = today.name
 AND before.model = today.model
 AND before.run_date = days.previous_date
JOIN {{ source('results', 'grades') }} AS failure
  ON failure.name = today.name
 AND failure.model = today.model
 AND failure.run_date = today.run_date
 AND failure.attempt = today.first_failed_attempt
WHERE before.passed AND today.failed
