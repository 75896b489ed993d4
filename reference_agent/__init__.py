"""The reference agent: seed 000's reliable tool loop, driven through the openai client."""
