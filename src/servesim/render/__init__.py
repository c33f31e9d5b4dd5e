"""Rendering of command results: aligned text tables, JSON and CSV.

Every renderer takes the plain dicts of :mod:`servesim.plan.summary` and returns a
string; printing is the CLI's job.
"""

from servesim.render.formats import to_csv, to_json
from servesim.render.text import disagg_text, plan_text, specdec_text, table

__all__ = ["disagg_text", "plan_text", "specdec_text", "table", "to_csv", "to_json"]
