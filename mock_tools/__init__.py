"""Mock tools whose side effects land in a durable per-case world (files + SQLite)."""
