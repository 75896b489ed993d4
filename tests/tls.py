"""One TLS context for the tests' own httpx clients.

``httpx.Client()`` loads the CA bundle into a new SSL context each time (~15-35 ms of CPU);
the fixtures that build a client per test (``http``, ``rig``) paid it thousands of times a
run, for clients whose every request respx answers in process (no handshake is ever made).
A context built once per process and handed in as ``verify=`` is the same trust store."""

from __future__ import annotations

import ssl

CONTEXT = ssl.create_default_context()
