-- One row holding the suite's fixed "today" (dbt var `today`) and the first day of history.
-- The raw generators read it too, so no generated event ever happens after today.
select
    cast('{{ var("today") }}' as date) as as_of_date,
    cast('{{ var("history_start") }}' as date) as history_start_date
