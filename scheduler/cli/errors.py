"""Bad input ends in one line on stderr and exit code 2, never a traceback."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn

import typer
from pydantic import ValidationError

# typer >= 0.20 vendors its own copy of click (click itself is not a dependency)
from typer._click.exceptions import ClickException, NoArgsIsHelpError

USAGE_EXIT = 2
# the project's input errors (InputError, TopologyError, UnknownPolicyError, ...) are
# ValueErrors: named here, their modules would load the solver before `--help` can answer
EXPECTED = (OSError, ValueError)


def fail(message: str) -> NoReturn:
    print(f"rackwise: error: {message}", file=sys.stderr)
    sys.exit(USAGE_EXIT)


def run_cli(command: Callable[..., object]) -> None:
    """Run a click/typer command; map expected failures to one line and exit 2."""
    try:
        code = command(standalone_mode=False)
        # without standalone mode click returns an Exit's code instead of raising it
        if isinstance(code, int) and code:
            sys.exit(code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        fail("aborted")
    except NoArgsIsHelpError as exc:
        print(exc.ctx.get_help() if exc.ctx else "", file=sys.stderr)
        sys.exit(USAGE_EXIT)
    except ClickException as exc:
        fail(exc.format_message().replace("\n", " "))
    except ValidationError as exc:
        from scheduler.io import describe  # the failure path only: the solver loads with it

        fail(describe(exc, "input"))
    except EXPECTED as exc:
        fail(str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__)
