select
    product_id,
    sku,
    product_name,
    category,
    list_price_usd,
    unit_cost_usd,
    launched_on,
    discontinued_on
from {{ ref('stg_products') }}
