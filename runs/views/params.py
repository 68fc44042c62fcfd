"""GET parameters shared by the pages' JSON endpoints: their forms are in runs.forms;
runs.views.sweep_detail takes ``chart_choice`` from here."""

from runs.forms import chart_choice

__all__ = ["chart_choice"]
