-- Tests that passed on a model the day before (every attempt) and do not pass today (some
-- attempt failed or errored): the same rule as the `no_regression` check of model_summaries.
WITH case_days AS (
    SELECT name, model, run_date, bool_and(passed) AS passed, count(*) AS attempts
    FROM {{ source('results', 'grades') }}
    GROUP BY name, model, run_date
)
SELECT
    today.name,
    today.model,
    today.run_date,
    yesterday.run_date AS previous_date,
    today.attempts,
    grades.message AS first_failure
FROM case_days AS today
JOIN case_days AS yesterday
  ON yesterday.name = today.name
 AND yesterday.model = today.model
 AND yesterday.run_date = today.run_date - INTERVAL 1 DAY
LEFT JOIN (
    SELECT name, model, run_date, message,
           row_number() OVER (PARTITION BY name, model, run_date ORDER BY attempt) AS nth
    FROM {{ source('results', 'grades') }}
    WHERE NOT passed
) AS grades
  ON grades.name = today.name AND grades.model = today.model
 AND grades.run_date = today.run_date AND grades.nth = 1
WHERE yesterday.passed AND NOT today.passed
