"""Tests of servesim.sim."""
