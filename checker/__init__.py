"""isrlab's Spark checker: run directories in, anomalies, summaries and verdicts out.

Entry point: checker.api.check_runs. Anomaly kinds live one per module in
checker/anomalies/ and are listed in checker.anomalies.REGISTRY.
"""
