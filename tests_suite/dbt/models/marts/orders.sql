-- One row per order, with its amounts rolled up from the lines and the refunds.
with lines as (
    select
        order_id,
        cast(sum(quantity) as integer) as item_quantity,
        sum(quantity * unit_price_usd) as list_amount_usd,
        sum(discount_usd) as discount_usd,
        sum(line_amount_usd) as order_amount_usd
    from {{ ref('stg_order_items') }}
    group by order_id
),

refunded as (
    select order_id, sum(amount_usd) as refunded_usd
    from {{ ref('stg_refunds') }}
    group by order_id
)

select
    o.order_id,
    o.customer_id,
    o.channel_id,
    o.ordered_at,
    o.order_date,
    o.status,
    o.promo_code,
    o.shipping_method,
    o.shipped_at,
    o.delivered_at,
    o.returned_at,
    o.cancelled_at,
    l.item_quantity,
    l.list_amount_usd,
    l.discount_usd,
    l.order_amount_usd,
    o.shipping_usd,
    coalesce(r.refunded_usd, 0) as refunded_usd,
    c.is_test_account as is_test_order
from {{ ref('stg_orders') }} as o
inner join lines as l using (order_id)
inner join {{ ref('stg_customers') }} as c using (customer_id)
left join refunded as r using (order_id)
