"""A stand-in agent for the broken adapter files: it is read (its function names), never run."""


def main() -> None:
    """The agent's entry point."""


def append_entry(path: str, record: dict[str, object]) -> None:
    """Where the agent saves a record."""


def send_mail(recipient: str, title: str, text: str) -> dict[str, object]:
    """The agent's own mail tool."""
    return {}
