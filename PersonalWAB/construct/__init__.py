"""Build your own PersonalWAB: the benchmark-construction pipeline (paper §3.2), the
profile-consistency evaluation (§4.2) and data statistics, from Amazon Reviews 2023 raw
files. Command line: `python -m PersonalWAB.construct {fetch,build,consistency,stats}`.
Nothing is imported here, so `import PersonalWAB.construct` stays cheap."""
