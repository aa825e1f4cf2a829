-- Refunds with the amount in dollars.
select
    refund_id,
    order_id,
    created_at as refunded_at,
    cast(created_at as date) as refund_date,
    cast(amount_cents / 100 as decimal(12, 2)) as amount_usd,
    reason
from {{ ref('raw_refunds') }}
