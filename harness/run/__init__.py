"""One run of a scenario: the runner, its run directory, and what it reads from the cluster."""
