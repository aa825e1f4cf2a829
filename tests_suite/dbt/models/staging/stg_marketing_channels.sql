-- Marketing channels, straight from the seed.
select
    channel_id,
    channel_code,
    channel_name,
    channel_group,
    channel_group = 'paid' as is_paid
from {{ ref('raw_marketing_channels') }}
