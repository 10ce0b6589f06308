"""N distinguishable series styles for the report's figures: no two series in one colour.

* up to 10 series: ``tab10``, solid lines;
* up to 20: ``tab20`` with its dark half first (the tab10 hues) and its light half after, dashed, so that a
  dark and a light shade of one hue also differ in line style;
* more: ``turbo`` sampled at N evenly spaced points, with line styles and markers cycling as a second cue.

Every style also carries a marker (cycled independently of the colour), for figures that mark points.
matplotlib gives the palettes; the rule for choosing among them by N is hand-rolled, as no library does it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import matplotlib
import numpy as np

LINESTYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<")
TURBO_RANGE = (0.05, 0.95)  # the ends of turbo are near-black and dark red: kept off the samples


@dataclass(frozen=True)
class SeriesStyle:
    """One series' colour (RGBA), line style and marker."""

    color: tuple[float, float, float, float]
    linestyle: str
    marker: str

    def line(self, marker: bool = False) -> dict[str, Any]:
        """Keyword arguments for ``Axes.plot`` (the marker only when asked)."""
        out: dict[str, Any] = {"color": self.color, "linestyle": self.linestyle}
        if marker:
            out["marker"] = self.marker
        return out


def _rgba(colors) -> list[tuple[float, float, float, float]]:
    return [tuple(float(c) for c in matplotlib.colors.to_rgba(color)) for color in colors]


def series_colors(n: int) -> list[tuple[float, float, float, float]]:
    """``n`` pairwise different RGBA colours (see the module docstring for the palette per ``n``)."""
    if n <= 0:
        return []
    if n <= 10:
        return _rgba(matplotlib.colormaps["tab10"].colors[:n])
    if n <= 20:
        tab20 = matplotlib.colormaps["tab20"].colors
        return _rgba([*tab20[0::2], *tab20[1::2]][:n])
    return _rgba(matplotlib.colormaps["turbo"](np.linspace(*TURBO_RANGE, n)))


def series_styles(n: int) -> list[SeriesStyle]:
    """``n`` styles with pairwise different colours; line styles tell the palette's halves (tab20) or
    neighbouring samples (turbo) apart, markers cycle over :data:`MARKERS`."""
    colors = series_colors(n)
    styles = []
    for i, color in enumerate(colors):
        if n <= 10:
            linestyle = "-"
        elif n <= 20:
            linestyle = "-" if i < 10 else "--"
        else:
            linestyle = LINESTYLES[i % len(LINESTYLES)]
        styles.append(SeriesStyle(color, linestyle, MARKERS[i % len(MARKERS)]))
    return styles


def style_map(names) -> dict[str, SeriesStyle]:
    """One style per distinct name, in first-seen order (the same name gets the same style in every panel)."""
    unique = list(dict.fromkeys(names))
    return dict(zip(unique, series_styles(len(unique))))
