"""A stacked bar chart of events per day and type, as SVG text the server renders (no
chart library, no script). Colours come from the stylesheet by class, so the chart obeys
the page's contrast and the CSP (no inline style)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 720, 220, 40, 28, 10


@dataclass(frozen=True)
class Chart:
    svg_bars: list[dict[str, object]]
    labels: list[dict[str, object]]
    ticks: list[dict[str, object]]
    legend: list[tuple[str, str]]
    width: int = WIDTH
    height: int = HEIGHT
    summary: str = ""


def events_chart(days: Sequence[str], counts: Sequence[tuple[str, str, int]]) -> Chart:
    types = sorted({event_type for _, event_type, _ in counts})
    css = {event_type: f"series-{index % 8}" for index, event_type in enumerate(types)}
    per_day: dict[str, dict[str, int]] = {day: {} for day in days}
    for day, event_type, count in counts:
        if day in per_day:
            per_day[day][event_type] = count
    peak = max([sum(by_type.values()) for by_type in per_day.values()] + [1])
    plot_h = HEIGHT - BOTTOM - TOP
    slot = (WIDTH - LEFT) / max(len(days), 1)
    bars: list[dict[str, object]] = []
    labels: list[dict[str, object]] = []
    for index, day in enumerate(days):
        x = LEFT + index * slot + slot * 0.15
        y = float(HEIGHT - BOTTOM)
        for event_type in types:
            count = per_day[day].get(event_type, 0)
            if not count:
                continue
            height = plot_h * count / peak
            y -= height
            bars.append(
                {
                    "x": round(x, 1),
                    "y": round(y, 1),
                    "w": round(slot * 0.7, 1),
                    "h": round(height, 1),
                    "css": css[event_type],
                    "title": f"{day}: {count} {event_type}",
                }
            )
        labels.append({"x": round(x + slot * 0.35, 1), "y": HEIGHT - 10, "text": day[5:]})
    ticks = [
        {"y": round(HEIGHT - BOTTOM - plot_h * value / peak, 1), "text": str(value)}
        for value in sorted({0, peak // 2, peak})
    ]
    total = sum(count for _, _, count in counts)
    summary = f"{total} events over {len(days)} days, most on one day: {peak if total else 0}"
    return Chart(bars, labels, ticks, [(t, css[t]) for t in types], summary=summary)
