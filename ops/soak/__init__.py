"""The soak (issue 21): Tenet's scale-out topology built from processes on this machine, a bounded mixed load
through the load balancer, faults on a schedule, and the checks that nothing acknowledged was lost.

Run it as root: `make soak` (10 minutes) or `make soak-short` (2 minutes, one fault of each kind), or
`python -m ops.soak --help`. The report lands in var/soak/ (report.md, report.json, throughput.svg).
"""
