"""Tests of servesim.render."""
