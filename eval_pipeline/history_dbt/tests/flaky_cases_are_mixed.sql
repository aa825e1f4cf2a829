-- A flaky case has both outcomes: 0 < passes < attempts.
SELECT name, model, run_date, passes, attempts
FROM {{ ref('flaky_cases') }}
WHERE passes <= 0 OR passes >= attempts
