"""Tests of servesim.cli."""
