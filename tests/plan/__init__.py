"""Tests of servesim.plan."""
