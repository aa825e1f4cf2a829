select
    refund_id,
    order_id,
    refunded_at,
    refund_date,
    amount_usd,
    reason
from {{ ref('stg_refunds') }}
