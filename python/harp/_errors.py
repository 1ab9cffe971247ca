"""_errors.py — harp's error classes as Python exceptions.

Every failure of the library is an harp_status (include/harp/status.h); each
status is a class here, named as the specification names it
(harp.BroadcastMismatch, harp.ParseError, ...), all subclasses of
harp.HarpError.  Those that mean bad input from the caller are also
ValueError (or OSError, MemoryError) so generic handlers catch them.  An
exception carries .node (the node, region or input at fault), .file,
.line, .col and .snippet where harp knows them.

Needs: nothing.  Gives: HarpError, one class per status, _make (the
extension builds exceptions with it), ERROR_NAMES.
"""

# the statuses in harp.h's order (a test checks them against the library's)
ERROR_NAMES = (
    "OK", "ParseError", "IoError", "UnknownOp", "ArityMismatch", "InvalidArgument", "DanglingRef", "DuplicateId",
    "Cycle", "DtypeMismatch", "UnboundSymbol", "BroadcastMismatch", "AxisSizeMismatch", "InvalidPermutation",
    "AccDtypeMissing", "ExcessivePiecewise", "NegativeStride", "MissingDivGuard", "NonScop", "SmemOverflow",
    "RegOverflow", "Misaligned", "InputMismatch", "LimitExceeded", "Unsupported", "OutOfMemory", "UsageError",
    "InternalError", "Cancelled",
)


class HarpError(RuntimeError):
    """A failure reported by harp: .code (the class's name), .node, .file, .line, .col, .snippet."""

    code = "InternalError"

    def __init__(self, message, node="", file="", line=0, col=0, snippet=""):
        self.message, self.node, self.file, self.line, self.col, self.snippet = message, node, file, line, col, snippet
        where = f"{file}:{line}:{col}: " if file and line else (f"{file}: " if file else "")
        text = f"error[{self.code}]: {where}{message}"
        if node and f'"{node}"' not in message and node not in message:
            text += f' (node "{node}")'
        if snippet:
            text += "\n" + snippet
        super().__init__(text)


# classes that are also a builtin kind of error
_ALSO = {"IoError": OSError, "OutOfMemory": MemoryError, "InvalidArgument": ValueError, "InputMismatch": ValueError,
         "DtypeMismatch": ValueError, "UsageError": ValueError, "UnboundSymbol": ValueError, "LimitExceeded": ValueError}

CLASSES = {}
for _name in ERROR_NAMES[1:]:
    _bases = (HarpError, _ALSO[_name]) if _name in _ALSO else (HarpError,)
    CLASSES[_name] = type(_name, _bases, {"code": _name, "__doc__": f"harp's {_name} (include/harp/status.h)."})
    CLASSES[_name].__module__ = "harp"
globals().update(CLASSES)


def _make(name, message, node="", file="", line=0, col=0, snippet=""):
    """The exception for status `name` (the extension raises what this returns)."""
    return CLASSES.get(name, CLASSES["InternalError"])(message, node, file, line, col, snippet)
