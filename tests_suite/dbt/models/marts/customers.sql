select
    customer_id,
    full_name,
    email,
    signup_date,
    signed_up_at,
    country_code,
    region,
    acquisition_channel_id,
    is_test_account
from {{ ref('stg_customers') }}
