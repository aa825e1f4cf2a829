{#
  Use a model's custom schema as-is ("raw", "staging") instead of dbt's default
  "<target schema>_<custom schema>". Marts have no custom schema and land in the target
  schema ("main"), so the agent sees `orders`, not `main_marts.orders`.
#}
{% macro generate_schema_name(custom_schema_name, node) -%}
    {%- if custom_schema_name is none -%}
        {{ target.schema }}
    {%- else -%}
        {{ custom_schema_name | trim }}
    {%- endif -%}
{%- endmacro %}
