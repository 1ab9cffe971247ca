/* tiny_int.h — internals shared by the Tiny IR passes (not public). */
#ifndef HARP_TINY_INT_H
#define HARP_TINY_INT_H

#include "harp/tiny.h"

/* How n operands broadcast to one shape (right-aligned, else by symbol name).
 * map[k][a] is the output axis that axis a of operand k becomes; -1 when the
 * axis is a literal 1 that the alignment drops. */
typedef struct tiny_bcast {
  tiny_shape out;
  int map[TINY_MAX_SRC][TINY_MAX_RANK];
} tiny_bcast;

harp_status tiny_broadcast(harp_error *e, const char *id, const tiny_shape *const *ops, int nops, tiny_bcast *out);

/* Resolve an arg dim against the symbol table: n >= 0 when known, else -1
 * (sym kept).  Returns false if unknown and !allow_unknown (error set). */
bool tiny_resolve_dim(harp_error *e, const char *id, tiny_dim d, const tiny_symtab *syms, bool allow_unknown,
                      tiny_dim *out);

/* The arg shape `arg` of node n resolved (sizes checked against the limits). */
harp_status tiny_resolve_shape(harp_error *e, const tiny_node *n, const tiny_shape *arg, const tiny_symtab *syms,
                             bool allow_unknown, tiny_shape *out);
/* Two known sizes that differ, neither of them 1 (broadcasting allows a 1). */
bool tiny_dim_mismatch(const tiny_dim *a, const tiny_dim *b);

/* One run of shape inference (infer.c); its movement rules (infer_move.c). */
typedef struct tiny_ictx {
  harp_error *e;
  tiny_graph *g;
  const tiny_symtab *syms;
  bool allow_unknown;
} tiny_ictx;
harp_status tiny_infer_move(tiny_ictx *c, tiny_node *n);

/* Reduce a "symbol or int" arg that must be a plain non-negative integer once
 * bound (pads, steps, kernel sizes). */
bool tiny_dim_value(tiny_dim d, const tiny_symtab *syms, int64_t *v);

/* Range [lo, hi] of an index expression over 0 <= i_k < sizes[k]; false if it
 * cannot be bounded (unknown symbols, non-affine product). */
bool tiny_expr_range(const tiny_expr *x, const int64_t *sizes, const tiny_symtab *syms, int64_t *lo, int64_t *hi);
/* True if some variable has a negative coefficient (NegativeStride). */
bool tiny_expr_has_negative_stride(const tiny_expr *x, const tiny_symtab *syms);
/* Number of MOD nodes (each adds a guarded piece). */
int tiny_expr_count_mod(const tiny_expr *x);

/* Replace the graph's node list with the one built in ng (which must share
 * g's arena).  ng's shell is freed. */
void tiny_graph_adopt(tiny_graph *g, tiny_graph *ng);
/* A new graph that allocates from g's arena (for rebuilding passes), and its
 * disposal when the rebuild is abandoned (the shared arena stays). */
tiny_graph *tiny_graph_new_sharing(tiny_graph *g);
void tiny_graph_discard_sharing(tiny_graph *ng);
/* An id in neither g nor also (may be NULL), from a base and a suffix. */
const char *tiny_fresh_id(tiny_graph *g, const tiny_graph *also, const char *base, const char *suffix);

#endif
