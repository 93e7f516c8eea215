"""Agent strategies selectable with `run.py --agent_strategy`: the built-in ones in
`PersonalWAB.agents.registry`, or an agent of one's own (`package.module:ClassName`, or a
`pwab.agents` entry point; see `PersonalWAB.agents.custom` and docs/agents.md)."""
