"""Tests of servesim.hardware."""
