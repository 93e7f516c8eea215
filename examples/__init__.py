"""Examples to copy from: `examples.my_agent.MyAgent` is an agent of one's own (docs/agents.md)."""
