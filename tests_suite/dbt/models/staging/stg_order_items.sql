-- Order lines with money in dollars. The unit price is the price on the day of the order.
select
    order_item_id,
    order_id,
    product_id,
    quantity,
    cast(unit_price_cents / 100 as decimal(12, 2)) as unit_price_usd,
    cast(discount_cents / 100 as decimal(12, 2)) as discount_usd,
    cast((quantity * unit_price_cents - discount_cents) / 100 as decimal(12, 2)) as line_amount_usd
from {{ ref('raw_order_items') }}
