"""Random faults: chaos runs, the nightly matrix, and exporting a run as a scenario."""
