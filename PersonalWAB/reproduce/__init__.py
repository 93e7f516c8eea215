"""`pwab reproduce`: the paper's tables for a model in one command, one job per module:
`paper` (the published figures, `paper_results.json`, and which run each is set beside),
`rows` (each row's release settings as a `RunConfig`), `cost` (the estimate before any
paid call), `table` (paper vs reproduced with bootstrap intervals) and `cli` (the command)."""
