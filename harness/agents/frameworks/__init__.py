"""Framework adapters: an agent built with a framework, crashed through the framework's own
seams, selected as ``--agent=FRAMEWORK:package.module:factory`` (``harness.agents.loading``).

Each module here imports its framework only when loaded: the core, the plugin and every other
adapter work without any framework installed (``pip install 'crashmatrix[langgraph]'`` /
``'crashmatrix[openai-agents]'`` brings one).
"""
