/* function.c — the compiled Function (seed 003): kernels from regions,
 * buffers, lifetime intervals and the arena layout (best fit), the ConstPool
 * layout, and the --dump function JSON.
 * Needs: an rg_partition that passes rg_partition_check.  Gives: fn_build. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "harp/function.h"
#include "harp/poly.h"
#include "harp/region.h"
#include "util/util.h"

static size_t align_up(size_t x) { return (x + FN_ALIGN - 1) / FN_ALIGN * FN_ALIGN; }

void fn_free(fn_function *f) {
  if (!f) return;
  ut_arena_free(f->arena);
  free(f);
}

/* ---- arena allocation: best fit over a free list ------------------------- */
typedef struct block {
  size_t off, size;
} block;

typedef struct allocator {
  block *free; /* sorted by offset, coalesced */
  int n, cap;
  size_t end; /* high-water mark */
} allocator;

static bool alloc_block(allocator *a, size_t size, size_t *off) {
  int best = -1;
  for (int i = 0; i < a->n; i++)
    if (a->free[i].size >= size && (best < 0 || a->free[i].size < a->free[best].size)) best = i;
  if (best >= 0) {
    *off = a->free[best].off;
    a->free[best].off += size;
    a->free[best].size -= size;
    if (a->free[best].size == 0) {
      memmove(&a->free[best], &a->free[best + 1], sizeof(block) * (size_t)(a->n - best - 1));
      a->n--;
    }
    return true;
  }
  /* Grow the arena; a free block at its end is reused as the start. */
  if (a->n && a->free[a->n - 1].off + a->free[a->n - 1].size == a->end) {
    *off = a->free[a->n - 1].off;
    a->n--;
  } else {
    *off = a->end;
  }
  a->end = *off + size;
  return true;
}

static bool free_block(allocator *a, size_t off, size_t size) {
  if (a->n == a->cap) {
    int cap = a->cap ? a->cap * 2 : 16;
    block *b = ut_xrealloc(a->free, sizeof(block) * (size_t)cap);
    if (!b) return false;
    a->free = b;
    a->cap = cap;
  }
  int i = 0;
  while (i < a->n && a->free[i].off < off) i++;
  memmove(&a->free[i + 1], &a->free[i], sizeof(block) * (size_t)(a->n - i));
  a->free[i] = (block){off, size};
  a->n++;
  /* coalesce with the neighbours */
  if (i + 1 < a->n && a->free[i].off + a->free[i].size == a->free[i + 1].off) {
    a->free[i].size += a->free[i + 1].size;
    memmove(&a->free[i + 1], &a->free[i + 2], sizeof(block) * (size_t)(a->n - i - 2));
    a->n--;
  }
  if (i > 0 && a->free[i - 1].off + a->free[i - 1].size == a->free[i].off) {
    a->free[i - 1].size += a->free[i].size;
    memmove(&a->free[i], &a->free[i + 1], sizeof(block) * (size_t)(a->n - i - 1));
    a->n--;
  }
  return true;
}

/* ---- building ------------------------------------------------------------- */
static int add_buffer(fn_function *f, const tiny_graph *g, int node, fn_buf_kind kind) {
  fn_buffer *b = &f->buffers[f->nbuffers];
  const tiny_node *n = &g->nodes[node];
  b->id = f->nbuffers;
  b->node = node;
  b->kind = kind;
  b->dtype = n->dtype;
  b->numel = tiny_shape_numel(&n->shape);
  b->size = (size_t)b->numel * (size_t)tiny_dtype_size(n->dtype);
  b->space = FN_HOST;
  b->first = -1;
  b->last = -1;
  f->buffer_of[node] = b->id;
  return f->nbuffers++;
}

static int *ints(ut_arena *a, int n) { return ut_arena_alloc(a, sizeof(int) * (size_t)(n + 1)); }

/* Whether region info runs as a contraction kernel: a contraction with its
 * epilogue, attention, or a lone contraction block (a bare MatMul or Conv). */
static bool contraction_region(const poly_view *pv, const rg_info *info) {
  if (!info) return false;
  if (info->shape == RG_SHAPE_CONTRACTION || info->shape == RG_SHAPE_ATTENTION) return true;
  return info->shape == RG_SHAPE_SINGLE && info->anchor >= 0 && poly_block(pv, info->anchor)->con;
}

/* Per node: read as an operand of a contraction block of a contraction region,
 * fused epilogue or not (fn_options.half_mma_operands, bf16_operand_temps);
 * NULL without a Poly-View or memory. */
static bool *mma_operands(ut_arena *a, const rg_partition *p, int nnodes) {
  const poly_view *pv = p->formed ? p->formed->pv : NULL;
  bool *op = pv ? ut_arena_alloc(a, sizeof(bool) * (size_t)(nnodes + 1)) : NULL;
  if (!op) return NULL;
  memset(op, 0, sizeof(bool) * (size_t)(nnodes + 1));
  for (int r = 0; r < p->n; r++) {
    const rg_info *info = p->regions[r].info;
    if (!contraction_region(pv, info)) continue;
    for (int i = 0; i < info->nblocks; i++) {
      const poly_block_info *b = poly_block(pv, info->blocks[i]);
      if (!b->con) continue;
      for (int q = 0; q < 2 && q < b->naccess; q++)
        if (b->access[q].tensor >= 0 && b->access[q].tensor < nnodes) op[b->access[q].tensor] = true;
    }
  }
  return op;
}

harp_status fn_build(harp_error *e, const rg_partition *p, const char *name, fn_function **out) {
  return fn_build_ex(e, p, name, NULL, out);
}

/* f's buffers: model inputs and params first (graph order), then what the
 * regions of p write (outputs marked in is_output); its args and ret. */
static void fn_buffers(fn_function *f, const rg_partition *p, const char *is_output) {
  const tiny_graph *g = p->g;
  for (int i = 0; i < g->n; i++) {
    const tiny_node *n = &g->nodes[i];
    if (n->op != TINY_INPUT) continue;
    bool param = n->a.input.storage && !strcmp(n->a.input.storage, "param");
    f->args[f->nargs++] = add_buffer(f, g, i, param ? FN_PARAM : FN_INPUT);
  }
  for (int r = 0; r < p->n; r++)
    for (int k = 0; k < p->regions[r].nout; k++) {
      int v = p->regions[r].out_values[k];
      int b = add_buffer(f, g, v, is_output[v] ? FN_OUTPUT : FN_TEMP);
      f->buffers[b].first = r;
    }
  for (int k = 0; k < g->noutputs; k++) f->ret[f->nret++] = f->buffer_of[g->outputs[k]];
}

/* fn_options' temp storage: fp16/bf16 temporaries become fp32, except casts'
 * results and (half_mma_operands) what a contraction reads
 * (widen_half_temps); fp32 temporaries a contraction reads become bf16
 * (bf16_operand_temps). */
static void fn_temp_storage(fn_function *f, const rg_partition *p, const fn_options *o) {
  const tiny_graph *g = p->g;
  bool want = (o->widen_half_temps && o->half_mma_operands) || o->bf16_operand_temps;
  bool *operand = want ? mma_operands(f->arena, p, g->n) : NULL;
  for (int b = 0; b < f->nbuffers; b++) {
    fn_buffer *B = &f->buffers[b];
    bool half = B->dtype == TINY_FP16 || B->dtype == TINY_BF16, op = operand && operand[B->node];
    if (B->kind != FN_TEMP) continue;
    if (o->widen_half_temps && half && g->nodes[B->node].op != TINY_CAST && !(o->half_mma_operands && op)) {
      B->dtype = TINY_FP32;
      B->size = (size_t)B->numel * 4;
    } else if (o->bf16_operand_temps && op && B->dtype == TINY_FP32) {
      B->dtype = TINY_BF16;
      B->size = (size_t)B->numel * 2;
    }
  }
}

/* Kernel r of region R: its reads, writes and dependences (the kernels that
 * first wrote what it reads); the lifetimes of what it reads. */
static harp_status fn_kernel_of(harp_error *e, fn_function *f, const rg_region *R, int r) {
  const tiny_graph *g = f->part->g;
  ut_arena *A = f->arena;
  fn_kernel *K = &f->kernels[f->nkernels++];
  K->name = R->name;
  K->region = r;
  K->reads = ints(A, R->nin);
  K->writes = ints(A, R->nout);
  K->deps = ints(A, R->nin);
  if (!K->reads || !K->writes || !K->deps) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int k = 0; k < R->nin; k++) {
    int b = f->buffer_of[R->in_values[k]];
    if (b < 0) return ut_fail(e, HARP_E_INTERNAL, R->name, "reads %s, which no buffer holds", g->nodes[R->in_values[k]].id);
    K->reads[K->nreads++] = b;
    if (f->buffers[b].last < r) f->buffers[b].last = r;
    int w = f->buffers[b].first;
    bool dup = false;
    for (int d = 0; d < K->ndeps; d++) dup |= K->deps[d] == w;
    if (w >= 0 && !dup) K->deps[K->ndeps++] = w;
  }
  for (int k = 0; k < R->nout; k++) K->writes[K->nwrites++] = f->buffer_of[R->out_values[k]];
  return HARP_OK;
}

/* The arena: walk the kernels; allocate what a kernel writes, then release
 * what it read for the last time (its outputs must not overlap its
 * inputs); then the params' offsets.  False: out of memory. */
static bool fn_place(fn_function *f, allocator *al) {
  for (int r = 0; r < f->nkernels; r++) {
    fn_kernel *K = &f->kernels[r];
    for (int k = 0; k < K->nwrites; k++) {
      fn_buffer *b = &f->buffers[K->writes[k]];
      if (b->kind != FN_TEMP) continue;
      if (b->last < r) b->last = r; /* written but never read: free right after */
      alloc_block(al, align_up(b->size ? b->size : 1), &b->offset);
    }
    for (int k = 0; k < K->nreads; k++) {
      fn_buffer *b = &f->buffers[K->reads[k]];
      if (b->kind == FN_TEMP && b->last == r && !free_block(al, b->offset, align_up(b->size ? b->size : 1))) return false;
    }
    for (int k = 0; k < K->nwrites; k++) {
      fn_buffer *b = &f->buffers[K->writes[k]];
      if (b->kind == FN_TEMP && b->last == r && !free_block(al, b->offset, align_up(b->size ? b->size : 1))) return false;
    }
  }
  f->required_memory = al->end;
  for (int b = 0; b < f->nbuffers; b++)
    if (f->buffers[b].kind == FN_PARAM) {
      f->buffers[b].offset = f->const_bytes;
      f->const_bytes += align_up(f->buffers[b].size);
    }
  return true;
}

harp_status fn_build_ex(harp_error *e, const rg_partition *p, const char *name, const fn_options *o, fn_function **out) {
  const tiny_graph *g = p->g;
  *out = NULL;
  fn_function *f = ut_xcalloc(1, sizeof *f);
  if (!f || !(f->arena = ut_arena_new())) {
    free(f);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  ut_arena *A = f->arena;
  allocator al = {0};
  f->name = ut_arena_strdup(A, name ? name : "main");
  f->part = p;
  f->buffers = ut_arena_alloc(A, sizeof(fn_buffer) * ((size_t)g->n + 1));
  f->buffer_of = ints(A, g->n);
  f->kernels = ut_arena_alloc(A, sizeof(fn_kernel) * ((size_t)p->n + 1));
  f->args = ints(A, g->n);
  f->ret = ints(A, g->noutputs);
  char *is_output = ut_arena_alloc(A, (size_t)g->n + 1);
  harp_status st = HARP_OK;
  if (!f->name || !f->buffers || !f->buffer_of || !f->kernels || !f->args || !f->ret || !is_output)
    st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (!st) {
    for (int i = 0; i < g->n; i++) f->buffer_of[i] = -1;
    for (int k = 0; k < g->noutputs; k++) is_output[g->outputs[k]] = 1;
    fn_buffers(f, p, is_output);
    if (o) fn_temp_storage(f, p, o);
  }
  for (int r = 0; r < p->n && !st; r++) st = fn_kernel_of(e, f, &p->regions[r], r);
  if (!st && !fn_place(f, &al)) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  free(al.free);
  if (st) {
    fn_free(f);
    return st;
  }
  *out = f;
  return HARP_OK;
}

/* ---- queries and checks ---------------------------------------------------- */
static bool overlaps_in_time(const fn_buffer *a, const fn_buffer *b) { return a->first <= b->last && b->first <= a->last; }

size_t fn_peak_live_bytes(const fn_function *f) {
  size_t peak = 0;
  for (int r = 0; r < f->nkernels; r++) {
    size_t live = 0;
    for (int b = 0; b < f->nbuffers; b++)
      if (f->buffers[b].kind == FN_TEMP && f->buffers[b].first <= r && r <= f->buffers[b].last) live += f->buffers[b].size;
    if (live > peak) peak = live;
  }
  return peak;
}

int fn_max_live_temps(const fn_function *f) {
  int peak = 0;
  for (int r = 0; r < f->nkernels; r++) {
    int live = 0;
    for (int b = 0; b < f->nbuffers; b++)
      live += f->buffers[b].kind == FN_TEMP && f->buffers[b].first <= r && r <= f->buffers[b].last;
    if (live > peak) peak = live;
  }
  return peak;
}

harp_status fn_check(harp_error *e, const fn_function *f) {
  for (int i = 0; i < f->nbuffers; i++) {
    const fn_buffer *a = &f->buffers[i];
    if (a->kind != FN_TEMP) continue;
    if (a->offset % FN_ALIGN) return ut_fail(e, HARP_E_MISALIGNED, NULL, "buffer %d at offset %zu", i, a->offset);
    if (a->offset + a->size > f->required_memory)
      return ut_fail(e, HARP_E_INTERNAL, NULL, "buffer %d ends past the arena", i);
    for (int j = 0; j < i; j++) {
      const fn_buffer *b = &f->buffers[j];
      if (b->kind != FN_TEMP || !overlaps_in_time(a, b)) continue;
      if (a->offset < b->offset + (b->size ? b->size : 1) && b->offset < a->offset + (a->size ? a->size : 1))
        return ut_fail(e, HARP_E_INTERNAL, NULL, "buffers %d and %d are live together and overlap", i, j);
    }
  }
  return HARP_OK;
}

/* ---- dump ----------------------------------------------------------------- */
static const char *kind_name(fn_buf_kind k) {
  static const char *n[] = {"input", "param", "output", "temp"};
  return n[k];
}

static json_t *int_array(const int *v, int n) {
  json_t *a = json_array();
  for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(v[i]));
  return a;
}

char *fn_dump_json(const fn_function *f) {
  const tiny_graph *g = f->part->g;
  json_t *root = json_object(), *fn = json_object();
  json_object_set_new(root, "function", fn);
  json_object_set_new(fn, "name", json_string(f->name));
  json_object_set_new(fn, "required_memory", json_integer((json_int_t)f->required_memory));
  json_object_set_new(fn, "const_bytes", json_integer((json_int_t)f->const_bytes));
  json_object_set_new(fn, "peak_live_bytes", json_integer((json_int_t)fn_peak_live_bytes(f)));
  json_t *ks = json_array();
  for (int r = 0; r < f->nkernels; r++) {
    const fn_kernel *K = &f->kernels[r];
    json_t *k = json_object();
    json_object_set_new(k, "name", json_string(K->name));
    json_object_set_new(k, "region", json_integer(K->region));
    json_object_set_new(k, "reads", int_array(K->reads, K->nreads));
    json_object_set_new(k, "writes", int_array(K->writes, K->nwrites));
    json_object_set_new(k, "deps", int_array(K->deps, K->ndeps));
    json_t *ld = json_array();
    for (int d = 0; d < 3; d++) json_array_append_new(ld, json_integer((json_int_t)K->launch_dims[d]));
    json_object_set_new(k, "launch_dims", ld);
    json_array_append_new(ks, k);
  }
  json_object_set_new(fn, "kernels", ks);
  json_t *bs = json_array();
  for (int i = 0; i < f->nbuffers; i++) {
    const fn_buffer *b = &f->buffers[i];
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer(b->id));
    json_object_set_new(o, "value", json_string(g->nodes[b->node].id));
    json_object_set_new(o, "kind", json_string(kind_name(b->kind)));
    json_object_set_new(o, "dtype", json_string(tiny_dtype_name(b->dtype)));
    json_object_set_new(o, "size", json_integer((json_int_t)b->size));
    json_object_set_new(o, "offset", json_integer((json_int_t)b->offset));
    json_object_set_new(o, "memory_space", json_string(b->space == FN_HOST ? "host" : "device"));
    json_t *live = json_array();
    json_array_append_new(live, json_integer(b->first));
    json_array_append_new(live, json_integer(b->last));
    json_object_set_new(o, "live", live);
    json_array_append_new(bs, o);
  }
  json_object_set_new(fn, "buffers", bs);
  json_object_set_new(fn, "args", int_array(f->args, f->nargs));
  json_object_set_new(fn, "ret", int_array(f->ret, f->nret));
  char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(root);
  return s;
}

/* ---- ConstPool ------------------------------------------------------------- */
/* fn_constpool_from_tensors, each weight exactly its buffer's size or
 * (upto) no larger. */
static harp_status constpool_fill(harp_error *e, const fn_function *f, const ut_tensor *params, int nparams, bool upto,
                                  fn_constpool *out) {
  memset(out, 0, sizeof *out);
  out->size = f->const_bytes;
  out->data = ut_xcalloc(out->size ? out->size : 1, 1);
  if (!out->data) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory for a %zu-byte ConstPool", out->size);
  int k = 0;
  for (int a = 0; a < f->nargs; a++) {
    const fn_buffer *b = &f->buffers[f->args[a]];
    if (b->kind != FN_PARAM) continue;
    if (k >= nparams || params[k].dtype != b->dtype || (upto ? params[k].nbytes > b->size : params[k].nbytes != b->size)) {
      fn_constpool_free(out);
      return ut_fail(e, HARP_E_INPUT_MISMATCH, f->part ? f->part->g->nodes[b->node].id : NULL, /* a ShapeSet manifest's has none */
                     "weight %d does not match the model", k);
    }
    if (params[k].nbytes) memcpy(out->data + b->offset, params[k].data, params[k].nbytes);
    k++;
  }
  if (k != nparams) {
    fn_constpool_free(out);
    return ut_fail(e, HARP_E_INPUT_MISMATCH, NULL, "%d weights given, the model has %d", nparams, k);
  }
  return HARP_OK;
}

harp_status fn_constpool_from_tensors(harp_error *e, const fn_function *f, const ut_tensor *params, int nparams,
                                    fn_constpool *out) {
  return constpool_fill(e, f, params, nparams, false, out);
}

harp_status fn_constpool_from_tensors_upto(harp_error *e, const fn_function *f, const ut_tensor *params, int nparams,
                                           fn_constpool *out) {
  return constpool_fill(e, f, params, nparams, true, out);
}

void fn_constpool_free(fn_constpool *cp) {
  free(cp->data);
  memset(cp, 0, sizeof *cp);
}
