"""The converters' one error type and the wrapper that turns it into a one-line message and exit status 1."""

import sys


class ConversionError(Exception):
    """A model that cannot be converted, or a file that cannot be read: the message says which and what to do."""


def run_main(main):
    """Runs main() and exits with its status; a ConversionError or a missing file prints one line instead."""
    try:
        sys.exit(main())
    except ConversionError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    except OSError as e:
        print(f"error: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        sys.exit(1)


def warn(message):
    """A conversion that works but computes something slightly different, or loses something: one line on stderr."""
    print(f"warning: {message}", file=sys.stderr)
