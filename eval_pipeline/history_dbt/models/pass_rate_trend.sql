-- Pass rate per model and day, with the change from the model's previous evaluated day and a
-- 7-day moving average (over evaluated days), for trend charts and "did it get worse?".
SELECT
    model,
    run_date,
    total,
    passed,
    errors,
    pass_rate,
    pass_rate - lag(pass_rate) OVER by_day AS pass_rate_change,
    avg(pass_rate) OVER (by_day ROWS BETWEEN 6 PRECEDING AND CURRENT ROW) AS pass_rate_7d,
    tokens,
    cost_usd
FROM {{ source('results', 'model_summaries') }}
WINDOW by_day AS (PARTITION BY model ORDER BY run_date)
