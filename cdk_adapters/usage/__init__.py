"""What each tenant used of an endpoint over a period, and its share of the endpoint's cost.

One module per concept: `report` (the per-adapter figures), `cloudwatch` (reading them from
CloudWatch ``GetMetricData`` for a deployed endpoint), `prometheus` (parsing local mode's
``/metrics`` text) and `cost_split` (the endpoint's cost, split by output tokens). The
``cdk-adapters usage`` command (`cdk_adapters.cli.usage`) parses arguments and prints.
"""
