"""Inputs layer: what users bring (files of points, benchmark results, configs), read safely."""
