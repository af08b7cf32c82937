"""Charts for the HTML page, drawn by matplotlib and inlined as SVG.

A load run's throughput and latency percentiles over time, one panel each on a shared time axis,
with the fault windows shaded so a dip or a spike lines up with what caused it.  Figures are
built without pyplot on the Agg canvas: no global figure state, no display, safe in a worker
thread; the SVG keeps its text as text so the page's fonts and search apply.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence

import matplotlib
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from harness.reports._sections import FaultWindow, LoadPoint

__all__ = ["load_chart"]

FAULT_COLOUR = "#d9480f"
SERIES = (("p50_ms", "p50", "#1c7ed6"), ("p95_ms", "p95", "#f08c00"),
          ("p99_ms", "p99", "#c2255c"))


def load_chart(timeline: Sequence[LoadPoint], windows: Sequence[FaultWindow]) -> str:
    """Throughput above, latency percentiles below, fault windows shaded; an ``<svg>`` element."""
    figure = Figure(figsize=(10, 5.6), layout="constrained")
    FigureCanvasAgg(figure)
    throughput, latency = figure.subplots(2, 1, sharex=True, height_ratios=(1, 1.3))
    times = [p.t for p in timeline]
    throughput.plot(times, [p.requests_per_s for p in timeline], color="#2f9e44", linewidth=1.8)
    throughput.fill_between(times, [p.requests_per_s for p in timeline], color="#2f9e44",
                            alpha=0.12, linewidth=0)
    throughput.set_ylabel("requests / s")
    throughput.set_ylim(bottom=0)
    for attribute, label, colour in SERIES:
        latency.plot(times, [getattr(p, attribute) for p in timeline], label=label, color=colour,
                     linewidth=1.6)
    latency.set_ylabel("latency (ms)")
    latency.set_xlabel("seconds since the load started")
    latency.set_ylim(bottom=0)
    latency.legend(loc="upper left", frameon=False, ncols=3)
    for axes in (throughput, latency):
        _shade(axes, windows, label=axes is throughput)
        axes.grid(True, color="#e9ecef", linewidth=0.8)
        axes.spines[["top", "right"]].set_visible(False)
    return _svg(figure)


def _shade(axes: Axes, windows: Sequence[FaultWindow], *, label: bool) -> None:
    for window in windows:
        axes.axvspan(window.start, window.end, color=FAULT_COLOUR, alpha=0.13, linewidth=0)
        if label:
            axes.text((window.start + window.end) / 2, 1.0, window.fault,
                      transform=axes.get_xaxis_transform(), ha="center", va="bottom",
                      fontsize=9, color=FAULT_COLOUR)


def _svg(figure: Figure) -> str:
    """The figure as an inline ``<svg>``; a fixed hash salt keeps its internal ids, and so the
    page, the same from one render to the next (a page holds one chart)."""
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "idem-load"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    start = text.index("<svg")
    svg = text[start:]
    # Let the page size the chart: drop the fixed size in points, keep the viewBox.
    head_end = svg.index(">")
    head = re.sub(r'\s(width|height)="[^"]*"', "", svg[:head_end])
    return head + ' class="chart" role="img"' + svg[head_end:]
