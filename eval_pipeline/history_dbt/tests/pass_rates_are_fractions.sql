-- pass_rate is a fraction in [0, 1] (DESIGN §3); a percentage here would break every chart.
SELECT model, run_date, pass_rate
FROM {{ ref('pass_rate_trend') }}
WHERE pass_rate < 0 OR pass_rate > 1
