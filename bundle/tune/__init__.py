"""`bundle tune`: sweep candidates (the config with a set of overrides) on this box, keep the winner.

space.py (candidates from levers and a search-space file) -> plan.py (validated, ordered, estimated,
skipped with reasons, resumed) -> runner.py (launch, attest, smoke, bench, down each) -> results.py
(JSON lines, resume, ranking) -> report.py (table, plot, bundle.tuned.yaml).
"""
