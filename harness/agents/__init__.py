"""Agents: the adapter protocol between the harness and an agent, its loading from
``--agent``, and the adapters -- the reference agent's binding, unmodified Python agents
declared in YAML (kind 2), any program as a supervised black box (kind 3), with their
session readers and the loopback services they talk to."""
