"""The one settings system behind every command: a command's settings are a dataclass whose
fields are made by `setting()` (help, choices and default written once; the annotation is the
type), and `parse()` turns a command line into that dataclass.

The same rules hold for every command:
- every flag has help text, and `--help` ends it with its default, once;
- a boolean is `--name` (on), `--name 1|0` or `--name true|false` (the release's `--shuffle 1`
  and `--puma_generate 0` included);
- `--config FILE.yaml` gives any settings by their flag names; flags on the command line
  override the file. A value in the file is the flag's value only as the same text on the command
  line would be (the flag's own converter and choices; a YAML boolean, float, list or null of
  another type is refused), one setting is given once (not as `out` and `output` both), and only
  a regular file of at most 1 MiB, whose aliases expand within that, is read;
- an old spelling of a flag (`aliases`) keeps working and says which flag replaced it;
- the resolved settings (`resolved()`) are what a command records next to its outputs, and the
  settings marked `resume=True` are those a resumed run must share (`resume_keys()`).

Positional settings (`positional=True`) are the command's operands, e.g. the files a
leaderboard command reads. Nothing here imports more than the standard library, PyYAML and
`PersonalWAB.scratch` (which file is regular).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import functools
import re
import sys
from dataclasses import MISSING, Field, dataclass, field, fields, is_dataclass
from pathlib import Path
from collections.abc import Callable, Collection, Sequence
import types
import typing
from typing import Any, Literal, TypeVar, Union, cast, get_args, get_origin, overload

from PersonalWAB.errors import DataError

T = TypeVar("T")

CONFIG_FLAG = "--config"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def parse_bool(text: str | bool | int) -> bool:
    """A boolean setting's value: 1/0, true/false, yes/no, on/off."""
    if isinstance(text, bool):
        return text
    if isinstance(text, int) and text in (0, 1):
        return bool(text)
    word = str(text).strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"expected 1/0 or true/false, got {text!r}")


# reads a --config file's section (its mapping; where: the file; key: the section's name) into its typed value
SectionReader = Callable[[Any, str, str], Any]


@dataclass(frozen=True)
class Spec:
    """What a setting says about its flag (kept in the dataclass field's metadata)."""

    help: str
    choices: tuple[Any, ...] | None = None
    metavar: str | None = None
    default_text: str | None = None  # shown instead of the default (a None worked out at run time)
    kind: Callable[[str], Any] | None = None  # how a command-line string becomes the value
    aliases: tuple[str, ...] = ()  # old spellings: accepted, with a warning naming the flag
    compat: tuple[str, ...] = ()  # other spellings kept without a warning (the release's own flags)
    resume: bool = False  # a resumed run must have the same value
    positional: bool = False
    nargs: str | int | None = None
    required: bool = False
    flag: str | None = None  # the flag's name when it is not the field's
    hidden: bool = False  # accepted but left out of --help (a flag kept only for compatibility)
    # a mapping of another command's flags, given in the --config file only; a reader makes it a typed value
    section: SectionReader | bool = False


SPEC_KEY = "pwab_setting"


@overload
def setting(default: type[T], help: str, *, choices: Collection[Any] | None = None, metavar: str | None = None,
            default_text: str | None = None, kind: Callable[[str], Any] | None = None,
            aliases: Sequence[str] = (), compat: Sequence[str] = (), resume: bool = False,
            positional: bool = False, nargs: str | int | None = None, required: Literal[True],
            flag: str | None = None, hidden: bool = False, factory: None = None,
            section: SectionReader | bool = False) -> T: ...


@overload
def setting(default: type[T], help: str, *, choices: Collection[Any] | None = None, metavar: str | None = None,
            default_text: str | None = None, kind: Callable[[str], Any] | None = None,
            aliases: Sequence[str] = (), compat: Sequence[str] = (), resume: bool = False,
            positional: Literal[True], nargs: str | int | None = None, required: bool = False,
            flag: str | None = None, hidden: bool = False, factory: None = None,
            section: SectionReader | bool = False) -> T: ...


@overload
def setting(default: T, help: str, *, choices: Collection[Any] | None = None, metavar: str | None = None,
            default_text: str | None = None, kind: Callable[[str], Any] | None = None,
            aliases: Sequence[str] = (), compat: Sequence[str] = (), resume: bool = False,
            positional: bool = False, nargs: str | int | None = None, required: Literal[False] = False,
            flag: str | None = None, hidden: bool = False, factory: None = None,
            section: SectionReader | bool = False) -> T: ...


@overload
def setting(default: None, help: str, *, choices: Collection[Any] | None = None, metavar: str | None = None,
            default_text: str | None = None, kind: Callable[[str], Any] | None = None,
            aliases: Sequence[str] = (), compat: Sequence[str] = (), resume: bool = False,
            positional: bool = False, nargs: str | int | None = None, required: Literal[False] = False,
            flag: str | None = None, hidden: bool = False, factory: Callable[[], T],
            section: SectionReader | bool = False) -> T: ...


def setting(default: Any, help: str, *, choices: Collection[Any] | None = None, metavar: str | None = None,
            default_text: str | None = None, kind: Callable[[str], Any] | None = None,
            aliases: Sequence[str] = (), compat: Sequence[str] = (), resume: bool = False,
            positional: bool = False, nargs: str | int | None = None, required: bool = False,
            flag: str | None = None, hidden: bool = False, factory: Callable[[], Any] | None = None,
            section: SectionReader | bool = False) -> Any:
    """A settings-dataclass field and its flag. The field's annotation is the setting's type: the
    parser converts a value by it (`bool`, `int`, `float`, `Path`, each also as `X | None` or
    `list[X]`; `Literal[...]` gives the choices), and mypy checks the default against it (the
    call is typed as its default). A required flag or an operand without a default names its type
    in place of the default: `setting(str, "...", required=True)`. `help` is written without the
    default (the parser adds it); `kind` converts a command-line string the annotation cannot (a
    budget, a shard `I/N`); `factory` makes a mutable default (a list); `section`: a mapping of
    another command's flags, which only a --config file can give (a `SectionReader` reads it into
    its typed value)."""
    if not help.strip():
        raise ValueError("every setting needs help text")
    spec = Spec(help=help, choices=tuple(choices) if choices is not None else None, metavar=metavar,
                default_text=default_text, kind=kind, aliases=tuple(aliases), compat=tuple(compat), resume=resume,
                positional=positional, nargs=nargs, required=required, flag=flag, hidden=hidden,
                section=section)
    if factory is not None:
        return field(default_factory=factory, metadata={SPEC_KEY: spec})
    if required or (positional and isinstance(default, type)):
        return field(default=None, metadata={SPEC_KEY: spec})
    return field(default=default, metadata={SPEC_KEY: spec})


def spec_of(item: Field[Any]) -> Spec:
    spec = item.metadata.get(SPEC_KEY)
    if spec is None:
        raise TypeError(f"settings field {item.name!r} was not made by setting()")
    return spec


def is_setting(item: Field[Any]) -> bool:
    """Whether a dataclass field is a flag (a field made otherwise holds what the command fills in)."""
    return SPEC_KEY in item.metadata


def default_of(item: Field[Any]) -> Any:
    if item.default is not MISSING:
        return item.default
    if item.default_factory is not MISSING:
        return item.default_factory()
    return None


def flag_name(item: Field[Any]) -> str:
    """The flag's name without dashes (also its key in a --config file)."""
    return spec_of(item).flag or item.name


def _resolve_annotations(cls: type) -> None:
    """Give each settings field of `cls` its annotation as a type (under `from __future__ import
    annotations` it is a string), so the parser reads what the annotation says; an annotation that
    cannot be resolved here (a name imported for type checking only) stays a string."""
    if cls in _RESOLVED:
        return
    try:
        hints = typing.get_type_hints(cls)
    except (NameError, TypeError):
        hints = {}
    for item in fields(cls):
        if item.name in hints:
            item.type = hints[item.name]
    _RESOLVED.add(cls)


_RESOLVED: set[type] = set()


def value_type(item: Field[Any]) -> Any:
    """The type of one value of the setting, from its annotation: `X | None` is `X`, `list[X]`
    is `X`; None when the annotation is not resolved or says nothing a value converts to."""
    hint = item.type
    if isinstance(hint, str):
        return None
    if get_origin(hint) in (Union, types.UnionType):
        args = [arg for arg in get_args(hint) if arg is not type(None)]
        hint = args[0] if len(args) == 1 else None
    if get_origin(hint) in (list, tuple):
        args = [arg for arg in get_args(hint) if arg is not Ellipsis]
        hint = args[0] if len(args) == 1 else None
    return hint


def choices_of(item: Field[Any]) -> tuple[Any, ...] | None:
    """The values a setting takes: its `choices`, else those of a `Literal[...]` annotation."""
    spec = spec_of(item)
    if spec.choices is not None:
        return spec.choices
    hint = value_type(item)
    return get_args(hint) if get_origin(hint) is Literal else None


def is_boolean(item: Field[Any]) -> bool:
    return (value_type(item) is bool or isinstance(default_of(item), bool)
            or spec_of(item).kind is parse_bool)


def converter(item: Field[Any]) -> Callable[[str], Any] | None:
    """How a command-line string becomes the value: the setting's `kind`, else its annotation's
    type (a boolean, a number, a path; text needs no converting)."""
    spec = spec_of(item)
    if spec.kind is not None:
        return spec.kind
    if is_boolean(item):
        return parse_bool
    hint = value_type(item)
    if get_origin(hint) is Literal:
        kinds = {type(arg) for arg in get_args(hint)}
        hint = kinds.pop() if len(kinds) == 1 else None
    if hint in (int, float, Path):
        return cast(Callable[[str], Any], hint)
    if hint is None and isinstance(default_of(item), (int, float)):  # an annotation not resolved here
        return type(default_of(item))
    return None


# ---------------------------------------------------------------- help


class DefaultsOnceFormatter(argparse.RawDescriptionHelpFormatter):
    """Help that ends each option with its default, once: not when the help already says
    its default (a default worked out at run time), and not for None or an empty value,
    which say nothing. Descriptions keep their own line breaks."""

    SAYS_DEFAULT = re.compile(r"\(default\b|\bdefault:", re.IGNORECASE)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        silent = action.default in (None, argparse.SUPPRESS, [], ()) or not action.option_strings
        if silent or self.SAYS_DEFAULT.search(text):  # also matches argparse's own "%(default)s"
            return action.help
        return f"{text} (default: %(default)s)".lstrip()


class _OldSpelling(argparse.Action):
    """An old spelling of a flag: sets the same value and says which flag replaced it."""

    def __init__(self, option_strings: list[str], dest: str, new_flag: str = "", inner: argparse.Action | None = None,
                 **kwargs: Any) -> None:
        self.new_flag = new_flag
        self.inner = inner
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"warning: {option_string} is deprecated; use {self.new_flag}", file=sys.stderr)
        if self.inner is not None:  # a negated boolean (--no-name)
            self.inner(parser, namespace, values, option_string)
        else:
            setattr(namespace, self.dest, values)


class _Negated(argparse.Action):
    """`--no-name`: an old spelling of `--name 0`."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        setattr(namespace, self.dest, False)


class _Extend(argparse.Action):
    """A list flag: `--name a b` and `--name a --name b` alike (with nargs=1 only the second);
    given at all, it replaces the default rather than adding to it."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        current = getattr(namespace, self.dest, None)
        kept = [] if current is None or current is self.default else list(current)
        setattr(namespace, self.dest, [*kept, *values])


def _negated(alias: str, item: Field[Any]) -> bool:
    """An old `--no-name` / `--no_name` spelling of a boolean `--name`."""
    return alias.startswith(("no-", "no_")) and is_boolean(item)


def _help(spec: Spec) -> str:
    text = spec.help.replace("%", "%%")
    if spec.default_text:
        text += f" (default: {spec.default_text})"
    return text


def _add(parser: argparse.ArgumentParser, item: Field[Any]) -> None:
    spec = spec_of(item)
    name = flag_name(item)
    options: dict[str, Any] = {"help": argparse.SUPPRESS if spec.hidden else _help(spec)}
    if spec.positional:
        options.update(nargs=spec.nargs, default=default_of(item), metavar=spec.metavar or name.upper())
        if converter(item):
            options["type"] = converter(item)
        if choices_of(item) is not None:
            options["choices"] = choices_of(item)
        parser.add_argument(item.name, **options)
        return
    # a required flag with old spellings is checked after parsing (argparse would not count them)
    options.update(dest=item.name, default=default_of(item), required=spec.required and not spec.aliases)
    if is_boolean(item):
        options.update(nargs="?", const=True, type=parse_bool, metavar="0|1")
    else:
        kind = converter(item)
        if kind is not None:
            options["type"] = kind
        if choices_of(item) is not None:
            options["choices"] = choices_of(item)
        for key in ("metavar", "nargs"):
            if getattr(spec, key) is not None:
                options[key] = getattr(spec, key)
        if spec.nargs in ("+", "*", 1):  # nargs=1: one value per flag, the flag repeated for more
            options["action"] = _Extend
    parser.add_argument(f"--{name}", *(f"--{c}" for c in spec.compat), **options)
    new_flag = f"--{name}"
    for alias in spec.aliases:
        if _negated(alias, item):
            parser.add_argument(f"--{alias}", action=_OldSpelling, dest=item.name, nargs=0, new_flag=f"{new_flag} 0",
                                inner=_Negated([f"--{alias}"], item.name), help=argparse.SUPPRESS,
                                default=argparse.SUPPRESS)
            continue
        alias_options = {k: v for k, v in options.items() if k not in ("help", "required", "default", "dest", "action")}
        parser.add_argument(f"--{alias}", action=_OldSpelling, dest=item.name, new_flag=new_flag,
                            help=argparse.SUPPRESS, default=argparse.SUPPRESS, **alias_options)


def settings_fields(*classes: type) -> list[Field[Any]]:
    """The settings fields of `classes`, in order; a name given twice is an error in the code."""
    seen: dict[str, type] = {}
    items: list[Field[Any]] = []
    for cls in classes:
        _resolve_annotations(cls)
        for item in filter(is_setting, fields(cls)):
            if item.name in seen:
                raise TypeError(f"setting {item.name!r} is in both {seen[item.name].__name__} and {cls.__name__}")
            seen[item.name] = cls
            items.append(item)
    return items


def build_parser(*classes: type, prog: str | None = None, description: str | None = None,
                 epilog: str | None = None) -> argparse.ArgumentParser:
    """One flag per field of `classes`, plus `--config FILE.yaml`."""
    parser = argparse.ArgumentParser(prog=prog, description=description, epilog=epilog,
                                     formatter_class=DefaultsOnceFormatter)
    for item in settings_fields(*classes):
        _add(parser, item)
    parser.add_argument(CONFIG_FLAG, metavar="FILE.yaml", default=None,
                        help="settings by their flag names in a YAML mapping; flags given here override the file")
    return parser


# ---------------------------------------------------------------- config files

# A settings file is a few lines: one larger than this, or whose YAML aliases (`*name`) expand to
# more than this, is refused before it is read or built (/dev/zero, a FIFO, an alias bomb).
MAX_CONFIG_BYTES = 1 << 20


def _flag_names(items: list[Field[Any]]) -> dict[str, Field[Any]]:
    """Each name a config key may give a setting by (its flag, field, compatible and old spellings)."""
    names: dict[str, Field[Any]] = {}
    for item in items:
        spec = spec_of(item)
        old = [alias for alias in spec.aliases if not _negated(alias, item)]  # `no_x: true` would mean x: false
        for name in (flag_name(item), item.name, *spec.compat, *old):
            names.setdefault(name.replace("-", "_"), item)
    return names


def _is_list(item: Field[Any]) -> bool:
    """Whether the setting holds a list (`--name a b`, or a repeated flag)."""
    return spec_of(item).nargs in ("+", "*", 1)


def _expected(item: Field[Any], kind: Callable[[str], Any] | None) -> str:
    """What a setting's value is, in words (for a message)."""
    if kind is parse_bool:
        return "a boolean (true/false or 1/0)"
    if kind is int:
        return "a whole number"
    if kind is float:
        return "a number"
    if kind is None:
        return "text"
    return spec_of(item).metavar or f"a value --{flag_name(item)} takes"


def _yaml_type(value: Any) -> str:
    if isinstance(value, bool):
        return f"the YAML boolean {str(value).lower()} (yes/no/on/off are booleans in YAML too)"
    if isinstance(value, float) and value != value:
        return "the YAML number .nan"
    if isinstance(value, (int, float)):
        return f"the YAML number {value!r}"
    if isinstance(value, list):
        return "a YAML list"
    if isinstance(value, dict):
        return "a YAML mapping"
    return f"a YAML {type(value).__name__}"


def _one_value(item: Field[Any], value: Any) -> Any:
    """One config value (an item of a list setting's list) as its flag would take it: the text
    the command line would give goes through the flag's own converter, so a value the command
    line refuses is refused here, and a value of another YAML type is never taken as it is."""
    kind = converter(item)
    quote = "; quote it to give the text" if kind is None else ""
    if isinstance(value, bool):
        if kind is parse_bool:
            return value
        raise ValueError(f"expected {_expected(item, kind)}, got {_yaml_type(value)}{quote}")
    # a number as text would keep its YAML reading, not what was written (1.10 reads as 1.1)
    numeric_text = kind is None and isinstance(value, float)
    if numeric_text or not isinstance(value, (str, int, float)):
        raise ValueError(f"expected {_expected(item, kind)}, got {_yaml_type(value)}{quote}")
    if isinstance(value, str):
        return value if kind is None else kind(value)
    try:
        return str(value) if kind is None else kind(repr(value))
    except (ValueError, TypeError, argparse.ArgumentTypeError) as exc:
        if kind in (int, float):
            raise ValueError(f"expected {_expected(item, kind)}, got {_yaml_type(value)}") from None
        raise ValueError(f"{_yaml_type(value)}: {exc}") from None


def config_value(item: Field[Any], value: Any, where: str) -> Any:
    """A config file's value, converted and checked as the flag's would be (its converter, its
    choices); a value of another type is a DataError naming `where` (the file and the key)."""
    spec = spec_of(item)
    try:
        if spec.section:
            if value is not None and not isinstance(value, dict):
                raise ValueError(f"expected a mapping of the step's flags, got {_yaml_type(value)}")
            return value
        if value is None:  # the default, where a setting has one that is no value (an operand has none)
            if default_of(item) is None and not spec.required and not spec.positional:
                return None
            raise ValueError(f"expected {_expected(item, converter(item))}, got null "
                             "(leave the key out for the default)")
        if _is_list(item) or (spec.positional and spec.nargs is not None):
            items = value if isinstance(value, list) else [value]  # `categories: Books`: a list of one
            if not items:
                raise ValueError("an empty list: leave the key out for the default")
            value = [_one_value(item, one) for one in items]
        else:
            if isinstance(value, list):
                raise ValueError(f"expected one value ({_expected(item, converter(item))}), got a YAML list")
            value = _one_value(item, value)
    except (ValueError, TypeError, argparse.ArgumentTypeError) as exc:
        raise DataError(f"{where}: {exc}") from None
    choices = choices_of(item)
    if choices is not None and value is not None:
        values = value if isinstance(value, list) else [value]
        bad = [v for v in values if v not in choices]
        if bad:
            raise DataError(f"{where}: {bad[0]!r} is not one of {', '.join(map(str, choices))}")
    return value


def config_settings(mapping: dict[Any, Any], items: list[Field[Any]], where: str,
                    section: str | None = None) -> dict[str, Any]:
    """The settings a mapping of flag names gives (a config file's, or its `section`), by field
    name, each checked as its flag would be. `where` names the file in the one-line DataError: an
    unknown key, a bad value, or one setting given twice (a key and the old spelling of its flag,
    `out` and `output`)."""
    where = f"{where}: {section}" if section else where
    dot = "." if section else ": "
    names = _flag_names(items)
    values: dict[str, Any] = {}
    given_as: dict[str, str] = {}
    for key, value in mapping.items():
        item = names.get(str(key).lstrip("-").replace("-", "_"))
        if item is None:
            close = difflib.get_close_matches(str(key), [flag_name(i) for i in items], n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise DataError(f"{where}{dot}{key}: unknown setting{hint}")
        if item.name in given_as:
            raise DataError(f"{where}{dot}{given_as[item.name]} and {key} both set --{flag_name(item)}; keep one")
        given_as[item.name] = str(key)
        reader = spec_of(item).section
        values[item.name] = (reader(value, where, str(key)) if callable(reader)
                             else config_value(item, value, f"{where}{dot}{key}"))
    return values


def read_config_mapping(path: str | Path) -> dict[Any, Any]:
    """The mapping a YAML settings file holds ({} for an empty file). Read only from a regular
    file of at most MAX_CONFIG_BYTES; a key given twice in one mapping, YAML aliases that expand
    past that size, a file that is not YAML or not a mapping: a DataError naming the file."""
    import yaml

    from PersonalWAB.scratch import not_a_regular_file

    path = Path(path)
    where = f"{CONFIG_FLAG} {path}"
    try:
        if not path.exists():
            raise FileNotFoundError(2, "No such file or directory")
        problem = not_a_regular_file(path)
        if problem:
            raise DataError(f"{where}: {problem}; name a YAML file")
        with path.open("rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise DataError(f"{where}: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise DataError(f"{where}: larger than {MAX_CONFIG_BYTES // 1024} KiB; a settings file is a few lines")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{where}: not UTF-8 text (byte {exc.start})") from None
    loader = _loader_class()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return {}
        _check_expanded_size(node, where)
        loaded = loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise DataError(f"{where}: not valid YAML ({str(exc).splitlines()[0]})") from None
    except _DuplicateKey as exc:
        raise DataError(f"{where}: {exc}") from None
    finally:
        loader.dispose()
    if not isinstance(loaded, dict):
        raise DataError(f"{where}: expected a mapping of settings, found {type(loaded).__name__}")
    return loaded


class _DuplicateKey(Exception):
    pass


@functools.cache
def _loader_class() -> Any:
    import yaml

    class Loader(yaml.SafeLoader):
        """PyYAML's safe loader, but a key given twice in one mapping is an error, not the later one."""

        def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`: the keys after it override its keys
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    if key in seen:
                        raise _DuplicateKey(f"{key!r} is given twice (lines {seen[key]} and {line}); keep one")
                except TypeError:  # an unhashable key: PyYAML's own error follows
                    break
                seen[key] = line
            return super().construct_mapping(node, deep=deep)

    return Loader


def _check_expanded_size(root: Any, where: str) -> None:
    """Refuse a document whose aliases expand past MAX_CONFIG_BYTES (counted as it would be built,
    each alias as a copy of what it names; stops at the limit, so a bomb costs nothing)."""
    import yaml

    size, stack = 0, [root]
    while stack:
        node = stack.pop()
        size += 1
        if isinstance(node, yaml.ScalarNode):
            size += len(node.value)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack.extend((key, value))
        if size > MAX_CONFIG_BYTES:
            raise DataError(f"{where}: its YAML aliases (*name) expand to more than {MAX_CONFIG_BYTES // 1024} KiB; "
                            "write the values out")


def read_config_file(path: str | Path, items: list[Field[Any]]) -> dict[str, Any]:
    """The settings a YAML file gives, by field name, each checked as its flag would be; an
    unknown key, a bad value or one setting given twice is a DataError naming the file and the key."""
    return config_settings(read_config_mapping(path), items, f"{CONFIG_FLAG} {path}")


def given(argv: Sequence[str], flag: str) -> str | None:
    """The value the command line gives `flag` (None when it gives none), read ahead of the full
    parse for what decides the other settings' defaults (the --config file, a PUMA step's recipe)."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument(flag, dest="value", default=None)
    known, _ = pre.parse_known_args(list(argv))
    return known.value


def parse_namespace(parser: argparse.ArgumentParser, items: list[Field[Any]],
                    argv: Sequence[str] | None) -> argparse.Namespace:
    """`argv` parsed over the values of its `--config` file (flags override the file)."""
    args = list(sys.argv[1:] if argv is None else argv)
    path = given(args, CONFIG_FLAG)
    if path is not None:
        from_file = read_config_file(path, items)
        parser.set_defaults(**from_file)
        for action in parser._actions:
            if action.dest in from_file:
                action.required = False
    namespace = parser.parse_args(args)
    missing = [f"--{flag_name(item)}" for item in items
               if spec_of(item).required and spec_of(item).aliases and getattr(namespace, item.name, None) is None]
    if missing:
        parser.error(f"the following arguments are required: {', '.join(missing)}")
    return namespace


def make(classes: Sequence[type], namespace: argparse.Namespace) -> list[Any]:
    """One instance per class from a parsed namespace."""
    return [cls(**{item.name: getattr(namespace, item.name) for item in settings_fields(cls)}) for cls in classes]


def parse(cls: type[T], argv: Sequence[str] | None = None, *, prog: str | None = None,
          description: str | None = None, epilog: str | None = None) -> T:
    """The settings `cls` of a command line: flags over `--config FILE.yaml` over defaults."""
    return parse_many([cls], argv, prog=prog, description=description, epilog=epilog)[0]


def parse_many(classes: Sequence[type], argv: Sequence[str] | None = None, *, prog: str | None = None,
               description: str | None = None, epilog: str | None = None) -> list[Any]:
    """Like `parse`, for a command whose flags are the fields of several classes (a run and its
    agent's own settings): one instance of each. A class with an `argv_defaults(argv)` classmethod
    gives defaults that depend on the command line (a PUMA recipe), under its --config file and flags."""
    parser = build_parser(*classes, prog=prog, description=description, epilog=epilog)
    args = list(sys.argv[1:] if argv is None else argv)
    for cls in classes:
        if hasattr(cls, "argv_defaults"):
            parser.set_defaults(**cls.argv_defaults(args))
    argv = args
    namespace = parse_namespace(parser, settings_fields(*classes), argv)
    return make(classes, namespace)


# ---------------------------------------------------------------- what is recorded


def resolved(config: Any) -> dict[str, Any]:
    """The settings a command ran with, by field name (what its records store)."""
    if not is_dataclass(config) or isinstance(config, type):
        raise TypeError(f"{type(config).__name__} is not a settings dataclass")
    return dataclasses.asdict(config)


def resume_keys(*classes: type) -> tuple[str, ...]:
    """The settings marked `resume=True`: a resumed run must have the same values."""
    return tuple(item.name for item in settings_fields(*classes) if spec_of(item).resume)


def help_problems(parser: argparse.ArgumentParser) -> list[str]:
    """The flags of `parser` shown in --help without help text (an empty list when none)."""
    return [", ".join(action.option_strings) or action.dest for action in parser._actions
            if action.help != argparse.SUPPRESS and not (action.help or "").strip()]
