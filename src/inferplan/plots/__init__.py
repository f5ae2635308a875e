"""Figures: the studies' plots and pictures of plans (the ``plots`` extra: matplotlib).

matplotlib is imported only when a figure is drawn, so the core install does not need it.
Figures are built as :class:`matplotlib.figure.Figure` objects and saved directly, without
pyplot: no window, no global state, the same file on any machine (Agg for raster output).
"""

from inferplan.plots.codesign import ratio_boxplots
from inferplan.plots.frontier import plot_frontier
from inferplan.plots.plan import plot_plan
from inferplan.plots.services import plot_services

__all__ = ["plot_frontier", "plot_plan", "plot_services", "ratio_boxplots"]
