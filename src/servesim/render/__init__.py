"""Rendering: every text table, JSON and CSV output, plot and report.

Every renderer takes plain results (the dicts of :mod:`servesim.plan` and :mod:`servesim.sim`,
or records with the fields its protocols name) and returns a string, a figure or files; it
imports no other layer of servesim, and printing is the command line's job.
"""

from servesim.render.formats import to_csv, to_json
from servesim.render.text import disagg_text, plan_text, specdec_text, table

__all__ = ["disagg_text", "plan_text", "specdec_text", "table", "to_csv", "to_json"]
