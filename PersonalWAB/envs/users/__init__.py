"""User simulators of the multi-turn track (`--user_mode naive|human|offline`) and
the leak guard applied to every simulated user message before the agent reads it."""
