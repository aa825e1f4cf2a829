-- Customer accounts with emails normalised and internal QA accounts flagged.
select
    customer_id,
    first_name || ' ' || last_name as full_name,
    lower(trim(email)) as email,
    created_at as signed_up_at,
    cast(created_at as date) as signup_date,
    country_code,
    region,
    acquisition_channel_id,
    lower(trim(email)) like '%@shop-internal.test' as is_test_account
from {{ ref('raw_customers') }}
