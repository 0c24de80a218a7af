"""The endpoint dashboard: its body JSON parsed (``Fn::Join`` resolved), its rows, the Metrics
Insights top-N tables, CloudWatch's limits, and a body that does not change when adapters are added."""

from __future__ import annotations

import pytest

from cdk_adapters.monitoring import MonitoringAlarms, RequestMetrics, dashboard_limit_problems, top_adapters_query
from cdk_adapters.problems import ConfigurationError
from tests.constructs.conftest import build_endpoint
from tests.monitoring.conftest import dashboard_body, endpoint_with, resources, template_of


def metric_widgets(body: dict) -> dict[str, dict]:
    return {widget["properties"]["title"]: widget["properties"] for widget in body["widgets"] if widget["type"] == "metric"}


def test_endpoint_rows_and_per_adapter_tables():
    endpoint = endpoint_with(alarms=MonitoringAlarms())
    template = template_of(endpoint)
    (dashboard,) = resources(template, "AWS::CloudWatch::Dashboard").values()
    # Dashboards are global: the region is part of the name.
    assert dashboard["Properties"]["DashboardName"] == {"Fn::Join": ["", [f"{endpoint.prefix}-", {"Ref": "AWS::Region"}]]}
    body = dashboard_body(template)
    widgets = metric_widgets(body)
    assert {
        "Requests",
        "Latency (ms)",
        "Errors",
        "Cold-start share (0-1)",
        "GPU utilisation (%)",
        "Copies and instances (reservations)",
        "SageMaker invocations (base component)",
    } <= set(widgets)
    latency = widgets["Latency (ms)"]["metrics"]
    assert [entry[:4] for entry in latency] == [["CdkAdapters", "Latency", "EndpointName", endpoint.endpoint_name]] * 3 + [
        ["CdkAdapters", "TimeToFirstToken", "EndpointName", endpoint.endpoint_name]
    ]
    assert [entry[-1]["stat"] for entry in latency] == ["p50", "p95", "p99", "p95"]
    gpu = widgets["GPU utilisation (%)"]["metrics"]
    assert gpu[0][:4] == [
        "/aws/sagemaker/InferenceComponents",
        "GPUUtilizationNormalized",
        "InferenceComponentName",
        endpoint.base_component_name,
    ]
    reservations = widgets["Copies and instances (reservations)"]["metrics"]
    assert [
        "/aws/sagemaker/Endpoints",
        "GPUReservation",
        "EndpointName",
        endpoint.endpoint_name,
        "VariantName",
        "AllTraffic",
    ] == reservations[0][:6]
    alarm_widget = next(widget for widget in body["widgets"] if widget["type"] == "alarm")
    assert len(alarm_widget["properties"]["alarms"]) == 3
    tables = {title: properties for title, properties in widgets.items() if title.startswith("Top 10 adapters")}
    assert len(tables) == 7
    for properties in tables.values():
        ((query,),) = [
            [item["expression"] for item in entry if isinstance(item, dict) and "expression" in item]
            for entry in properties["metrics"]
        ]
        assert query.startswith("SELECT ") and 'FROM SCHEMA("CdkAdapters", Adapter, EndpointName)' in query
        assert f"WHERE EndpointName = '{endpoint.endpoint_name}' GROUP BY Adapter ORDER BY" in query and query.endswith(
            "DESC LIMIT 10"
        )
        assert properties["view"] == "bar"
    assert dashboard_limit_problems(body) == []


def test_the_body_does_not_depend_on_the_adapters():
    one = dashboard_body(template_of(endpoint_with(adapters=("support-en-v1",))))
    many = dashboard_body(template_of(endpoint_with(adapters=[f"tenant-{i}-v1" for i in range(40)])))
    assert one == many


def test_emf_off_leaves_only_what_sagemaker_reports():
    body = dashboard_body(template_of(build_endpoint(request_metrics=RequestMetrics(emf=False))))
    titles = set(metric_widgets(body))
    assert titles == {"GPU utilisation (%)", "Copies and instances (reservations)", "SageMaker invocations (base component)"}


def test_fair_share_signals_have_an_endpoint_row_and_per_adapter_tables():
    endpoint = build_endpoint()
    body = dashboard_body(template_of(endpoint))
    widgets = metric_widgets(body)
    queries = {
        title: next(item["expression"] for entry in properties["metrics"] for item in entry if isinstance(item, dict))
        for title, properties in widgets.items()
        if title.startswith("Top 10 adapters")
    }
    # Who is throttled, who is starved, who holds the engine: one Metrics Insights table each.
    assert queries["Top 10 adapters: Most throttled requests (429)"].startswith("SELECT SUM(Throttled) FROM SCHEMA")
    assert queries["Top 10 adapters: Highest average queue wait (ms)"].startswith("SELECT AVG(QueueWait) FROM SCHEMA")
    assert queries["Top 10 adapters: Highest peak in flight"].startswith("SELECT MAX(InFlight) FROM SCHEMA")
    row = widgets["Fair share: queue wait (ms), throttled, in flight"]["metrics"]
    assert [(entry[1], entry[-1].get("stat")) for entry in row] == [
        ("QueueWait", "p50"),
        ("QueueWait", "p95"),
        ("Throttled", "Sum"),
        ("InFlight", "Maximum"),
    ]
    assert all(entry[2:4] == ["EndpointName", endpoint.endpoint_name] for entry in row)
    # Without the fair-share metrics, neither the row nor the tables.
    plain = metric_widgets(
        dashboard_body(template_of(build_endpoint(request_metrics=RequestMetrics(metrics=("Latency", "Errors5XX")))))
    )
    assert not any("Fair share" in title or "queue wait" in title or "throttled" in title for title in plain)


def test_a_smaller_metric_set_drops_the_rows_and_tables_it_cannot_fill():
    body = dashboard_body(template_of(build_endpoint(request_metrics=RequestMetrics(metrics=("Latency",)))))
    titles = set(metric_widgets(body))
    assert "Latency (ms)" in titles and "Top 10 adapters: Highest average latency (ms)" in titles
    assert not {"Requests", "Errors", "Top 10 adapters: Most 5xx answers"} & titles


def test_top_n_is_configurable_within_what_a_query_returns():
    body = dashboard_body(template_of(build_endpoint(dashboard_top_n=25)))
    assert any("LIMIT 25" in str(widget) for widget in body["widgets"])
    with pytest.raises(ConfigurationError, match=r"dashboard_top_n: must be an integer from 1 to 100, got 0"):
        build_endpoint(dashboard_top_n=0)
    # Seven tables of up to 100 series would pass the dashboard's 500: refused before anything is built.
    with pytest.raises(
        ConfigurationError, match=r"dashboard_top_n: 66 x 7 per-adapter tables passes the 500 series .* at most 65"
    ):
        build_endpoint(dashboard_top_n=66)
    widest = dashboard_body(template_of(build_endpoint(dashboard_top_n=65)))
    assert dashboard_limit_problems(widest) == []
    fewer = dashboard_body(
        template_of(build_endpoint(dashboard_top_n=100, request_metrics=RequestMetrics(metrics=("Latency", "Errors5XX"))))
    )
    assert dashboard_limit_problems(fewer) == []
    assert "AWS::CloudWatch::Dashboard" not in {
        r["Type"] for r in template_of(build_endpoint(dashboard=False))["Resources"].values()
    }


def test_the_limit_check_finds_each_limit():
    metric = ["CdkAdapters", "Latency", "EndpointName", "e"]
    query = top_adapters_query("CdkAdapters", "e", "AVG", "Latency", 600)
    unordered = 'SELECT AVG(Latency) FROM "CdkAdapters"'
    body = {
        "widgets": [{"type": "text", "properties": {}}] * 498
        + [
            {"type": "metric", "properties": {"metrics": [metric] * 101}},
            {"type": "metric", "properties": {"metrics": [[{"expression": query}], [{"expression": unordered}]]}},
            {"type": "metric", "properties": {"metrics": [metric]}},
        ]
    }
    problems = dashboard_limit_problems(body)
    assert "501 widgets; a dashboard holds 500" in problems
    assert "widget 498 has 101 metrics; a widget holds 100" in problems
    assert any("ORDER BY ... LIMIT <= 500" in problem and "LIMIT 600" in problem for problem in problems)
    assert any("ORDER BY ... LIMIT <= 500" in problem and unordered in problem for problem in problems)
    assert "1202 metrics and query series; plan for at most 500 per dashboard" in problems
