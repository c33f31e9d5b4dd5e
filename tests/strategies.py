"""Shared Hypothesis strategies (STYLE habit 9)."""

from hypothesis import strategies as st

alphas = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
open_alphas = st.floats(min_value=0.0, max_value=0.999, allow_nan=False)
ks = st.integers(min_value=0, max_value=40)
positive_ks = st.integers(min_value=1, max_value=40)
draft_costs = st.floats(min_value=0.0, max_value=2.0, allow_nan=False)
verify_costs = st.floats(min_value=0.0, max_value=0.5, allow_nan=False)
utilizations = st.floats(min_value=0.0, max_value=0.999, allow_nan=False)
servers = st.integers(min_value=1, max_value=200)

# Simulation (servesim.sim, servesim.model.mgc)
service_scvs = st.floats(min_value=0.0, max_value=4.0, allow_nan=False)
stable_utilizations = st.floats(min_value=0.05, max_value=0.95, allow_nan=False)
acceptance_correlations = st.floats(min_value=0.0, max_value=0.95, allow_nan=False)
small_servers = st.integers(min_value=1, max_value=16)
