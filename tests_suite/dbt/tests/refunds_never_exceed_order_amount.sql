{{ config(meta={'dagster': {'ref': {'name': 'orders'}}}) }}
-- A refund may be partial or full, never more than what the customer paid for the items.
select order_id, order_amount_usd, refunded_usd
from {{ ref('orders') }}
where refunded_usd > order_amount_usd
