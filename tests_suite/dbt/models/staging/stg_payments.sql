-- Payment attempts with the amount in dollars.
select
    payment_id,
    order_id,
    created_at as attempted_at,
    payment_method,
    cast(amount_cents / 100 as decimal(12, 2)) as amount_usd,
    status
from {{ ref('raw_payments') }}
