/* sema_int.h — what the DSL's semantic analysis (sema.c) shares with its
 * argument readers (sema_args.c) and builtin ops (sema_builtins.c): the
 * analysis state, the argument specs, and the readers' declarations.  Not
 * public.
 * Needs: fe_dsl.h.  Gives: sema, FAILED, pspec/argset, fe_sm_*. */
#ifndef HARP_SEMA_INT_H
#define HARP_SEMA_INT_H

#include "fe_dsl.h"

typedef struct sema {
  hg_program *p;
  fe_diagctx *dc;
  hg_graph *g;
  const fe_ast_graph *ag;
  ut_strmap env; /* name -> value; <= 0: poisoned (its definition failed) */
  bool oom;
  hg_graph **gs; /* gs[i] was built from tree graph i (NULL if not) */
  bool *usable;  /* its signature is sound (calls to it are checked) */
  int ngs;
  /* the expression evaluator (eval in sema.c): how the argument readers
   * reach it without a file cycle */
  hg_val (*eval)(struct sema *S, const fe_ex *ex);
} sema;

#define FAILED 0 /* an hg_val meaning "failed, already reported" */

/* ---- argument binding: a builtin's parameters, what a call gave for each */
typedef enum akind { A_T, A_INTS, A_INT, A_DIMS, A_FLOAT, A_BOOL, A_DTYPE, A_TLIST, A_PADS, A_ANY } akind;
typedef struct pspec {
  const char *name;
  akind kind;
  bool required;
} pspec;

#define MAXP 8
typedef struct args {
  const fe_ex *e[MAXP]; /* NULL: not given */
} argset;

/* sema_args.c: diagnostics, the environment, dimensions and types, and the
 * readers of a builtin's arguments (each reports what is wrong at the
 * argument and returns false / NULL / FAILED). */
void fe_sm_err(sema *S, harp_status code, int line, int col, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* After a builder call: v, or report the builder's error at ex (FAILED). */
hg_val fe_sm_chk(sema *S, const fe_ex *ex, hg_val v);
/* The builder's next node is located at ex. */
void fe_sm_at(sema *S, const fe_ex *ex);
/* name's value in the environment (<= 0: poisoned); NULL if unbound. */
int *fe_sm_lookup(sema *S, const char *name);
void fe_sm_bind(sema *S, const char *name, hg_val v);
/* A dimension expression (integers and shape variables), NULL on error. */
const fe_dim *fe_sm_dim(sema *S, const fe_ex *ex);
/* A declared type's shape into *s (param: a graph parameter's, plain dims). */
bool fe_sm_type(sema *S, const fe_ast_type *t, bool param, fe_shape *s);
/* call's arguments (positional, then keywords) matched to sp[0..nsp). */
bool fe_sm_bind_args(sema *S, const fe_ex *call, const pspec *sp, int nsp, argset *out);
bool fe_sm_int_ex(const fe_ex *e, int64_t *v); /* a literal integer, no report */
bool fe_sm_int(sema *S, const fe_ex *e, const char *what, int64_t *v);
bool fe_sm_ints(sema *S, const fe_ex *e, const char *what, int64_t *v, int *n, int cap);
bool fe_sm_float(sema *S, const fe_ex *e, const char *what, double *v);
bool fe_sm_bool(sema *S, const fe_ex *e, const char *what, bool *v);
/* A list of dimensions (minus1: -1 entries become NULL). */
bool fe_sm_dims(sema *S, const fe_ex *e, const char *what, bool minus1, const fe_dim **d, int *n);
hg_val fe_sm_tensor(sema *S, const fe_ex *e);
bool fe_sm_dtype(sema *S, const fe_ex *e, tiny_dtype *dt);

/* sema_builtins.c: the builtin op named call->name on call's arguments into
 * *v (FAILED once reported); false when there is no such builtin. */
bool fe_sm_builtin(sema *S, const fe_ex *call, hg_val *v);

#endif
