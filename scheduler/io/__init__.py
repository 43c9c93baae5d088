"""Reading user files (gangs, state) with errors that name the file and the field."""

from scheduler.io.files import InputError, describe, load_gangs, load_state, load_yaml

__all__ = ["InputError", "describe", "load_gangs", "load_state", "load_yaml"]
