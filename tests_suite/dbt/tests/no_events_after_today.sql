{{ config(meta={'dagster': {'ref': {'name': 'orders'}}}) }}
-- Nothing in the warehouse happens after the fixed "today".
select 'order' as kind, order_id as id from {{ ref('orders') }}
where order_date > (select as_of_date from {{ ref('reporting_date') }})
union all
select 'refund', refund_id from {{ ref('refunds') }}
where refund_date > (select as_of_date from {{ ref('reporting_date') }})
