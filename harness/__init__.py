"""The harness: runs scenarios against a cluster and writes run directories.

Layering (tests/test_layering.py keeps it so):

- broker      the reference broker; imports nothing else of isrlab.
- generator   Jepsen's generator combinators, sans-IO; imports nothing of isrlab.
- contract    the shared vocabulary, contract.rundir, the one reader and writer
              of run directories, and contract.history, the op recorder (any
              clock with `now()`); imports only broker.
- workloads   producer, consumer, real clients; imports broker (the wire
              protocol), generator and contract.
- nemesis     faults; imports generator and contract, never workloads. It drives
              any `nemesis.Cluster`; harness backends satisfy it without nemesis
              importing them.
- checker     judges run directories; never imports harness or reports.
- reports     renders what the checker wrote; never imports harness.
- harness     wires everything together: the runner owns the run (its clock,
              `harness.run.clock.RunClock`, its run directory, its backend) and hands
              them to workloads and nemesis. Only `harness.cli` imports the checker
              and reports: a run never judges; the CLI checks and renders afterwards.

Inside the harness, folders lowest first (each imports only its own and lower ones):
the root (errors, progress, YAML locations), sim (the simulator's runtime), backends,
scenario, run, chaos, cli. docs/README.md maps where each kind of change goes.
"""
