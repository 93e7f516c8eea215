"""Files that map instruction text to generated outputs (PUMA's function and parameter
files): read once here, so every caller reports a missing or malformed file the same way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from PersonalWAB.errors import DataError


def read_instruction_outputs(path: Path | str, what: str) -> dict[str, Any]:
    """instruction -> its output (the first one where the file holds a list of outputs)."""
    path = Path(path)
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: {what} file not found") from None
    except (ValueError, RecursionError) as exc:
        raise DataError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(content, dict):
        raise DataError(f"{path}: expected a JSON object mapping instruction text to {what} outputs")
    return {instruction: value[0] if isinstance(value, list) and value else value
            for instruction, value in content.items()}
