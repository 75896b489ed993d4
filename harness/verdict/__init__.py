"""Verdict: the expectation for a crash point compared with an observation, every invariant,
and the explanation of a failure. Pure functions of (scenario, observation)."""
