/* graph.c — the Tiny IR builder: node storage, the id map, conveniences.
 * Needs: core.c.  Gives: tiny_graph_new/free, tiny_graph_shadow, tiny_add, tiny_b_*,
 * outputs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harp/tiny.h"
#include "util/util.h"

tiny_graph *tiny_graph_new(void) {
  tiny_graph *g = ut_xcalloc(1, sizeof *g);
  if (!g) return NULL;
  g->arena = ut_arena_new();
  g->ids = ut_xcalloc(1, sizeof *g->ids);
  if (!g->arena || !g->ids) {
    tiny_graph_free(g);
    return NULL;
  }
  return g;
}

void tiny_graph_free(tiny_graph *g) {
  if (!g) return;
  if (g->ids) {
    ut_strmap_free(g->ids);
    free(g->ids);
  }
  free(g->nodes);
  free(g->outputs);
  free(g->dsyms);
  ut_arena_free(g->arena);
  free(g);
}

int tiny_find(const tiny_graph *g, const char *id) {
  const int *v = id ? ut_strmap_find(g->ids, id) : NULL;
  return v ? *v : -1;
}

static int builder_fail(tiny_graph *g, harp_status code, const char *id, const char *msg) {
  ut_fail(&g->err, code, id, "%s", msg);
  return -1;
}

int tiny_add(tiny_graph *g, const char *id, tiny_op op, const tiny_src *src, int nsrc, const void *arg) {
  if (g->err.code != HARP_OK) return -1;
  if ((unsigned)op >= TINY_OP_COUNT) return builder_fail(g, HARP_E_UNKNOWN_OP, id, "unknown op");
  if (g->n >= TINY_MAX_NODES) return builder_fail(g, HARP_E_LIMIT, id, "too many nodes");
  char auto_id[32];
  if (!id) {
    do snprintf(auto_id, sizeof auto_id, "t%d", g->next_auto_id++);
    while (tiny_find(g, auto_id) >= 0);
    id = auto_id;
  }
  if (!*id) return builder_fail(g, HARP_E_INVALID_ARG, id, "empty node id");
  if (tiny_find(g, id) >= 0) {
    ut_fail(&g->err, HARP_E_DUPLICATE_ID, id, "node id \"%s\" is used twice", id);
    return -1;
  }
  int arity = tiny_op_arity(op);
  if (nsrc != arity) {
    ut_fail(&g->err, HARP_E_ARITY, id, "%s takes %d source%s, got %d", tiny_op_name(op), arity,
            arity == 1 ? "" : "s", nsrc);
    return -1;
  }
  for (int i = 0; i < nsrc; i++)
    if (src[i].node >= g->n || src[i].node < -1)
      return builder_fail(g, HARP_E_DANGLING, id, "source refers to a node not (yet) in the graph");
  if (g->n == g->cap) {
    int cap = g->cap ? g->cap * 2 : 64;
    tiny_node *nn = ut_xrealloc(g->nodes, sizeof *nn * (size_t)cap);
    if (!nn) return builder_fail(g, HARP_E_NO_MEMORY, id, "out of memory");
    g->nodes = nn;
    g->cap = cap;
  }
  tiny_node *n = &g->nodes[g->n];
  memset(n, 0, sizeof *n);
  n->id = ut_arena_strdup(g->arena, id);
  if (!n->id) return builder_fail(g, HARP_E_NO_MEMORY, id, "out of memory");
  n->op = op;
  n->nsrc = nsrc;
  for (int i = 0; i < nsrc; i++) n->src[i] = src[i];
  if (arg) {
    size_t sz = 0;
    switch (tiny_op_argkind(op)) {
    case TA_NONE: break;
    case TA_INPUT: sz = sizeof(tiny_arg_input); break;
    case TA_CONST: sz = sizeof(tiny_arg_const); break;
    case TA_RESHAPE: sz = sizeof(tiny_arg_reshape); break;
    case TA_PERMUTE: sz = sizeof(tiny_arg_permute); break;
    case TA_EXPAND: sz = sizeof(tiny_arg_expand); break;
    case TA_PAD: sz = sizeof(tiny_arg_pad); break;
    case TA_SHRINK: sz = sizeof(tiny_arg_shrink); break;
    case TA_FLIP: sz = sizeof(tiny_arg_flip); break;
    case TA_VIEW: sz = sizeof(tiny_arg_view); break;
    case TA_POOL: sz = sizeof(tiny_arg_pool); break;
    case TA_CAST: sz = sizeof(tiny_arg_cast); break;
    case TA_REDUCE: sz = sizeof(tiny_arg_reduce); break;
    case TA_GATHER: sz = sizeof(tiny_arg_gather); break;
    }
    memcpy(&n->a, arg, sz);
  } else if (tiny_op_argkind(op) != TA_NONE) {
    return builder_fail(g, HARP_E_INVALID_ARG, id, "missing arg");
  }
  /* Strings in args must outlive the caller's buffers: copy them. */
  bool oom = false;
#define COPY_STR(p)                                         \
  do {                                                      \
    if (p) {                                                \
      (p) = ut_arena_strdup(g->arena, (p));                 \
      oom |= (p) == NULL;                                   \
    }                                                       \
  } while (0)
  if (op == TINY_INPUT) {
    if (!n->a.input.tensor_id) n->a.input.tensor_id = n->id;
    COPY_STR(n->a.input.tensor_id);
    COPY_STR(n->a.input.storage);
  }
  tiny_shape *shapes[] = {op == TINY_INPUT ? &n->a.input.shape : NULL,
                          op == TINY_RESHAPE ? &n->a.reshape.shape : NULL,
                          op == TINY_EXPAND ? &n->a.expand.shape : NULL,
                          op == TINY_VIEW ? &n->a.view.shape : NULL};
  for (int k = 0; k < 4; k++)
    if (shapes[k])
      for (int i = 0; i < shapes[k]->rank; i++) COPY_STR(shapes[k]->d[i].sym);
  tiny_dim *dims[3] = {0};
  int ndims = 0, count = 0;
  if (op == TINY_PAD) dims[0] = n->a.pad.lo, dims[1] = n->a.pad.hi, ndims = 2, count = n->a.pad.n;
  if (op == TINY_SHRINK)
    dims[0] = n->a.shrink.lo, dims[1] = n->a.shrink.hi, dims[2] = n->a.shrink.step, ndims = 3,
    count = n->a.shrink.n;
  if (op == TINY_POOL)
    dims[0] = n->a.pool.kernel, dims[1] = n->a.pool.stride, dims[2] = n->a.pool.dilation, ndims = 3,
    count = n->a.pool.n;
  if (op == TINY_REDUCE) dims[0] = n->a.reduce.axes, ndims = 1, count = n->a.reduce.n;
  for (int k = 0; k < ndims; k++)
    for (int i = 0; i < count && i < TINY_MAX_RANK; i++) COPY_STR(dims[k][i].sym);
#undef COPY_STR
  if (oom) return builder_fail(g, HARP_E_NO_MEMORY, id, "out of memory");
  if (!ut_strmap_put(g->ids, n->id, g->n)) return builder_fail(g, HARP_E_NO_MEMORY, id, "out of memory");
  return g->n++;
}

static tiny_src S(int node) { return (tiny_src){node, 0}; }

int tiny_b_input(tiny_graph *g, const char *id, tiny_dtype dt, const tiny_shape *shape) {
  tiny_arg_input a = {.tensor_id = id, .dtype = dt, .shape = *shape};
  return tiny_add(g, id, TINY_INPUT, NULL, 0, &a);
}

int tiny_b_const(tiny_graph *g, double v, tiny_dtype dt) {
  tiny_arg_const a = {v, dt};
  return tiny_add(g, NULL, TINY_CONST, NULL, 0, &a);
}

int tiny_b_unary(tiny_graph *g, tiny_op op, int x) {
  tiny_src s[1] = {S(x)};
  return tiny_add(g, NULL, op, s, 1, NULL);
}

int tiny_b_binary(tiny_graph *g, tiny_op op, int a, int b) {
  tiny_src s[2] = {S(a), S(b)};
  return tiny_add(g, NULL, op, s, 2, NULL);
}

int tiny_b_binary_imm(tiny_graph *g, tiny_op op, int a, double imm) {
  tiny_src s[2] = {S(a), {-1, imm}};
  return tiny_add(g, NULL, op, s, 2, NULL);
}

int tiny_b_where(tiny_graph *g, int cond, int a, int b) {
  tiny_src s[3] = {S(cond), S(a), S(b)};
  return tiny_add(g, NULL, TINY_WHERE, s, 3, NULL);
}

int tiny_b_cast(tiny_graph *g, int x, tiny_dtype to) {
  tiny_arg_cast a = {to};
  tiny_src s[1] = {S(x)};
  return tiny_add(g, NULL, TINY_CAST, s, 1, &a);
}

int tiny_b_reshape(tiny_graph *g, int x, const tiny_shape *shape) {
  tiny_arg_reshape a = {*shape};
  tiny_src s[1] = {S(x)};
  return tiny_add(g, NULL, TINY_RESHAPE, s, 1, &a);
}

int tiny_b_permute(tiny_graph *g, int x, const int *perm, int n) {
  tiny_arg_permute a = {0};
  if (n < 0 || n > TINY_MAX_RANK) return builder_fail(g, HARP_E_LIMIT, NULL, "rank too large");
  a.n = n;
  memcpy(a.perm, perm, sizeof(int) * (size_t)n);
  tiny_src s[1] = {S(x)};
  return tiny_add(g, NULL, TINY_PERMUTE, s, 1, &a);
}

int tiny_b_expand(tiny_graph *g, int x, const tiny_shape *shape) {
  tiny_arg_expand a = {.shape = *shape};
  tiny_src s[1] = {S(x)};
  return tiny_add(g, NULL, TINY_EXPAND, s, 1, &a);
}

int tiny_b_pad(tiny_graph *g, int x, const int64_t *lo, const int64_t *hi, int n, double value) {
  tiny_arg_pad a = {0};
  if (n < 0 || n > TINY_MAX_RANK) return builder_fail(g, HARP_E_LIMIT, NULL, "rank too large");
  a.n = n;
  a.value = value;
  for (int i = 0; i < n; i++) a.lo[i] = tiny_dim_int(lo[i]), a.hi[i] = tiny_dim_int(hi[i]);
  tiny_src s[1] = {S(x)};
  return tiny_add(g, NULL, TINY_PAD, s, 1, &a);
}

int tiny_b_shrink(tiny_graph *g, int x, const int64_t *lo, const int64_t *hi, const int64_t *step, int n) {
  tiny_arg_shrink a = {0};
  if (n < 0 || n > TINY_MAX_RANK) return builder_fail(g, HARP_E_LIMIT, NULL, "rank too large");
  a.n = n;
  a.has_step = step != NULL;
  for (int i = 0; i < n; i++) {
    a.lo[i] = tiny_dim_int(lo[i]);
    a.hi[i] = tiny_dim_int(hi[i]);
    a.step[i] = tiny_dim_int(step ? step[i] : 1);
  }
  tiny_src s[1] = {S(x)};
  return tiny_add(g, NULL, TINY_SHRINK, s, 1, &a);
}

int tiny_b_flip(tiny_graph *g, int x, const int *axes, int n) {
  tiny_arg_flip a = {0};
  if (n < 0 || n > TINY_MAX_RANK) return builder_fail(g, HARP_E_LIMIT, NULL, "rank too large");
  a.n = n;
  memcpy(a.axes, axes, sizeof(int) * (size_t)n);
  tiny_src s[1] = {S(x)};
  return tiny_add(g, NULL, TINY_FLIP, s, 1, &a);
}

int tiny_b_reduce(tiny_graph *g, int x, tiny_reduce_op op, const int *axes, int n, tiny_dtype acc) {
  tiny_arg_reduce a = {0};
  if (n < 0 || n > TINY_MAX_RANK) return builder_fail(g, HARP_E_LIMIT, NULL, "rank too large");
  a.op = op;
  a.n = n;
  for (int i = 0; i < n; i++) a.axes[i] = tiny_dim_int(axes[i]);
  a.has_dtype = true;
  a.dtype = acc;
  tiny_src s[1] = {S(x)};
  return tiny_add(g, NULL, TINY_REDUCE, s, 1, &a);
}

int tiny_mark_output(tiny_graph *g, int node) {
  if (g->err.code != HARP_OK) return -1;
  if (node < 0 || node >= g->n) return builder_fail(g, HARP_E_DANGLING, NULL, "output is not a node");
  if (!g->explicit_outputs) {
    g->noutputs = 0;
    g->explicit_outputs = true;
  }
  for (int i = 0; i < g->noutputs; i++)
    if (g->outputs[i] == node) return node;
  int *o = ut_xrealloc(g->outputs, sizeof(int) * (size_t)(g->noutputs + 1));
  if (!o) return builder_fail(g, HARP_E_NO_MEMORY, NULL, "out of memory");
  g->outputs = o;
  g->outputs[g->noutputs++] = node;
  return node;
}

int tiny_inputs(const tiny_graph *g, int **out) {
  int k = 0;
  *out = ut_xmalloc(sizeof(int) * (size_t)(g->n + 1));
  if (!*out) return -1;
  for (int i = 0; i < g->n; i++)
    if (g->nodes[i].op == TINY_INPUT) (*out)[k++] = i;
  return k;
}

harp_status tiny_compute_outputs(harp_error *e, tiny_graph *g) {
  if (g->explicit_outputs) return HARP_OK;
  char *used = ut_xcalloc((size_t)g->n + 1, 1);
  if (!used) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0; i < g->n; i++)
    for (int s = 0; s < g->nodes[i].nsrc; s++)
      if (g->nodes[i].src[s].node >= 0) used[g->nodes[i].src[s].node] = 1;
  free(g->outputs);
  g->outputs = ut_xmalloc(sizeof(int) * (size_t)(g->n + 1));
  g->noutputs = 0;
  if (!g->outputs) {
    free(used);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  for (int i = 0; i < g->n; i++)
    if (!used[i] && g->nodes[i].op != TINY_INPUT && g->nodes[i].op != TINY_CONST) g->outputs[g->noutputs++] = i;
  free(used);
  return HARP_OK;
}

const char *tiny_output_name(const tiny_graph *g, int node) {
  const tiny_node *n = &g->nodes[node];
  return n->op == TINY_INPUT ? n->a.input.tensor_id : n->id;
}

/* ---- expressions -------------------------------------------------------- */
static tiny_expr *new_expr(tiny_graph *g, tiny_expr_kind k) {
  tiny_expr *x = ut_arena_alloc(g->arena, sizeof *x);
  if (!x) {
    ut_fail(&g->err, HARP_E_NO_MEMORY, NULL, "out of memory");
    return NULL;
  }
  x->k = k;
  return x;
}

const tiny_expr *tiny_x_const(tiny_graph *g, int64_t c) {
  tiny_expr *x = new_expr(g, TX_CONST);
  if (x) x->c = c;
  return x;
}

const tiny_expr *tiny_x_var(tiny_graph *g, int i) {
  tiny_expr *x = new_expr(g, TX_VAR);
  if (x) x->var = i;
  return x;
}

const tiny_expr *tiny_x_sym(tiny_graph *g, const char *s) {
  tiny_expr *x = new_expr(g, TX_SYM);
  if (x) x->sym = ut_arena_strdup(g->arena, s);
  return x;
}

const tiny_expr *tiny_x_bin(tiny_graph *g, tiny_expr_kind k, const tiny_expr *a, const tiny_expr *b) {
  if (!a || !b) return NULL;
  tiny_expr *x = new_expr(g, k);
  if (x) x->a = a, x->b = b;
  return x;
}

/* ---- rebuilding (normalize and friends) --------------------------------- */
#include "tiny_int.h"

tiny_graph *tiny_graph_new_sharing(tiny_graph *g) {
  tiny_graph *ng = ut_xcalloc(1, sizeof *ng);
  if (!ng) return NULL;
  ng->ids = ut_xcalloc(1, sizeof *ng->ids);
  if (!ng->ids) {
    free(ng);
    return NULL;
  }
  ng->arena = g->arena;
  ng->next_auto_id = g->next_auto_id;
  return ng;
}

void tiny_graph_discard_sharing(tiny_graph *ng) {
  if (!ng) return;
  if (ng->ids) {
    free(ng->ids->keys);
    free(ng->ids->vals);
    free(ng->ids);
  }
  free(ng->nodes);
  free(ng->outputs);
  free(ng);
}

/* A shadow of g: its own copies of g's nodes, outputs and derived symbols,
 * reading g's arena and id map (g outlives it); tiny_infer / tiny_verify
 * rewrite its shapes at other bindings of g's symbols, g untouched. */
tiny_graph *tiny_graph_shadow(const tiny_graph *g) {
  tiny_graph *h = ut_xcalloc(1, sizeof *h);
  if (!h) return NULL;
  *h = *g;
  h->err = (harp_error){0};
  h->nodes = ut_xmalloc(sizeof *h->nodes * (size_t)(g->n + 1));
  h->outputs = ut_xmalloc(sizeof *h->outputs * (size_t)(g->noutputs + 1));
  h->dsyms = ut_xmalloc(sizeof *h->dsyms * (size_t)(g->ndsyms + 1));
  if (!h->nodes || !h->outputs || !h->dsyms) {
    tiny_graph_shadow_free(h);
    return NULL;
  }
  if (g->n) memcpy(h->nodes, g->nodes, sizeof *h->nodes * (size_t)g->n); /* (g's arrays are NULL when empty) */
  if (g->noutputs) memcpy(h->outputs, g->outputs, sizeof *h->outputs * (size_t)g->noutputs);
  if (g->ndsyms) memcpy(h->dsyms, g->dsyms, sizeof *h->dsyms * (size_t)g->ndsyms);
  h->cap = g->n;
  return h;
}

void tiny_graph_shadow_free(tiny_graph *h) {
  if (!h) return;
  free(h->nodes);
  free(h->outputs);
  free(h->dsyms);
  free(h);
}

void tiny_graph_adopt(tiny_graph *g, tiny_graph *ng) {
  free(g->nodes);
  free(g->ids->keys);
  free(g->ids->vals);
  free(g->ids);
  free(g->outputs);
  g->nodes = ng->nodes;
  g->n = ng->n;
  g->cap = ng->cap;
  g->ids = ng->ids;
  g->outputs = ng->outputs;
  g->noutputs = ng->noutputs;
  g->explicit_outputs = ng->explicit_outputs;
  g->next_auto_id = ng->next_auto_id;
  free(ng);
}

const char *tiny_fresh_id(tiny_graph *g, const tiny_graph *also, const char *base, const char *suffix) {
  char buf[256];
  snprintf(buf, sizeof buf, "%.120s.%s", base, suffix);
  for (int k = 1; (tiny_find(g, buf) >= 0 || (also && tiny_find(also, buf) >= 0)) && k < 1000000; k++)
    snprintf(buf, sizeof buf, "%.120s.%s%d", base, suffix, k);
  return ut_arena_strdup(g->arena, buf);
}
