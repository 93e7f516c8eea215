"""The leakage and protocol audit (`pwab audit`): what a data folder lets leak between its splits
and into what an agent may read (`audit.data`), and what a run's agent was given that a deployed
agent would not have (`audit.run`), per task. docs/audit.md lists every count."""
