/* load_int.h — helpers shared by the two Tiny IR JSON dialect loaders. */
#ifndef HARP_LOAD_INT_H
#define HARP_LOAD_INT_H

#include <jansson.h>

#include "tiny_int.h"

typedef struct lctx {
  harp_error *e;
  tiny_graph *g;
  const char *file;
  const char *node; /* id of the node being read, for errors */
} lctx;

/* The model's "derived" object (NULL: none) into c->g's derived symbols. */
harp_status ld_dsyms(lctx *c, json_t *d);
/* Parse an int-or-symbol ("M", 3, "3"). */
bool ld_dim(lctx *c, json_t *v, const char *what, tiny_dim *out);
/* Parse an array of int-or-symbol into a shape. */
bool ld_shape(lctx *c, json_t *v, const char *what, tiny_shape *out);
/* Parse an array of ints into out[] (at most TINY_MAX_RANK). */
bool ld_ints(lctx *c, json_t *v, const char *what, int *out, int *n);
/* Parse an array of int-or-symbol into out[]. */
bool ld_dims(lctx *c, json_t *v, const char *what, tiny_dim *out, int *n);
/* A number, or one of the strings "inf", "-inf", "nan". */
bool ld_number(lctx *c, json_t *v, const char *what, double *out);
bool ld_dtype(lctx *c, json_t *v, const char *what, tiny_dtype *out);
/* Fail if obj has a key outside allowed (NULL-terminated). */
bool ld_only_keys(lctx *c, json_t *obj, const char *where, const char *const *allowed);

/* Fill args of kind `kind` from a JSON object (canonical key names). */
bool ld_args(lctx *c, tiny_op op, json_t *arg, tiny_args *out);

/* Add the nodes in dependency order: recs[i] has nsrc sources whose
 * src_rec[k] index other recs (or -1 for immediates).  Detects cycles. */
typedef struct ld_rec {
  const char *id;
  tiny_op op;
  int nsrc;
  int src_rec[TINY_MAX_SRC];
  double imm[TINY_MAX_SRC];
  tiny_args args;
  const char *tag;
} ld_rec;
harp_status ld_add_sorted(lctx *c, ld_rec *recs, int n, int *rec_to_node);
/* Dependency order of recs into order[n]; HARP_E_CYCLE if there is none. */
harp_status ld_toposort(lctx *c, const ld_rec *recs, int n, int *order);

harp_status tiny_load_ops_dialect(lctx *c, json_t *root);

#endif
