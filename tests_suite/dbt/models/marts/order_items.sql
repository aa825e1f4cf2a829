select
    order_item_id,
    order_id,
    product_id,
    quantity,
    unit_price_usd,
    discount_usd,
    line_amount_usd
from {{ ref('stg_order_items') }}
