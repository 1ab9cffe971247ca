/* harp/status.h — the error vocabulary of the public API: a status code
 * and the details that come with it.
 *
 * Every library function that can fail returns a harp_status (HARP_OK == 0)
 * and records the details in the harp_error it was given.  Nothing in the
 * library prints or exits; the CLI turns an error into
 *   harp: error[<Name>]: <message> (node "<id>")
 * and exit code 1 (2 for HARP_E_INTERNAL).  harp.h includes this header and
 * no other of harp's. */
#ifndef HARP_STATUS_H
#define HARP_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(ENUM, "Name", "what it means") — the names come from the specification. */
#define HARP_ERRORS(X)                                                             \
  X(OK, "OK", "no error")                                                          \
  X(PARSE, "ParseError", "syntax error in a model, plan or DSL file")              \
  X(IO, "IoError", "a file could not be read or written")                          \
  X(UNKNOWN_OP, "UnknownOp", "a node names an operation that does not exist")      \
  X(ARITY, "ArityMismatch", "a node has the wrong number of sources")              \
  X(INVALID_ARG, "InvalidArgument", "a node's arg is missing or malformed")        \
  X(DANGLING, "DanglingRef", "a source names a node that does not exist")          \
  X(DUPLICATE_ID, "DuplicateId", "two nodes share an id")                          \
  X(CYCLE, "Cycle", "the graph is not acyclic")                                    \
  X(DTYPE_MISMATCH, "DtypeMismatch", "operand dtypes differ (casts are explicit)") \
  X(UNBOUND_SYMBOL, "UnboundSymbol", "a shape symbol has no value")                \
  X(BROADCAST_MISMATCH, "BroadcastMismatch", "shapes cannot be broadcast")         \
  X(AXIS_SIZE_MISMATCH, "AxisSizeMismatch", "element counts or axis sizes differ") \
  X(INVALID_PERMUTATION, "InvalidPermutation", "perm repeats or misses an axis")   \
  X(ACC_DTYPE_MISSING, "AccDtypeMissing", "REDUCE has no accumulation dtype")      \
  X(EXCESSIVE_PIECEWISE, "ExcessivePiecewise", "too many pad/shrink/view pieces")  \
  X(NEGATIVE_STRIDE, "NegativeStride", "a view map has a negative stride")         \
  X(MISSING_DIV_GUARD, "MissingDivGuard", "a modulo lacks its div guard")          \
  X(NON_SCOP, "NonScop", "a data-dependent index leaves the polyhedral model")     \
  X(SMEM_OVERFLOW, "SmemOverflow", "a plan needs more shared memory than exists")  \
  X(REG_OVERFLOW, "RegOverflow", "a plan needs more registers than exist")         \
  X(MISALIGNED, "Misaligned", "a buffer is not aligned as required")               \
  X(INPUT_MISMATCH, "InputMismatch", "a tensor file does not fit the model")       \
  X(LIMIT, "LimitExceeded", "a size is beyond what harp accepts")                  \
  X(UNSUPPORTED, "Unsupported", "valid input that harp does not handle yet")       \
  X(NO_MEMORY, "OutOfMemory", "an allocation failed")                              \
  X(USAGE, "UsageError", "the command line is wrong")                              \
  X(INTERNAL, "InternalError", "a bug in harp")                                   \
  X(CANCELLED, "Cancelled", "the caller cancelled a compile (its progress callback)")

typedef enum harp_status {
#define HARP_X_ENUM(e, name, doc) HARP_E_##e,
  HARP_ERRORS(HARP_X_ENUM)
#undef HARP_X_ENUM
  HARP_E_COUNT_
} harp_status;

#define HARP_OK HARP_E_OK

/* Details of the last failure.  Fields that do not apply are empty / 0. */
typedef struct harp_error {
  harp_status code;
  char node[128]; /* id of the node (or region, plan axis...) at fault */
  char file[256]; /* source file, for parse errors */
  int line, col;  /* 1-based; 0 when unknown */
  char msg[1024];
  char snippet[512]; /* source line + caret, for parse errors; may be empty */
} harp_error;

/* The specification's name of s ("ParseError", "OutOfMemory", ...). */
const char *harp_status_name(harp_status s);
/* Clear e, so the next failure is recorded (the first error wins). */
void harp_error_clear(harp_error *e);
/* Format "error[<Name>]: [file:line:col: ]msg[ (node "id")][\nsnippet]". */
void harp_error_format(const harp_error *e, char *buf, int cap);

#ifdef __cplusplus
}
#endif

#endif
