/* sgen_weights.c — a ShapeSet model's weights whose shape moves with a
 * symbol of the box (llama's rotary tables cos, sin [S, 1, 64]): one object
 * serves every binding, so such a weight is one table at the box's upper
 * corner ([128, 1, 64] for S in 16..128) that the kernels read the
 * binding's leading slice of.  The model is rewritten once, before its
 * corners are prepared: the weight is declared at its shape at the upper
 * corner and read through a SHRINK [0, dim) on each axis that moves (a
 * graph op over the symbols, which the kernels fuse and read at run time;
 * sgen.c).  A weight given at the upper corner's shape is the table; one
 * given at the binding's shape (as the model declares it, `harp run
 * --param` for one binding) binds the symbols like any input and is placed
 * in the leading corner of a table at the upper corner for that run (the
 * rest zeros, which that binding never reads).
 * Needs: tiny (load / write JSON, tiny_declare_at, tiny_bind_input).  Gives: sgen_weights.h. */
#include <stdlib.h>
#include <string.h>

#include "sgen_weights.h"
#include "util/util.h"

/* Whether axis k of the weight node n (as loaded) moves with the box: a
 * symbol the box does not fix (a varying one, or a derived size). */
static bool axis_moves(const tiny_node *n, int k, const rt_sgen_sym *syms, int nsyms) {
  const char *y = n->a.input.shape.d[k].sym;
  if (!y) return false;
  for (int i = 0; i < nsyms; i++)
    if (!strcmp(syms[i].name, y)) return syms[i].lo < syms[i].hi;
  return true;
}

/* Whether node n of g is a weight with an axis that moves. */
static bool weight_moves(const tiny_node *n, const rt_sgen_sym *syms, int nsyms) {
  if (n->op != TINY_INPUT || !n->a.input.storage || strcmp(n->a.input.storage, "param")) return false;
  for (int k = 0; k < n->a.input.shape.rank; k++)
    if (axis_moves(n, k, syms, nsyms)) return true;
  return false;
}

bool sgw_any(const char *text, const rt_sgen_sym *syms, int nsyms) {
  harp_error e = {0};
  tiny_graph *g = NULL;
  bool any = false;
  if (!tiny_load_json(&e, text, strlen(text), NULL, &g))
    for (int i = 0; i < g->n && !any; i++) any = weight_moves(&g->nodes[i], syms, nsyms);
  harp_error_clear(&e);
  tiny_graph_free(g);
  return any;
}

harp_status sgw_move(harp_error *e, const char *text, const tiny_graph *ghi, const rt_sgen_sym *syms, int nsyms, char **out,
                     sgw_moved *mv) {
  *out = NULL;
  memset(mv, 0, sizeof *mv);
  if (tiny_load_json(e, text, strlen(text), NULL, &mv->raw)) return e->code;
  int *in = NULL;
  mv->n = tiny_inputs(mv->raw, &in);
  mv->raw_node = ut_xcalloc((size_t)mv->n + 1, sizeof *mv->raw_node);
  mv->hi = ut_xcalloc((size_t)mv->n + 1, sizeof *mv->hi);
  if (!in || !mv->raw_node || !mv->hi) {
    free(in);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  for (int i = 0; i < mv->n; i++) {
    const tiny_node *n = &mv->raw->nodes[in[i]];
    int h = weight_moves(n, syms, nsyms) ? tiny_find(ghi, n->id) : -1;
    mv->raw_node[i] = h >= 0 ? in[i] : -1;
    if (h >= 0) mv->hi[i] = ghi->nodes[h].shape, mv->nmoved++;
  }
  free(in);
  tiny_graph *g = NULL;
  harp_status st = tiny_load_json(e, text, strlen(text), NULL, &g);
  const tiny_shape **at = st ? NULL : ut_xcalloc((size_t)g->n + 1, sizeof *at);
  unsigned *moving = st ? NULL : ut_xcalloc((size_t)g->n + 1, sizeof *moving);
  if (!st && (!at || !moving)) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0; !st && i < mv->n; i++) /* g is mv->raw loaded again: the same nodes */
    if (mv->raw_node[i] >= 0) {
      at[mv->raw_node[i]] = &mv->hi[i];
      for (int k = 0; k < mv->hi[i].rank; k++) moving[mv->raw_node[i]] |= (unsigned)axis_moves(&g->nodes[mv->raw_node[i]], k, syms, nsyms) << k;
    }
  if (!st) st = tiny_declare_at(e, g, at, moving);
  free(at);
  free(moving);
  if (!st && !(*out = tiny_write_json(g))) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  tiny_graph_free(g);
  return st;
}

/* Whether t has exactly shape s's sizes. */
static bool has_shape(const ut_tensor *t, const tiny_shape *s) {
  if (t->rank != s->rank) return false;
  for (int d = 0; d < s->rank; d++)
    if (t->shape[d] != s->d[d].n) return false;
  return true;
}

bool sgw_is_moved(const sgw_moved *mv, int i) { return mv && mv->nmoved && i < mv->n && mv->raw_node[i] >= 0; }

harp_status sgw_bind_input(harp_error *e, const sgw_moved *mv, int i, const ut_tensor *t, tiny_symtab *syms) {
  if (has_shape(t, &mv->hi[i])) return HARP_OK; /* the table at the upper corner: it binds nothing */
  return tiny_bind_input(e, mv->raw, mv->raw_node[i], t->rank, t->shape, syms);
}

/* t (each dim at most the table's) into the leading corner of the zeroed
 * table *y at shape hi. */
static harp_status embed(harp_error *e, const char *id, const ut_tensor *t, const tiny_shape *hi, ut_tensor *y) {
  int64_t dims[TINY_MAX_RANK];
  for (int d = 0; d < hi->rank; d++) {
    dims[d] = hi->d[d].n;
    if (t->shape[d] > dims[d])
      return ut_fail(e, HARP_E_INPUT_MISMATCH, id, "weight %s: axis %d is %lld, past the box's upper corner's %lld", id, d,
                     (long long)t->shape[d], (long long)dims[d]);
  }
  if (ut_tensor_alloc(e, y, t->dtype, hi->rank, dims)) return e->code;
  size_t es = tiny_dtype_size(t->dtype), row = (size_t)(hi->rank ? t->shape[hi->rank - 1] : 1) * es;
  int64_t nrows = 1, idx[TINY_MAX_RANK] = {0};
  for (int d = 0; d + 1 < hi->rank; d++) nrows *= t->shape[d];
  for (int64_t r = 0; r < nrows && row; r++) { /* idx: the row's index over the leading axes */
    size_t off = 0;
    for (int d = 0; d + 1 < hi->rank; d++) off = off * (size_t)dims[d] + (size_t)idx[d];
    memcpy((char *)y->data + off * (size_t)(hi->rank ? dims[hi->rank - 1] : 1) * es, (const char *)t->data + (size_t)r * row,
           row);
    for (int d = hi->rank - 2; d >= 0 && ++idx[d] == t->shape[d]; d--) idx[d] = 0;
  }
  return HARP_OK;
}

harp_status sgw_inputs(harp_error *e, const sgw_moved *mv, const ut_tensor *inputs, int ninputs, ut_tensor **out) {
  *out = ut_xcalloc((size_t)ninputs + 1, sizeof **out);
  if (!*out) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  memcpy(*out, inputs, (size_t)ninputs * sizeof **out);
  for (int i = 0; i < ninputs; i++) {
    if (!sgw_is_moved(mv, i) || has_shape(&inputs[i], &mv->hi[i])) continue;
    const tiny_node *n = &mv->raw->nodes[mv->raw_node[i]];
    if (inputs[i].rank != mv->hi[i].rank || inputs[i].dtype != n->a.input.dtype ||
        embed(e, n->a.input.tensor_id, &inputs[i], &mv->hi[i], &(*out)[i])) {
      if (!e->code) ut_fail(e, HARP_E_INPUT_MISMATCH, n->id, "weight %s does not match the model", n->a.input.tensor_id);
      (*out)[i] = inputs[i];
      sgw_inputs_free(mv, inputs, *out, ninputs);
      *out = NULL;
      return e->code;
    }
  }
  return HARP_OK;
}

void sgw_inputs_free(const sgw_moved *mv, const ut_tensor *inputs, ut_tensor *made, int ninputs) {
  for (int i = 0; made && i < ninputs; i++)
    if (sgw_is_moved(mv, i) && made[i].data != inputs[i].data) ut_tensor_free(&made[i]);
  free(made);
}

void sgw_free(sgw_moved *mv) {
  tiny_graph_free(mv->raw);
  free(mv->raw_node);
  free(mv->hi);
  memset(mv, 0, sizeof *mv);
}
