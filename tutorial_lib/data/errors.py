"""The one exception type of the data package.

Every problem a user can fix (unknown name, missing or corrupt file, no way to reach the data)
is a :class:`DataError` whose message says what to do.
"""

from __future__ import annotations


class DataError(RuntimeError):
    """A data problem the user can fix; the message says what to do."""
