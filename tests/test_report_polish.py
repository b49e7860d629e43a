"""Report details a reader trips on (issue 45): leader-epoch colours that stay apart
(epochs 0 and 8 shared one), no consumer figures in a run without consumers."""

from __future__ import annotations

import colorsys
import itertools
import re

from reports.grid import epoch_colour
from reports.render import _figures


def _rgb(css: str) -> tuple[float, ...]:
    h, s, lightness = map(float, re.fullmatch(r"hsl\(([\d.]+), (\d+)%, (\d+)%\)", css).groups())
    return tuple(255 * c for c in colorsys.hls_to_rgb(h / 360, lightness / 100, s / 100))


def test_the_first_24_epochs_have_colours_apart() -> None:
    """Every pair of epochs 0..23 at least 18 apart in RGB (the old golden-angle
    hues at one lightness put 0 and 8 14 apart, 0 and 21 under 3)."""
    rgb = {e: _rgb(epoch_colour(e)) for e in range(24)}
    closest = min((sum((x - y) ** 2 for x, y in zip(rgb[a], rgb[b], strict=True)) ** 0.5, a, b)
                  for a, b in itertools.combinations(rgb, 2))
    assert closest[0] >= 18, closest


def test_an_epoch_keeps_its_colour_and_none_is_grey() -> None:
    assert epoch_colour(5) == epoch_colour("5") == epoch_colour(5)
    assert epoch_colour(None) == "#eeeeee"


def test_a_run_without_consumers_shows_no_consumer_figures() -> None:
    s = {"figures": {"sends": 3, "polls_ok": 0, "unseen_acked": 3, "poll_latency_ms_max": None}}
    producers_only = [{"f": "send", "process": 0}, {"f": "poll", "process": "final"}]
    assert [label for label, _ in _figures(s, producers_only)] == ["sends"]
    with_consumer = [*producers_only, {"f": "poll", "process": 1}]
    assert [label for label, _ in _figures(s, with_consumer)] == [
        "sends", "polls ok", "acknowledged writes no consumer saw", "poll latency max"]
