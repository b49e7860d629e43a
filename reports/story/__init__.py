"""The causal story at the top of a report: what happened to the data, and why.

Built only from generic facts of the run directory -- events.jsonl (elections,
truncations with their rule and removed records, restarts, flushes), the nemesis
ops of history.jsonl (power cycles, faults), the replicas' final logs and states
and the anomalies' witnesses -- never from what a scenario is known to do. Each
line links to its row in the report's timeline (`RunFacts.items`); facts shared
by several anomalies are told once.

- facts     RunFacts: the run's facts, indexed (also for the grid and the charts)
- lines     Line, Step, Cause, Story: the story as data
- builder   build: the facts -> the causes of each anomaly, as story lines
- words     each line's sentence; the names of truncation rules, faults, values
- kept      kept_causes: a run without anomalies -- which rule kept the records at risk
- headline  the headline: what happened to the data, and was it expected
"""

from reports.story.builder import build
from reports.story.facts import Item, RunFacts, part_of, rule_of
from reports.story.headline import Headline, headline
from reports.story.lines import MAX_LINES, Cause, Line, Step, Story
from reports.story.words import RULES

__all__ = ["MAX_LINES", "RULES", "Cause", "Headline", "Item", "Line", "RunFacts", "Step",
           "Story", "build", "headline", "part_of", "rule_of"]
