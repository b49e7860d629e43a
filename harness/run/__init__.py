"""One run of a scenario: the runner, its steps, its clock, how it watches the
cluster (watch, event_collector, observer) and collects the replicas, and the figure assertions."""
