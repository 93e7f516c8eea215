"""The runner behind `python run.py`, one job per module: `config` (the settings and the
parser made from them), `checks` (settings checked before anything starts), `labels`
(departures from the release and notes), `records` (what a task run writes), `execute`
(prepare a run, then execute it), `pool` (the worker threads), `resume` (resuming a run)
and `cli` (the command line and its exit status)."""
