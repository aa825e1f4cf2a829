-- Order headers: timestamps trimmed to seconds (all UTC), shipping fee in dollars.
select
    order_id,
    customer_id,
    channel_id,
    ordered_at,
    cast(ordered_at as date) as order_date,
    status,
    promo_code,
    shipping_method,
    cast(shipping_fee_cents / 100 as decimal(12, 2)) as shipping_usd,
    cast(shipped_at as timestamp) as shipped_at,
    cast(delivered_at as timestamp) as delivered_at,
    cast(returned_at as timestamp) as returned_at,
    cast(cancelled_at as timestamp) as cancelled_at
from {{ ref('raw_orders') }}
