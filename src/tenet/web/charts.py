"""Charts of the consoles, drawn on the server by pygal (a maintained SVG charting library) and served by Tenet.

A chart is an SVG document at its own URL, shown with `<img alt=...>` and always next to a table of the same
numbers (the table is what a screen reader and the keyboard use; the picture is for the eye). pygal writes its style
into the SVG (`<style>`), which the pages' policy (no inline style) would refuse inside an HTML page; as an image of
its own it is allowed by the chart's own policy, `CHART_POLICY`, which lets that SVG style itself and nothing else:
no script runs in an `<img>` anyway, and pygal's tooltip script (loaded from its site by default) is switched off, so
nothing is fetched from another host."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pygal
from fastapi import Response
from pygal.style import Style

CHART_POLICY = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'self'"
# The console's palette (console.css): readable on white, distinct for the common forms of colour blindness.
_STYLE = Style(background="white", plot_background="white", foreground="#1f2933", foreground_strong="#1f2933",
               foreground_subtle="#6b7280", opacity=".9", opacity_hover="1", transition="none",
               colors=("#2563eb", "#059669", "#d97706", "#dc2626", "#7c3aed", "#6b7280"),
               font_family="system-ui, 'Noto Sans CJK SC', 'PingFang SC', sans-serif")


def bars(title: str, labels: Sequence[str], series: Mapping[str, Sequence[int | float | None]], *,
         stacked: bool = True, width: int = 720, height: int = 260) -> bytes:
    """A (stacked) bar chart: one bar per label, one colour per series. The words are the caller's, translated."""
    chart = (pygal.StackedBar if stacked else pygal.Bar)(
        style=_STYLE, js=[], width=width, height=height, explicit_size=True, title=title, legend_at_bottom=True,
        legend_at_bottom_columns=min(len(series), 6) or 1, show_minor_x_labels=True, x_label_rotation=0,
        print_values=False, margin=12, truncate_label=-1, no_data_text="—")
    chart.x_labels = list(labels)
    for name, values in series.items():
        chart.add(name, list(values))
    svg: bytes = chart.render()
    return svg


def svg_response(svg: bytes) -> Response:
    """The chart as an image, under its own policy; never cached across sign-outs."""
    return Response(svg, media_type="image/svg+xml", headers={
        "Content-Security-Policy": CHART_POLICY, "X-Content-Type-Options": "nosniff",
        "Cache-Control": "private, no-store", "Referrer-Policy": "no-referrer"})
