"""Random faults: chaos runs, the nightly matrix, swarm testing on the simulator,
shrinking a found anomaly, and exporting a run as a scenario."""
