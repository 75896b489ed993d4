"""Input: scenario and contract files read from YAML (positions kept, duplicate keys refused,
validated by the JSON Schemas in ``schemas/``), and contracts imported from an MCP tools
list. Every problem is one ``path:line:col: key: problem`` line."""
