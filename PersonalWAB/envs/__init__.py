"""Environments. `get_env` is imported lazily so importing this package is cheap."""

from __future__ import annotations

from typing import Any


def get_env(*args: Any, **kwargs: Any) -> Any:
    from PersonalWAB.envs.pwab.env import get_env as _get_env

    return _get_env(*args, **kwargs)
