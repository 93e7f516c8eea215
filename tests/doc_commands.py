"""The command lines the docs show, read from their shell blocks, and what is wrong with each.

A doc line is checked without doing its work: its program, subcommand, module or script
exists, and every flag it gives is one the command takes, with a literal value of a flag that
has choices (or a boolean or number) one the command accepts. What a Python command takes is
read from the parsers the settings system builds while the command prints its `--help`, so the
check follows the code, not a copy of its flags. A shell script is read for the project
commands it runs: each is checked the same way, with the line's flags where the script has
`"$@"` and the line's variables (or the script's defaults) in its `${NAME:-default}` values.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import functools
import importlib
import importlib.util
import io
import re
import runpy
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import PersonalWAB.settings as settings_module

REPO_ROOT = Path(__file__).resolve().parent.parent
SHELL_FENCES = {"bash", "sh", "shell", "console"}
FENCE = re.compile(r"^\s*```(\S*)")
PROJECT_PACKAGES = ("PersonalWAB", "PUMA", "devtools")
PROJECT_SCRIPT_DIRS = ("scripts", "examples")  # `python scripts/x.py`; run.py is the other script at the root
ENTRY_POINTS = {"pwab": "PersonalWAB.cli", "puma": "PUMA.__main__"}  # pyproject.toml's [project.scripts]
# Words that only say how the command after them runs: the shell's keywords of a compound
# command's body, and launchers that start the command unchanged (a cluster's, the shell's).
SHELL_KEYWORDS = {"do", "then", "else", "exec", "time", "!", "{"}
LAUNCHERS = {"srun", "nohup", "env"}
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
ARRAY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\+?=\(")
VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")
PYTHON = re.compile(r"(.*/)?python(3(\.\d+)?)?|\$\{?\w*(py|PY|python|PYTHON)\w*\}?")
NEGATIVE_NUMBER = re.compile(r"-\d[\d.]*")
# A value the docs leave to the reader: DIR, FILE.yaml, N, $VAR, <...>, /path/to/..., a glob.
PLACEHOLDER = re.compile(r"[A-Z][A-Z0-9_]*(\.\w+)?(\.\.\.)?|.*[$<>{}*?].*|/path/to/.*")


def is_placeholder(value: str) -> bool:
    return PLACEHOLDER.fullmatch(value) is not None


# ---------------------------------------------------------------- reading shell


@dataclass(frozen=True)
class Word:
    text: str  # the word as the command receives it (quotes removed)
    raw: str  # as written (an unquoted `$A` is expanded, a quoted one is not)


def split_line(text: str) -> list[list[Word]]:
    """The simple commands of one logical shell line, each as its words: split at `&&`, `||`,
    `;`, `|` and `&`; a comment, and a redirection with its target, dropped; quotes removed;
    `$(...)`, `${...}` and a doc's `<placeholder>` kept whole."""
    segments: list[list[Word]] = [[]]
    text_part, raw_part, started = "", "", False

    def finish() -> None:
        nonlocal text_part, raw_part, started
        if started:
            segments[-1].append(Word(text_part, raw_part))
        text_part, raw_part, started = "", "", False

    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t":
            finish()
            i += 1
        elif c == "#" and not started:
            break
        elif c == "|" and started and text[i + 1:i + 2] not in ("", " ", "\t", "|"):
            text_part, raw_part = text_part + c, raw_part + c  # a synopsis's `md|html|csv` (a pipe has spaces)
            i += 1
        elif text.startswith(("&&", "||"), i) or c in ";&|":
            finish()
            if segments[-1]:
                segments.append([])
            i += 2 if text.startswith(("&&", "||"), i) else 1
        elif c == "<" and not started and text.find(">", i) > i:
            end = text.index(">", i) + 1
            text_part, raw_part, started = text_part + text[i:end], raw_part + text[i:end], True
            i = end
        elif c in "<>" and (not started or raw_part.isdigit()):
            text_part, raw_part, started = "", "", False  # a redirection: `2>`, `>>`, `>&`, then its target
            i += 1
            while i < n and text[i] in ">&":
                i += 1
            while i < n and text[i] in " \t":
                i += 1
            while i < n and text[i] not in " \t;&|":
                i += 1
        elif c == "'":
            end = text.find("'", i + 1)
            end = n if end < 0 else end
            text_part, raw_part, started = text_part + text[i + 1:end], raw_part + text[i:end + 1], True
            i = end + 1
        elif c == '"':
            j, inner = i + 1, ""
            while j < n and text[j] != '"':
                if text[j] == "\\" and j + 1 < n and text[j + 1] in '"\\$`':
                    inner, j = inner + text[j + 1], j + 2
                else:
                    inner, j = inner + text[j], j + 1
            text_part, raw_part, started = text_part + inner, raw_part + text[i:j + 1], True
            i = j + 1
        elif c == "\\" and i + 1 < n:
            text_part, raw_part, started = text_part + text[i + 1], raw_part + text[i:i + 2], True
            i += 2
        elif c == "$" and i + 1 < n and text[i + 1] in "({":
            opening, closing = text[i + 1], {"(": ")", "{": "}"}[text[i + 1]]
            depth, j = 0, i + 1
            while j < n:
                depth += (text[j] == opening) - (text[j] == closing)
                if depth == 0:
                    break
                j += 1
            text_part, raw_part, started = text_part + text[i:j + 1], raw_part + text[i:j + 1], True
            i = j + 1
        else:
            text_part, raw_part, started = text_part + c, raw_part + c, True
            i += 1
    finish()
    return [segment for segment in segments if segment]


def logical_lines(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Lines with their backslash continuations joined, each numbered by its first line."""
    joined: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, line in lines:
        start, text = pending if pending is not None else (number, "")
        text += line
        if re.search(r"(?<!\\)(\\\\)*\\$", line):
            pending = (start, text[:-1])
        else:
            joined.append((start, text))
            pending = None
    if pending is not None:
        joined.append(pending)
    return joined


@dataclass(frozen=True)
class Command:
    """One project command of a line: the environment the line sets for it, and its words."""

    env: tuple[tuple[str, str], ...]
    words: tuple[str, ...]

    def __str__(self) -> str:
        return " ".join([*(f"{name}={value}" for name, value in self.env), *self.words])


def command_words(segment: list[Word], variables: dict[str, str]) -> list[Command]:
    """The project commands one simple command runs (none for another program's, a builtin's
    or an assignment's). Leading `NAME=value` words are the command's environment; a segment of
    assignments alone sets `variables`, which later unquoted `$NAME` words of the block expand
    to; `bash -c 'STRING'` is read as the commands of STRING."""
    words = list(segment)
    if is_array_assignment(words):
        return []
    assigned: dict[str, str] = {}
    while words and (words[0].text in SHELL_KEYWORDS or ASSIGNMENT.match(words[0].raw)):
        first = words.pop(0)
        if first.text not in SHELL_KEYWORDS:
            name, _, value = first.text.partition("=")
            assigned[name] = value
    if not words:
        variables.update(assigned)
        return []
    expanded: list[str] = []
    for word in words:
        match = VARIABLE.fullmatch(word.raw)
        if match and match.group(1) in variables:
            expanded += [w.text for part in split_line(variables[match.group(1)]) for w in part]
        else:
            expanded.append(word.text)
    while expanded and expanded[0] in LAUNCHERS:
        expanded.pop(0)
        while expanded and expanded[0].startswith("-"):
            expanded.pop(0)  # the launcher's own options
    if len(expanded) > 2 and expanded[0] in ("bash", "sh") and expanded[1] == "-c":
        return [command for part in split_line(expanded[2]) for command in command_words(part, variables)]
    return [Command(tuple(assigned.items()), tuple(expanded))] if kind_of(expanded) else []


def is_array_assignment(words: list[Word]) -> bool:
    """`NAME=(...)`: its words are the array's, not a command."""
    for word in words:
        if word.text in SHELL_KEYWORDS:
            continue
        return ASSIGNMENT.match(word.raw) is not None and ARRAY.match(word.raw) is not None
    return False


def kind_of(words: list[str]) -> str | None:
    """Which of the project's kinds of command `words` is (None: another program)."""
    if not words:
        return None
    program, rest = words[0], words[1:]
    if program.removeprefix(".venv/bin/") in ENTRY_POINTS:
        return program.removeprefix(".venv/bin/")
    if PYTHON.fullmatch(program):
        if len(rest) > 1 and rest[0] == "-m" and rest[1].split(".")[0] in PROJECT_PACKAGES:
            return "python -m"
        if rest and rest[0] == "run.py":
            return "run.py"
        if rest and rest[0].endswith(".py") and rest[0].split("/")[0] in PROJECT_SCRIPT_DIRS:
            return "python script"
        return None
    if program in ("bash", "sh", "source", ".") and rest and rest[0].endswith(".sh") \
            and not rest[0].startswith(("/", "$")):
        return "shell script"
    return None


@dataclass(frozen=True)
class DocLine:
    """One line of a doc's shell block that runs a command of this project."""

    doc: str
    line: int
    commands: tuple[Command, ...]

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def shell_blocks(path: Path) -> list[list[tuple[int, str]]]:
    """The numbered lines of each fenced shell block of a Markdown file (a console block's
    lines without their `$ ` prompt; its output lines left out)."""
    blocks: list[list[tuple[int, str]]] = []
    language: str | None = None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        fence = FENCE.match(line)
        if fence:
            if language is None:
                language = fence.group(1).lower()
                blocks.append([])
            else:
                language = None
            continue
        if language in SHELL_FENCES:
            if language == "console":
                prompt = re.match(r"\s*\$ (.*)", line)
                if prompt is None:
                    continue
                line = prompt.group(1)
            blocks[-1].append((number, line))
    return blocks


def doc_files() -> list[Path]:
    return [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]


def doc_command_lines() -> list[DocLine]:
    """Every line of the docs' shell blocks that runs one of this project's commands."""
    found = []
    for path in doc_files():
        for block in shell_blocks(path):
            variables: dict[str, str] = {}
            for number, text in logical_lines(block):
                commands = [command for segment in split_line(text) for command in command_words(segment, variables)]
                if commands:
                    found.append(DocLine(path.relative_to(REPO_ROOT).as_posix(), number, tuple(commands)))
    return found


# ---------------------------------------------------------------- what a command takes


@dataclass(frozen=True)
class Help:
    """What printing a command's `--help` showed of it."""

    parsers: tuple[argparse.ArgumentParser, ...]
    exit_code: object
    output: str


@functools.cache
def help_of(how: str, target: str) -> Help:
    """The parsers the settings system builds while a command prints its `--help`: `how` is
    "function" ("module:function" called with ["--help"]), "module" (run as `python -m`) or
    "script" (a file of the repository run as `python FILE`). Only `--help` runs: a project
    command parses its flags before any work."""
    built: list[argparse.ArgumentParser] = []
    original = settings_module.build_parser

    def recording(*classes: type, **options: object) -> argparse.ArgumentParser:
        parser = original(*classes, **options)
        built.append(parser)
        return parser

    out, code, saved_argv = io.StringIO(), None, sys.argv
    settings_module.build_parser = recording
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # runpy's note that the module was imported before
            if how == "function":
                module, _, function = target.partition(":")
                sys.argv = [target, "--help"]
                getattr(importlib.import_module(module), function)(["--help"])
            elif how == "module":
                sys.argv = [target, "--help"]
                runpy.run_module(target, run_name="__main__", alter_sys=True)
            else:
                sys.argv = [target, "--help"]
                runpy.run_path(str(REPO_ROOT / target), run_name="__main__")
    except SystemExit as stop:
        code = stop.code
    finally:
        settings_module.build_parser = original
        sys.argv = saved_argv
    return Help(tuple(built), code, out.getvalue())


def dispatch_table(module: ModuleType) -> dict[str, tuple[str, str]] | None:
    """A module's table of subcommands (`PersonalWAB.cli.dispatch`'s: name -> ("module:function", help))."""
    for name in ("COMMANDS", "STEPS"):
        table = getattr(module, name, None)
        if isinstance(table, dict) and table and all(
                isinstance(v, tuple) and len(v) == 2 and ":" in str(v[0]) for v in table.values()):
            return table
    return None


def step_modules(module: ModuleType) -> dict[str, str] | None:
    """A launcher's steps (`PUMA.launch`: step -> the module it starts with the words after `--`,
    the launched rows of PUMA/steps.py)."""
    if module.__name__ != "PUMA.launch":
        return None
    from PUMA.steps import STEPS

    return {step.name: step.module for step in STEPS if step.launched}


def is_flag(word: str) -> bool:
    return word.startswith("-") and word != "-" and word != "--" and not NEGATIVE_NUMBER.fullmatch(word)


def synopsis_words(words: list[str]) -> list[str]:
    """A line's words as a command line: a synopsis's `[optional]` brackets and `...`
    repetition marks dropped."""
    cleaned = []
    for word in words:
        bare = word.lstrip("[").rstrip("]").removesuffix("...").rstrip("]")
        if bare or not word:  # `--doc ""` gives an empty value
            cleaned.append(bare)
    return cleaned


def value_problem(flag: str, action: argparse.Action, value: str) -> str | None:
    """What is wrong with a literal value given to a flag (None: nothing, or a placeholder)."""
    if is_placeholder(value):
        return None
    alternatives = value.split("|") if "|" in value else [value]  # a synopsis's `--format md|html|csv`
    for alternative in alternatives:
        if action.choices is not None:
            choices = [str(choice) for choice in action.choices]
            if alternative not in choices:
                return f"{flag} {alternative!r} is not one of its choices: {', '.join(choices)}"
        elif action.type in (int, float, settings_module.parse_bool):
            try:
                action.type(alternative)
            except (ValueError, argparse.ArgumentTypeError):
                return f"{flag} {alternative!r} is not a value it takes ({action.metavar or action.type.__name__})"
    return None


def argument_problems(name: str, parsers: tuple[argparse.ArgumentParser, ...], words: list[str]) -> list[str]:
    """What argparse would refuse in `words` given to the command `name`: an unknown flag (or
    an old spelling), a flag's literal value it does not take, an operand where it takes none,
    or a literal operand outside its choices."""
    options = {flag: action for parser in parsers for action in parser._actions for flag in action.option_strings}
    positionals = [action for parser in parsers for action in parser._actions if not action.option_strings]
    problems: list[str] = []
    operands: list[str] = []
    words = synopsis_words(words)
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word == "--":
            operands += words[i:]
            break
        if not is_flag(word):
            operands.append(word)
            continue
        flag, equals, inline = word.partition("=")
        action = options.get(flag)
        if action is None:
            shown = [known for known, other in options.items() if other.help != argparse.SUPPRESS]
            close = difflib.get_close_matches(flag, shown, n=1)
            problems.append(f"`{name}` has no flag {flag}" + (f" (did you mean {close[0]}?)" if close else ""))
            while i < len(words) and not is_flag(words[i]):
                i += 1  # its values
            continue
        if type(action).__name__ == "_OldSpelling":
            problems.append(f"{flag} is an old spelling of {getattr(action, 'new_flag', '?')}")
        if equals:
            values = [inline]
        else:
            most = {None: 1, "?": 1, "*": len(words), "+": len(words)}.get(action.nargs, action.nargs)
            values = []
            while i < len(words) and len(values) < most and not is_flag(words[i]):
                values.append(words[i])
                i += 1
            if action.nargs in (None, "+") and not values or isinstance(action.nargs, int) and len(values) < most:
                problems.append(f"{flag} needs a value")
        problems += [p for p in (value_problem(flag, action, value) for value in values) if p]
    if operands and not positionals:
        given = [operand for operand in operands if not operand.startswith("$")]  # may expand to nothing
        if given:
            problems.append(f"`{name}` takes no operands, got {' '.join(given)}")
    for action in positionals:
        taken = operands[:1] if action.nargs in (None, "?") else list(operands)
        operands = operands[len(taken):]
        if action.choices is not None:
            problems += [f"`{name}` {action.dest} {operand!r} is not one of {', '.join(map(str, action.choices))}"
                         for operand in taken if not is_placeholder(operand) and operand not in action.choices]
    return problems


# ---------------------------------------------------------------- checking a command


def check(words: list[str] | tuple[str, ...], env: dict[str, str] | None = None) -> list[str]:
    """What is wrong with one project command line (empty when nothing is); `env`: the
    variables the line sets for it (a shell script reads them)."""
    words = list(words)
    kind = kind_of(words)
    if kind in ENTRY_POINTS:
        module = importlib.import_module(ENTRY_POINTS[kind])
        return check_table(kind, module, dispatch_table(module) or {}, words[1:])
    if kind == "python -m":
        return check_module(words[2], words[3:])
    if kind in ("run.py", "python script"):
        return check_script(words[1], words[2:])
    if kind == "shell script":
        return check_shell_script(words[0], words[1], words[2:], env or {})
    return []


def check_table(prog: str, module: ModuleType, table: dict[str, tuple[str, str]], words: list[str]) -> list[str]:
    """A dispatcher's line: its command exists, and the rest is checked against that command."""
    if not words or is_flag(words[0]):
        unknown = [word for word in words if is_flag(word) and word not in ("-h", "--help")]
        if not words:
            return [f"`{prog}` needs a command: one of {', '.join(table)}"]
        return [f"`{prog}` takes no flag {flag} before its command" for flag in unknown]
    name, rest = words[0], words[1:]
    if name not in table:
        close = difflib.get_close_matches(name, table, n=1)
        return [f"`{prog}` has no command {name!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                + f"; it has {', '.join(table)}"]
    target = table[name][0]
    module_name, _, function = target.partition(":")
    inner = importlib.import_module(module_name)
    nested = dispatch_table(inner)
    if function == "main" and nested is not None and inner is not module:
        return check_table(f"{prog} {name}", inner, nested, rest)
    return checked_help(f"{prog} {name}", help_of("function", target), rest)


def checked_help(name: str, shown: Help, words: list[str]) -> list[str]:
    if shown.exit_code not in (0, None) or not shown.parsers:
        return [f"`{name} --help` did not show its flags (exit {shown.exit_code}): {shown.output.strip()[-300:]}"]
    return argument_problems(name, shown.parsers, words)


def check_module(name: str, words: list[str]) -> list[str]:
    """`python -m NAME ...`: the module exists and runs, and the rest is checked against it."""
    try:
        spec = importlib.util.find_spec(name)
    except ModuleNotFoundError:
        spec = None
    if spec is None:
        return [f"there is no module {name}"]
    runs = name
    if spec.submodule_search_locations is not None:
        runs = f"{name}.__main__"
        if importlib.util.find_spec(runs) is None:
            return [f"{name} is a package without __main__.py: `python -m {name}` runs nothing"]
    module = importlib.import_module(runs)
    table = dispatch_table(module)
    if table is not None:
        return check_table(f"python -m {name}", module, table, words)
    own, after = (words[:words.index("--")], words[words.index("--") + 1:]) if "--" in words else (words, None)
    problems = checked_help(f"python -m {name}", help_of("module", name), own)
    steps = step_modules(module)
    if steps is not None and after is not None:  # a launcher: the words after `--` are its step's
        step = next((word for word in synopsis_words(own) if not is_flag(word)), None)
        if step in steps:
            problems += check_module(steps[step], after)
    return problems


def check_script(path: str, words: list[str]) -> list[str]:
    """`python FILE ...` of a script in the repository."""
    file = REPO_ROOT / path
    if not file.is_file():
        return [f"there is no script {path}"]
    text = file.read_text(encoding="utf-8")
    if not any(f"from {package}" in text or f"import {package}" in text for package in PROJECT_PACKAGES):
        flags = [word for word in words if is_flag(word)]  # not a project command: its --help could run work
        return [f"{path} does not take its flags through the project's settings ({' '.join(flags)})"] if flags else []
    return checked_help(f"python {path}", help_of("script", path), words)


HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")
ARRAY_USE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\[@\]\}")
ALTERNATE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*:\+(.*)\}", re.DOTALL)


def script_lines(path: str) -> list[tuple[int, str]]:
    """A shell script's logical lines: continuations joined, an array literal `NAME=(...)` over
    several lines joined, here-document bodies (another program's input) left out."""
    kept: list[tuple[int, str]] = []
    ending: str | None = None
    for number, line in enumerate((REPO_ROOT / path).read_text(encoding="utf-8").splitlines(), start=1):
        if ending is not None:
            ending = None if line.strip() == ending else ending
            continue
        heredoc = HEREDOC.search(line)
        ending = heredoc.group(1) if heredoc else None
        kept.append((number, line))
    joined: list[tuple[int, str]] = []
    for number, text in logical_lines(kept):
        if joined and joined[-1][1].count("(") > joined[-1][1].count(")") and ARRAY.search(joined[-1][1]):
            joined[-1] = (joined[-1][0], f"{joined[-1][1]} {text}")
        else:
            joined.append((number, text))
    return joined


def arrays_of(text: str) -> dict[str, list[str]]:
    """The words each `NAME=(...)` / `NAME+=(...)` of a line adds to the array NAME."""
    found: dict[str, list[str]] = {}
    for match in ARRAY.finditer(text):
        depth, j = 1, match.end()
        while j < len(text) and depth:
            depth += (text[j] == "(") - (text[j] == ")")
            j += 1
        found.setdefault(match.group(1), []).extend(
            word.text for part in split_line(text[match.end():j - 1]) for word in part)
    return found


def expanded_script_words(words: list[Word], arrays: dict[str, list[str]]) -> list[str]:
    """A script's command as it may run: `"${NAME[@]}"` as every word the array is given
    anywhere before, `${NAME:+WORDS}` as WORDS (the flags it adds when NAME is set)."""
    result: list[str] = []
    for word in words:
        array = ARRAY_USE.fullmatch(word.text)
        alternate = ALTERNATE.fullmatch(word.text)
        if array:
            result += arrays.get(array.group(1), [])
        elif alternate:
            result += [inner.text for part in split_line(alternate.group(1)) for inner in part]
        else:
            result.append(word.text)
    return result


@functools.cache
def script_commands(path: str) -> tuple[tuple[int, tuple[str, ...]], ...]:
    """The commands a shell script runs, with their line numbers, as they may run: the
    script's own prefixes (`exec`, `NAME=value`) dropped and its arrays expanded; `$@` stands
    where the script's arguments go."""
    arrays: dict[str, list[str]] = {}
    found = []
    for number, text in script_lines(path):
        for name, words in arrays_of(text).items():
            arrays.setdefault(name, []).extend(words)
        for segment in split_line(text):
            words = list(segment)
            if is_array_assignment(words):
                continue
            while words and (words[0].text in SHELL_KEYWORDS or ASSIGNMENT.match(words[0].raw)):
                words.pop(0)
            if words:
                found.append((number, tuple(expanded_script_words(words, arrays))))
    return tuple(found)


PARAMETER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?[-=]([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def with_environment(word: str, env: dict[str, str]) -> str:
    """A script's word with the variables the line sets put in, and `${NAME:-default}` as its
    default otherwise: a literal value is then checked as the doc line's own would be."""
    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(3)
        if name in env:
            return env[name]
        return match.group(2) if match.group(2) is not None else match.group(0)

    return PARAMETER.sub(value, word)


def check_shell_script(runner: str, path: str, words: list[str], env: dict[str, str],
                       seen: frozenset[str] = frozenset()) -> list[str]:
    """`bash SCRIPT ...`: the script exists, every project command it runs takes the flags it
    gives (with the values the line's variables or the script's defaults give them), and the
    flags the line gives (from its first flag on; the words before are the script's own
    operands) are taken by each project command the script passes them to (`"$@"`)."""
    if not (REPO_ROOT / path).is_file():
        return [f"there is no script {path}"]
    if runner in ("source", ".") or path in seen:
        return []
    first_flag = next((i for i, word in enumerate(words) if is_flag(word)), len(words))
    flags = words[first_flag:]
    problems = []
    passes_on = False
    for number, command in script_commands(path):
        runs = [with_environment(word, env) for word in command]
        if "$@" in command:
            passes_on = True
            at = command.index("$@")
            runs = [*runs[:at], *flags, *runs[at + 1:]]
        if kind_of(runs) == "shell script":
            found = check_shell_script(runs[0], runs[1], runs[2:], env, seen | {path})
        else:
            found = check(runs)  # another program's command (pip, pytest) is not checked
        problems += [f"{problem} (at {path}:{number})" for problem in found]
    if flags and not passes_on:
        problems.append(f"{path} passes no arguments on (no \"$@\"), yet the line gives {' '.join(flags)}")
    return problems
