"""`pwab ablate` (`PersonalWAB.ablate`) end to end: every memory arm run at a matched token budget,
one table with verdicts and a plot, and a rerun that reuses every finished arm."""

from __future__ import annotations


def test_ablate_runs_every_arm_and_writes_one_table_verdicts_and_a_plot(tiny_puma_data, tmp_path, capsys):
    from PersonalWAB.ablate import main

    out = tmp_path / "ablation"
    args = ["--data_dir", str(tiny_puma_data.data_dir), "--search_backend", "bm25s", "--arms",
            "none,last,other_user,oracle", "--memory_tokens", "600", "--end_index", "6", "--out", str(out),
            "--quiet", "1"]
    assert main(args) == 0
    table = (out / "ablation.md").read_text()
    assert (out / "ablation.png").read_bytes().startswith(b"\x89PNG")
    assert all(f"| {arm} |" in table for arm in ("none", "last", "other_user", "oracle"))
    assert "other_user vs last, recommend" in table and "oracle vs none, overall" in table
    assert (out / "cache").is_dir()
    capsys.readouterr()
    assert main(args) == 0  # run again: every arm reused, nothing run twice
    assert capsys.readouterr().err.count("finished earlier, reused") == 4
