"""Tests of servesim.inputs."""
