-- Products with their category name and prices in dollars.
select
    p.product_id,
    p.sku,
    p.product_name,
    c.category_name as category,
    cast(p.list_price_cents / 100 as decimal(12, 2)) as list_price_usd,
    cast(p.unit_cost_cents / 100 as decimal(12, 2)) as unit_cost_usd,
    p.launched_on,
    p.discontinued_on
from {{ ref('raw_products') }} as p
left join {{ ref('raw_product_categories') }} as c using (category_id)
