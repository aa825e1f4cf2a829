-- Tests whose attempts disagree on one model and day: some passed, some did not
-- (0 < passes < attempts). Flaky tests make a single run's verdict unreliable.
SELECT
    name,
    model,
    run_date,
    count(*) AS attempts,
    count(*) FILTER (WHERE passed) AS passes,
    count(*) FILTER (WHERE passed) / count(*) AS pass_share
FROM {{ source('results', 'grades') }}
GROUP BY name, model, run_date
HAVING count(*) FILTER (WHERE passed) > 0
   AND count(*) FILTER (WHERE passed) < count(*)
