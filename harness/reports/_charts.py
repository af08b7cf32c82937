"""Charts for the HTML page, drawn by matplotlib and inlined as SVG.

A load run's fault windows, throughput and latency percentiles over time, one panel each on a
shared time axis.  The windows get a strip of their own, one row per fault, so two that overlap
do not write their names over each other, and are shaded through the other panels so a dip or a
spike lines up with what caused it.  A server crash and a network fault are different stories
(the first loses the in-flight work, the second only its answer), so they get different colours
and legend entries.  The legend sits below the plots, where it cannot hide a line.

Figures are built without pyplot on the Agg canvas: no global figure state, no display, safe in
a worker thread; the SVG keeps its text as text so the page's fonts and search apply.  The parts
a page or a test must find carry fixed ids (``load-legend``, ``load-latency-plot``,
``load-window-crash-PANEL-N``,
``load-window-network-PANEL-N``).
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence

import matplotlib
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from harness.reports._sections import FaultWindow, LoadPoint

__all__ = ["load_chart"]

#: Per kind of window: its legend entry, its colour and, so print and colour-blind readers can
#: tell them apart in the strip too, its hatching.
WINDOW_STYLES = {
    "network": ("network fault", "#f76707", ""),
    "crash": ("server crash", "#862e9c", "////"),
}
THROUGHPUT_COLOUR = "#2f9e44"
SERIES = (("p50_ms", "p50", "#1c7ed6"), ("p95_ms", "p95", "#0c8599"),
          ("p99_ms", "p99", "#c2255c"))
WIDTH_IN, PLOTS_HEIGHT_IN, ROW_HEIGHT_IN = 10.0, 6.0, 0.32
#: The smallest text drawn, in points; the page never shows the chart below its natural size,
#: where a point is a CSS pixel.
FONT_PT = 10


def load_chart(timeline: Sequence[LoadPoint], windows: Sequence[FaultWindow]) -> str:
    """Fault windows, throughput and latency percentiles, a legend below; an ``<svg>``."""
    faults = list(dict.fromkeys(w.fault for w in windows))
    figure = Figure(figsize=(WIDTH_IN, PLOTS_HEIGHT_IN + ROW_HEIGHT_IN * len(faults)),
                    layout="constrained")
    FigureCanvasAgg(figure)
    with matplotlib.rc_context({"font.size": FONT_PT}):
        if faults:
            strip, throughput, latency = figure.subplots(
                3, 1, sharex=True,
                height_ratios=(ROW_HEIGHT_IN * len(faults), 2.2, 2.9))
            _strip(strip, windows, faults)
        else:
            throughput, latency = figure.subplots(2, 1, sharex=True, height_ratios=(2.2, 2.9))
        _throughput(throughput, timeline)
        _latency(latency, timeline)
        for panel, axes in (("throughput", throughput), ("latency", latency)):
            _shade(axes, windows, panel)
            axes.grid(True, color="#e9ecef", linewidth=0.8)
            axes.spines[["top", "right"]].set_visible(False)
        legend = figure.legend(handles=_legend_handles(windows), loc="outside lower center",
                               ncols=6, frameon=False)
        legend.set_gid("load-legend")
    return _svg(figure)


def _kind(window: FaultWindow) -> str:
    return "crash" if window.fault == "crash" else "network"


def _throughput(axes: Axes, timeline: Sequence[LoadPoint]) -> None:
    times = [p.t for p in timeline]
    axes.plot(times, [p.requests_per_s for p in timeline], color=THROUGHPUT_COLOUR,
              linewidth=1.8)
    axes.fill_between(times, [p.requests_per_s for p in timeline], color=THROUGHPUT_COLOUR,
                      alpha=0.12, linewidth=0)
    axes.set_ylabel("requests / s")
    axes.set_ylim(bottom=0)


def _latency(axes: Axes, timeline: Sequence[LoadPoint]) -> None:
    times = [p.t for p in timeline]
    for attribute, label, colour in SERIES:
        (line,) = axes.plot(times, [getattr(p, attribute) for p in timeline], color=colour,
                            linewidth=1.6)
        line.set_gid(f"load-{label}")
    axes.patch.set_gid("load-latency-plot")
    axes.set_ylabel("latency (ms)")
    axes.set_xlabel("seconds since the load started")
    axes.set_ylim(bottom=0)


def _strip(axes: Axes, windows: Sequence[FaultWindow], faults: list[str]) -> None:
    """One row per fault, a bar per window: the names never overlap, however the windows do."""
    for window in windows:
        _, colour, hatch = WINDOW_STYLES[_kind(window)]
        axes.barh(faults.index(window.fault), window.end - window.start, left=window.start,
                  height=0.6, color=colour, alpha=0.8, hatch=hatch, edgecolor="white",
                  linewidth=0)
    axes.set_yticks(range(len(faults)), faults)
    axes.set_ylim(len(faults) - 0.5, -0.5)
    axes.tick_params(axis="y", length=0)
    axes.tick_params(axis="x", labelbottom=False)
    axes.spines[["top", "right", "left"]].set_visible(False)


def _shade(axes: Axes, windows: Sequence[FaultWindow], panel: str) -> None:
    for number, window in enumerate(windows):
        kind = _kind(window)
        span = axes.axvspan(window.start, window.end, color=WINDOW_STYLES[kind][1], alpha=0.14,
                            linewidth=0)
        span.set_gid(f"load-window-{kind}-{panel}-{number}")


def _legend_handles(windows: Sequence[FaultWindow]) -> list[Artist]:
    handles: list[Artist] = [Line2D([], [], color=THROUGHPUT_COLOUR, linewidth=1.8,
                                    label="requests / s")]
    handles += [Line2D([], [], color=colour, linewidth=1.6, label=label)
                for _, label, colour in SERIES]
    present = {_kind(w) for w in windows}
    handles += [Patch(facecolor=colour, alpha=0.8, hatch=hatch, edgecolor="white", label=label)
                for kind, (label, colour, hatch) in WINDOW_STYLES.items() if kind in present]
    return handles


def _svg(figure: Figure) -> str:
    """The figure as an inline ``<svg>``; a fixed hash salt keeps its internal ids, and so the
    page, the same from one render to the next (a page holds one chart).  The page may widen it
    but never shrinks it below its natural size (``min-width``), where its text is readable: a
    narrow window scrolls the chart inside its own box instead."""
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "idem-load"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    start = text.index("<svg")
    svg = text[start:]
    head_end = svg.index(">")
    natural = re.search(r'\swidth="([\d.]+)pt"', svg[:head_end])
    floor = f' style="min-width: {natural[1]}px"' if natural else ""
    # Let the page size the chart: drop the fixed size in points, keep the viewBox.
    head = re.sub(r'\s(width|height)="[^"]*"', "", svg[:head_end])
    return head + f' class="chart" role="img"{floor}' + svg[head_end:]
