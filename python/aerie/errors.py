"""aerie's exceptions: one class per C API status (include/aerie.h), all under AerieError.

Each carries the C API's message (aerie_last_error()) as its text and the status name in `.status`.
The classes also derive from the built-in exception a Python caller would catch for that kind of failure:
an invalid argument is a ValueError, a load failure an OSError, a timeout a TimeoutError.
"""


class AerieError(Exception):
    """Any failure reported by aerie. `status` names the C API status ("load", "invalid_argument", ...)."""

    status = "internal"

    def __init__(self, message, status=None):
        super().__init__(message)
        if status is not None:
            self.status = status


class InvalidArgumentError(AerieError, ValueError):
    """A value out of range, a bad prompt or option (AERIE_ERROR_INVALID_ARGUMENT)."""

    status = "invalid_argument"


class LoadError(AerieError, OSError):
    """The model folder, its config, weights or tokenizer, or the draft (AERIE_ERROR_LOAD)."""

    status = "load"


class UnsupportedError(AerieError, NotImplementedError):
    """Something this model or build cannot do, e.g. chat without a chat template (AERIE_ERROR_UNSUPPORTED)."""

    status = "unsupported"


class NotFoundError(AerieError, LookupError):
    """No such request: never submitted, or already released (AERIE_ERROR_NOT_FOUND)."""

    status = "not_found"


class AerieTimeoutError(AerieError, TimeoutError):
    """No event within the timeout (AERIE_ERROR_TIMEOUT)."""

    status = "timeout"


class OverloadedError(AerieError, RuntimeError):
    """The engine holds its maximum of requests in flight (AERIE_ERROR_OVERLOADED)."""

    status = "overloaded"


class EngineFailedError(AerieError, RuntimeError):
    """The engine's step failed; it takes no more requests (AERIE_ERROR_ENGINE_FAILED)."""

    status = "engine_failed"


class AerieMemoryError(AerieError, MemoryError):
    """Out of memory, e.g. for the KV cache (AERIE_ERROR_OUT_OF_MEMORY)."""

    status = "out_of_memory"


class RequestFailedError(AerieError, RuntimeError):
    """A request that was accepted failed while it ran (its last event finished with "error")."""

    status = "request_failed"


_BY_STATUS = {
    cls.status: cls
    for cls in (InvalidArgumentError, LoadError, UnsupportedError, NotFoundError, AerieTimeoutError,
                OverloadedError, EngineFailedError, AerieMemoryError)
}


def from_status(status, message):
    """The exception for a C API status name and message (called by the extension)."""
    return _BY_STATUS.get(status, AerieError)(message, status)
