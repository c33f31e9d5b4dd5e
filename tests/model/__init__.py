"""Tests of servesim.model."""
