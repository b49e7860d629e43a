"""The simulator's runtime (virtual time, the simulated network, greenlets) and its
fetch-round trace: what the sim backend (harness/backends/sim.py) runs on."""
