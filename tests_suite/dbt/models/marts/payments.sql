select
    payment_id,
    order_id,
    attempted_at,
    payment_method,
    amount_usd,
    status
from {{ ref('stg_payments') }}
