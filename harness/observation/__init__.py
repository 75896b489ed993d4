"""Observation: what a finished case left, read once after its last life into one frozen
value (``observation.Observation``); ``reading`` is where the files are read."""
