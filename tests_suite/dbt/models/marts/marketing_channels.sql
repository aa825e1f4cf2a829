select
    channel_id,
    channel_name,
    channel_group,
    is_paid
from {{ ref('stg_marketing_channels') }}
