/* playback.c — run a Function region by region on the reference
 * interpreter, with every intermediate stored in (and read back from) its
 * arena slot.  This proves a partition and an arena layout preserve the
 * graph's meaning: for fp32 models the result equals whole-graph
 * interpretation bit for bit.
 * Needs: fn_build.  Gives: fn_playback, fn_playback_ex (a hook may run a
 * kernel itself: tier 0). */
#include <stdlib.h>
#include <string.h>

#include "harp/function.h"
#include "harp/interp.h"
#include "util/util.h"

/* A Tiny graph computing one region: INPUTs for its in_values, then its
 * nodes, with out_values as outputs. */
static harp_status region_graph(harp_error *e, const tiny_graph *g, const rg_region *R, tiny_graph **out) {
  tiny_graph *s = tiny_graph_new();
  int *map = ut_xmalloc(sizeof(int) * ((size_t)g->n + 1));
  if (!s || !map) {
    tiny_graph_free(s);
    free(map);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  for (int k = 0; k < R->nin; k++) {
    const tiny_node *n = &g->nodes[R->in_values[k]];
    tiny_shape shape = n->shape; /* bound sizes; symbol names kept for REDUCE axes by name */
    for (int d = 0; d < shape.rank; d++)
      if (shape.d[d].sym) shape.d[d].n = -1;
    map[R->in_values[k]] = tiny_b_input(s, n->id, n->dtype, &shape);
  }
  for (int k = 0; k < R->nnodes; k++) {
    const tiny_node *n = &g->nodes[R->nodes[k]];
    tiny_src src[TINY_MAX_SRC];
    for (int i = 0; i < n->nsrc; i++) src[i] = (tiny_src){map[n->src[i].node], 0};
    map[R->nodes[k]] = tiny_add(s, n->id, n->op, src, n->nsrc, tiny_op_argkind(n->op) == TA_NONE ? NULL : &n->a);
  }
  for (int k = 0; k < R->nout; k++) tiny_mark_output(s, map[R->out_values[k]]);
  free(map);
  if (s->err.code) {
    harp_status st = ut_fail(e, s->err.code, s->err.node, "region %s: %s", R->name, s->err.msg);
    tiny_graph_free(s);
    return st;
  }
  *out = s;
  return HARP_OK;
}

/* A tensor header over existing storage (not owned), in dtype dt (a buffer
 * may store its node's fp16/bf16 values widened to fp32: fn_options). */
static ut_tensor view_of(const tiny_node *n, tiny_dtype dt, void *data, size_t nbytes) {
  ut_tensor t = {0};
  t.dtype = dt;
  t.rank = n->shape.rank;
  for (int d = 0; d < t.rank; d++) t.shape[d] = n->shape.d[d].n;
  t.data = data;
  t.nbytes = nbytes;
  return t;
}

/* src's elements into dst (the same shape, another dtype: exact between a
 * half dtype and fp32 for half values). */
static void convert(const ut_tensor *src, ut_tensor *dst) {
  int64_t n = ut_tensor_numel(src);
  for (int64_t i = 0; i < n; i++) ut_tensor_set(dst, i, ut_tensor_get(src, i));
}

/* Region input: the buffer's tensor t as the node dtype the region reads
 * (a copy into *tmp when the buffer stores it widened). */
static harp_status as_read(harp_error *e, const ut_tensor *t, tiny_dtype want, ut_tensor *tmp, ut_tensor *out) {
  if (t->dtype == want) {
    *out = *t;
    return HARP_OK;
  }
  if (ut_tensor_alloc(e, tmp, want, t->rank, t->shape)) return e->code;
  convert(t, tmp);
  *out = *tmp;
  return HARP_OK;
}

/* Result res of a kernel into buffer B's storage: widened to fp32 where B
 * stores it so, copied into the arena, or (a model output) handed over. */
static harp_status store_result(harp_error *e, const fn_function *f, const rg_region *R, const fn_buffer *B,
                                unsigned char *arena, ut_tensor *storage, ut_tensor *res) {
  bool widened = B->kind == FN_TEMP && res->dtype != B->dtype;
  if (widened ? res->nbytes / tiny_dtype_size(res->dtype) != B->size / tiny_dtype_size(B->dtype) : res->nbytes != B->size)
    return ut_fail(e, HARP_E_INTERNAL, R->name, "region result has %zu bytes, its buffer %zu", res->nbytes, B->size);
  if (widened) { /* stored as the backends store it: fp32 */
    convert(res, &storage[B->id]);
  } else if (B->kind == FN_TEMP) {
    memcpy(arena + B->offset, res->data, B->size);
  } else { /* a model output: hand the tensor over */
    for (int o = 0; o < f->nret; o++)
      if (f->ret[o] == B->id) {
        storage[B->id] = *res;
        memset(res, 0, sizeof *res);
        break;
      }
  }
  return HARP_OK;
}

/* Kernel r of f on the interpreter: its region as a graph over the
 * storage of the buffers it reads, its results stored. */
static harp_status play_kernel(harp_error *e, const fn_function *f, const tiny_symtab *syms, int r, unsigned char *arena,
                               ut_tensor *storage) {
  const tiny_graph *g = f->part->g;
  const fn_kernel *K = &f->kernels[r];
  const rg_region *R = &f->part->regions[K->region];
  tiny_graph *s = NULL;
  ut_tensor *in = ut_xcalloc((size_t)K->nreads + 1, sizeof *in), *res = ut_xcalloc((size_t)K->nwrites + 1, sizeof *res);
  ut_tensor *tmp = ut_xcalloc((size_t)K->nreads + 1, sizeof *tmp);
  harp_status st = !in || !res || !tmp ? ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory") : HARP_OK;
  if (!st) st = region_graph(e, g, R, &s);
  if (!st) st = tiny_infer(e, s, syms, false);
  for (int k = 0; k < K->nreads && !st; k++)
    st = as_read(e, &storage[K->reads[k]], g->nodes[f->buffers[K->reads[k]].node].dtype, &tmp[k], &in[k]);
  if (!st) st = tiny_interp(e, s, syms, in, K->nreads, res);
  for (int k = 0; k < K->nwrites && !st; k++) st = store_result(e, f, R, &f->buffers[K->writes[k]], arena, storage, &res[k]);
  for (int k = 0; res && k < K->nwrites; k++) ut_tensor_free(&res[k]);
  for (int k = 0; tmp && k < K->nreads; k++) ut_tensor_free(&tmp[k]);
  free(tmp);
  free(in);
  free(res);
  tiny_graph_free(s);
  return st;
}

harp_status fn_playback(harp_error *e, const fn_function *f, const tiny_symtab *syms, const ut_tensor *inputs,
                      int ninputs, ut_tensor *outputs) {
  return fn_playback_ex(e, f, syms, inputs, ninputs, outputs, NULL, NULL);
}

harp_status fn_playback_ex(harp_error *e, const fn_function *f, const tiny_symtab *syms, const ut_tensor *inputs,
                           int ninputs, ut_tensor *outputs, fn_play_hook run, void *ctx) {
  const tiny_graph *g = f->part->g;
  if (ninputs != f->nargs) return ut_fail(e, HARP_E_INPUT_MISMATCH, NULL, "%d inputs given, the model has %d", ninputs, f->nargs);
  for (int k = 0; k < f->nret; k++) memset(&outputs[k], 0, sizeof outputs[k]);
  unsigned char *arena = ut_xcalloc(f->required_memory ? f->required_memory : 1, 1);
  ut_tensor *storage = ut_xcalloc((size_t)f->nbuffers + 1, sizeof *storage); /* where each buffer lives */
  harp_status st = HARP_OK;
  if (!arena || !storage) {
    st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory for a %zu-byte arena", f->required_memory);
    goto done;
  }
  for (int a = 0; a < f->nargs; a++) storage[f->args[a]] = inputs[a];
  for (int b = 0; b < f->nbuffers; b++) {
    const fn_buffer *B = &f->buffers[b];
    if (B->kind == FN_TEMP) storage[b] = view_of(&g->nodes[B->node], B->dtype, arena + B->offset, B->size);
  }
  for (int r = 0; r < f->nkernels && !st; r++) {
    bool done = false;
    if (run) st = run(ctx, e, r, storage, &done);
    if (!st && !done) st = play_kernel(e, f, syms, r, arena, storage);
  }
  /* Hand the outputs over (g->outputs never repeats a node). */
  for (int o = 0; o < f->nret && !st; o++) {
    outputs[o] = storage[f->ret[o]];
    memset(&storage[f->ret[o]], 0, sizeof storage[f->ret[o]]);
  }
done:
  if (storage)
    for (int b = 0; b < f->nbuffers; b++)
      if (f->buffers[b].kind == FN_OUTPUT) ut_tensor_free(&storage[b]);
  if (st)
    for (int k = 0; k < f->nret; k++) ut_tensor_free(&outputs[k]);
  free(storage);
  free(arena);
  return st;
}
