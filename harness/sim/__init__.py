"""The simulator: its runtime, swarm testing, shrinking and the fetch-round trace."""
