"""Evaluating adapters: golden sets, running them on targets, scoring, and the recorded verdicts.

`golden` reads the cases, `runner` calls the targets through `AdapterClient` and scores answers,
`report` renders the table and JSON, `record` keeps the verdicts ``promote`` reads, and `replay`
turns captured traffic into cases. ``cdk-adapters eval`` is the command over them.
"""
