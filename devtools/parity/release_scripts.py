"""The release's shell scripts (`PUMA/scripts/*.sh`) read as bash would run them: which launcher
starts which Python script with which flags. The `puma` check takes the release's settings from
here and from the scripts' own Python defaults (recorded when the release's code parses them),
never from values typed into the harness.

Each script is one command spread over lines with trailing backslashes. Bash reads a backslash
followed by a space as an escaped space, so `--train_on param \\ ` (as the release's
finetune_function_param.sh ends) passes a stray " " argument and ends the command there; such
tokens are kept in `stray` and left out of the flags, and the reading is reported.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

LAUNCHERS = ("deepspeed", "accelerate", "python", "torchrun")


class ScriptError(ValueError):
    """A release script this reader cannot take apart."""


@dataclass(frozen=True)
class ScriptCall:
    """One release script's command: the launcher, its options, the Python script and its flags."""

    name: str  # the .sh file's name
    launcher: str
    launcher_options: tuple[str, ...]
    script: str  # the Python file, relative to the script's folder's parent (e.g. finetune_llama.py)
    flags: dict[str, str | bool] = field(default_factory=dict)  # --flag -> its value (True: a flag alone)
    stray: tuple[str, ...] = ()  # arguments bash passes that belong to no flag (e.g. " " after `\\ `)

    @property
    def processes(self) -> int | None:
        """The training processes the launcher starts when its options say (deepspeed's
        --include=localhost:0,1,2,3 is 4); None when they leave it to the machine."""
        for option in self.launcher_options:
            if option.startswith("--include="):
                hosts = option.split("=", 1)[1]
                return sum(len(part.split(":", 1)[1].split(",")) for part in hosts.split("@") if ":" in part)
            if option.startswith("--num_gpus="):
                return int(option.split("=", 1)[1])
        return None

    def argv(self, replace: dict[str, str] | None = None, drop: tuple[str, ...] = ()) -> list[str]:
        """The script's flags as an argument list, `replace` giving other values to some (paths on
        this machine) and `drop` leaving some out; the stray arguments are not passed."""
        replace = replace or {}
        args: list[str] = []
        for flag, value in self.flags.items():
            if flag in drop:
                continue
            value = replace.get(flag, value)
            args += [flag] if value is True else [flag, str(value)]
        for flag, value in replace.items():
            if flag not in self.flags and flag not in drop:
                args += [flag, value]
        return args


def _command_words(text: str, where: Path) -> list[str]:
    """The words of the script's first command, as bash splits them: lines that end in a
    backslash continue on the next, comments are dropped, and the command ends at the first line
    that does not continue (a backslash followed by a space escapes the space instead)."""
    logical, current = [], ""
    for line in text.splitlines():
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    if current:
        logical.append(current)
    for line in logical:
        words = shlex.split(line, comments=True, posix=True)
        if words:
            return words
    raise ScriptError(f"{where}: no command")


def read_script(path: Path) -> ScriptCall:
    """The command of one release script."""
    words = _command_words(path.read_text(encoding="utf-8"), path)
    launcher = Path(words[0]).name
    if launcher not in LAUNCHERS:
        raise ScriptError(f"{path}: starts with {words[0]!r}, not one of {', '.join(LAUNCHERS)}")
    position = 1
    if launcher == "accelerate" and words[1:2] == ["launch"]:
        position = 2
    options: list[str] = []
    while position < len(words) and not words[position].endswith(".py"):
        options.append(words[position])
        position += 1
    if position == len(words):
        raise ScriptError(f"{path}: no Python script in its command")
    script = words[position]
    flags: dict[str, str | bool] = {}
    stray: list[str] = []
    rest = words[position + 1:]
    index = 0
    while index < len(rest):
        word = rest[index]
        if word.startswith("--"):
            name, equals, value = word.partition("=")
            if equals:
                flags[name] = value
            elif index + 1 < len(rest) and not rest[index + 1].startswith("--") and rest[index + 1].strip():
                flags[name] = rest[index + 1]
                index += 1
            else:
                flags[name] = True
        else:
            stray.append(word)
        index += 1
    return ScriptCall(path.name, launcher, tuple(options), script, flags, tuple(stray))


def release_scripts(release_dir: Path) -> dict[str, ScriptCall]:
    """Every `PUMA/scripts/*.sh` of the release, by file name."""
    folder = Path(release_dir) / "PUMA" / "scripts"
    calls = {path.name: read_script(path) for path in sorted(folder.glob("*.sh"))}
    if not calls:
        raise ScriptError(f"{folder}: no scripts")
    return calls
