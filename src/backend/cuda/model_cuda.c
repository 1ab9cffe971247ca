/* model_cuda.c — the GPU translation unit of a compiled model: every region
 * of the Function as kernels of one cuda_module, the launch list, and the
 * layout of the model's device memory.
 * Needs: region_cuda.c, cuda_dedup.c, cuda_wgmma_rt.c (cuda_rtsz_at).  Gives: cuda_model_build,
 * cuda_model_dump_json, cuda_arg_offset, cuda_launch_grid (region_cuda.h).
 *
 * Kernels that are the same code (a model's repeated layers) are compiled
 * once: cuda_dedup.c keeps one and points the others' launches at it
 * (HARP_NO_DEDUP=1: every region keeps its own kernels).
 *
 * Device memory: one arena [temporaries | inputs and outputs | scratch |
 * packed | status] (every part 256-byte aligned; the temporaries keep the Function's
 * liveness-based offsets) and the ConstPool with the weights.  A launch's
 * argument names a Function buffer (plus a byte offset) or the scratch or
 * status word; the runtime, the standalone loader and the simulator tests
 * turn that into an address the same way (cuda_arg_offset). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "backend/cuda/region_cuda.h"
#include "util/util.h"

#define PART_ALIGN 256

static size_t up(size_t x) { return (x + PART_ALIGN - 1) / PART_ALIGN * PART_ALIGN; }

void cuda_model_free(cuda_model_tu *t) {
  if (!t) return;
  cuda_module_free(t->mod);
  free(t->launch);
  free(t->io_offset);
  ut_arena_free(t->arena);
  free(t);
}

static bool is_template(const char *kind) {
  return !strcmp(kind, "mma_gemm") || !strcmp(kind, "mma_conv") || !strcmp(kind, "attention") ||
         !strcmp(kind, "wgmma_gemm");
}

/* Does parameter p of k read (or write) its argument?  A tensor map reads
 * A and B, writes C. */
static bool param_reads(const cuda_param *p) {
  return p->kind == CUDA_P_PTR_IN || (p->kind == CUDA_P_TMAP && p->tmap && strcmp(p->tmap->tensor, "C"));
}
static bool param_writes(const cuda_param *p) {
  return p->kind == CUDA_P_PTR_OUT || (p->kind == CUDA_P_TMAP && p->tmap && !strcmp(p->tmap->tensor, "C"));
}

/* Drop the launches of regions nothing reads: walking the regions last to
 * first, one is live when a launch of it writes a model output or a buffer
 * a live region reads (a causal attention's mask, built by the program, is
 * dead when the template reads the causal pattern instead; at 4k tokens
 * its construction took 22 ms on an H200).  Kernels no launch uses leave
 * the module. */
static harp_status drop_dead_regions(harp_error *e, cuda_model_tu *t) {
  const fn_function *f = t->f;
  bool *live = ut_xcalloc((size_t)f->nbuffers + 1, 1), *keep = ut_xcalloc((size_t)t->nlaunch + 1, 1);
  if (!live || !keep) {
    free(live), free(keep);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  for (int b = 0; b < f->nbuffers; b++) live[b] = f->buffers[b].kind == FN_OUTPUT;
  for (int hi = t->nlaunch; hi > 0;) {
    int lo = hi - 1, r = t->launch[lo].fn_kernel;
    while (lo > 0 && t->launch[lo - 1].fn_kernel == r) lo--;
    bool on = false;
    for (int i = lo; i < hi && !on; i++)
      for (int p = 0; p < t->launch[i].k->nparams; p++) {
        const cuda_arg *a = &t->launch[i].args[p];
        on = on || (a->kind == CUDA_ARG_BUF && param_writes(&t->launch[i].k->params[p]) && live[a->buffer]);
      }
    for (int i = lo; i < hi; i++) {
      keep[i] = on;
      for (int p = 0; on && p < t->launch[i].k->nparams; p++)
        if (t->launch[i].args[p].kind == CUDA_ARG_BUF && param_reads(&t->launch[i].k->params[p]))
          live[t->launch[i].args[p].buffer] = true;
    }
    if (!on) t->ndead++;
    hi = lo;
  }
  int n = 0;
  for (int i = 0; i < t->nlaunch; i++)
    if (keep[i]) t->launch[n++] = t->launch[i];
  t->nlaunch = n;
  int nk = 0; /* the kernels still launched, in order */
  for (int i = 0; i < t->mod->n; i++) {
    bool used = false;
    for (int j = 0; j < t->nlaunch && !used; j++) used = t->launch[j].k == t->mod->k[i];
    if (used) t->mod->k[nk++] = t->mod->k[i];
  }
  t->mod->n = nk;
  free(live), free(keep);
  return HARP_OK;
}

/* The ShapeSet build's symbols gen copied into t's arena, and their values
 * in t's graph (a symbol no dim of the graph names: its hi) into c. */
static harp_status gen_setup(harp_error *e, cuda_model_tu *t, const cuda_syms *gen, cuda_rctx *c) {
  const char **names = ut_arena_alloc(t->arena, sizeof *names * (size_t)gen->n);
  int64_t *hi = ut_arena_alloc(t->arena, sizeof *hi * (size_t)gen->n), *now = ut_arena_alloc(t->arena, sizeof *now * (size_t)gen->n);
  if (!names || !hi || !now) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0; i < gen->n; i++) {
    if (!(names[i] = ut_arena_strdup(t->arena, gen->names[i]))) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    hi[i] = gen->hi[i], now[i] = -1;
    for (int k = 0; k < t->g->n && now[i] < 0; k++)
      for (int d = 0; d < t->g->nodes[k].shape.rank && now[i] < 0; d++)
        if (t->g->nodes[k].shape.d[d].sym && !strcmp(t->g->nodes[k].shape.d[d].sym, names[i])) now[i] = t->g->nodes[k].shape.d[d].n;
    if (now[i] < 0) now[i] = hi[i];
  }
  t->gen = (cuda_syms){gen->n, names, hi};
  c->gen = t->gen;
  c->gen_now = now;
  return HARP_OK;
}

int64_t cuda_launch_grid(const cuda_launch *l, const int64_t *sv) {
  int ax = l->grid_axis == 1 ? 1 : 0;
  if (l->grid_div <= 0 || !sv) return l->k->grid[ax];
  int64_t n = l->grid_lit;
  for (int j = 0; j < l->ngrid_sym; j++) n *= sv[l->grid_sym[j]];
  for (int j = 0; j < l->ngrid_tile && j < 3; j++)
    n *= (cuda_rtsz_at(&l->grid_tile[j], sv) + l->grid_tile_add[j]) / (l->grid_tile_per[j] > 0 ? l->grid_tile_per[j] : 1);
  n = (n + l->grid_div - 1) / l->grid_div;
  return n < 1 ? 1 : n > l->k->grid[ax] ? l->k->grid[ax] : n;
}

harp_status cuda_model_build(harp_error *e, const tiny_graph *g, const poly_view *pv, const fn_function *f,
                           const tiny_symtab *syms, cuda_arch arch, struct rt_plan_choice *plans,
                           cuda_math math, const struct rt_knobs *knobs, const cuda_syms *gen, cuda_model_tu **out) {
  *out = NULL;
  cuda_model_tu *t = ut_xcalloc(1, sizeof *t);
  if (!t) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  t->f = f;
  t->g = g;
  t->io_offset = ut_xcalloc((size_t)f->nbuffers + 1, sizeof(size_t));
  t->arena = ut_arena_new();
  harp_status st = !t->io_offset || !t->arena ? ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory")
                                            : cuda_module_new(e, arch, &t->mod);
  t->math = math;
  cuda_rctx c = {.e = e, .g = g, .pv = pv, .f = f, .syms = syms, .arena = t->arena, .mod = t->mod, .plans = plans, .math = math, .knobs = knobs};
  if (!st && gen && gen->n > 0) st = gen_setup(e, t, gen, &c);
  for (int r = 0; r < f->nkernels && !st; r++) st = cuda_emit_region(&c, r);
  t->launch = c.launch;
  t->nlaunch = c.nlaunch;
  t->nattn_generic = c.nattn_generic;
  if (!st) st = drop_dead_regions(e, t);
  t->nkernels_emitted = t->mod ? t->mod->n : 0;
  if (!st && !rt_knobs_or_default(knobs)->no_dedup) st = cuda_model_dedup(e, t);
  if (st) {
    cuda_model_free(t);
    return st;
  }
  for (int i = 0; i < t->nlaunch; i++) {
    const char *kind = t->launch[i].k->kind;
    if (is_template(kind)) t->ntemplate++;
    else if (!strcmp(kind, "generic") || !strcmp(kind, "gather")) t->ngeneric++;
    else t->nsimple++;
  }
  size_t at = t->temp_bytes = up(f->required_memory);
  for (int b = 0; b < f->nbuffers; b++)
    if (f->buffers[b].kind == FN_INPUT || f->buffers[b].kind == FN_OUTPUT) {
      t->io_offset[b] = at;
      at += up(f->buffers[b].size ? f->buffers[b].size : 1);
    }
  t->scratch_off = at;
  t->scratch_bytes = (size_t)c.scratch_bytes;
  at += up(t->scratch_bytes);
  t->packed_off = at;
  t->packed_bytes = (size_t)c.packed_bytes;
  at += up(t->packed_bytes);
  for (int i = 0; i < t->nlaunch; i++) t->nonce += t->launch[i].once;
  t->status_off = at;
  t->arena_bytes = at + PART_ALIGN;
  *out = t;
  return HARP_OK;
}

int64_t cuda_arg_offset(const cuda_model_tu *t, const cuda_arg *a, bool *in_consts) {
  *in_consts = false;
  switch (a->kind) {
  case CUDA_ARG_NULL:
  case CUDA_ARG_SYM: return -1;
  case CUDA_ARG_SCRATCH: return (int64_t)t->scratch_off + a->offset;
  case CUDA_ARG_PACKED: return (int64_t)t->packed_off + a->offset;
  case CUDA_ARG_STATUS: return (int64_t)t->status_off;
  case CUDA_ARG_BUF: break;
  }
  const fn_buffer *b = &t->f->buffers[a->buffer];
  switch (b->kind) {
  case FN_PARAM: *in_consts = true; return (int64_t)b->offset + a->offset;
  case FN_TEMP: return (int64_t)b->offset + a->offset;
  default: return (int64_t)t->io_offset[a->buffer] + a->offset;
  }
}

static const char *space_of(const cuda_model_tu *t, const cuda_arg *a) {
  switch (a->kind) {
  case CUDA_ARG_NULL: return "null";
  case CUDA_ARG_SYM: return "sym";
  case CUDA_ARG_SCRATCH: return "scratch";
  case CUDA_ARG_PACKED: return "packed";
  case CUDA_ARG_STATUS: return "status";
  case CUDA_ARG_BUF: break;
  }
  switch (t->f->buffers[a->buffer].kind) {
  case FN_PARAM: return "weights";
  case FN_TEMP: return "temp";
  case FN_INPUT: return "input";
  default: return "output";
  }
}

/* One launch of t's launch list, l, as gpu.json writes it: kernel, region,
 * arguments (space, buffer, offsets), a decline note, grid.x at run time. */
static json_t *launch_json(const cuda_model_tu *t, const cuda_launch *l) {
  json_t *x = json_object(), *args = json_array();
  json_object_set_new(x, "kernel", json_string(l->k->name));
  json_object_set_new(x, "region", json_string(t->f->kernels[l->fn_kernel].name));
  for (int p = 0; p < l->nargs; p++) {
    const cuda_arg *a = &l->args[p];
    json_t *y = json_object();
    json_object_set_new(y, "param", json_string(l->k->params[p].name));
    json_object_set_new(y, "space", json_string(space_of(t, a)));
    if (a->kind == CUDA_ARG_BUF) {
      json_object_set_new(y, "buffer", json_integer(a->buffer));
      json_object_set_new(y, "value", json_string(t->g->nodes[t->f->buffers[a->buffer].node].id));
    }
    if (a->kind == CUDA_ARG_SYM) json_object_set_new(y, "sym", json_integer(a->buffer));
    if (a->kind == CUDA_ARG_BUF || a->kind == CUDA_ARG_SCRATCH || a->kind == CUDA_ARG_PACKED)
      json_object_set_new(y, "byte_offset", json_integer(a->offset));
    bool in_consts;
    int64_t off = cuda_arg_offset(t, a, &in_consts);
    if (off >= 0) json_object_set_new(y, "offset", json_integer(off));
    json_array_append_new(args, y);
  }
  json_object_set_new(x, "args", args);
  if (l->note) json_object_set_new(x, "declined", json_string(l->note));
  if (l->once) json_object_set_new(x, "once", json_true());
  if (l->grid_div > 0) { /* grid.x at run time: min(grid[0], ceil(lit * prod(syms) / div)) */
    json_t *gs = json_array(), *gr = json_object();
    for (int j = 0; j < l->ngrid_sym; j++) json_array_append_new(gs, json_integer(l->grid_sym[j]));
    json_object_set_new(gr, "lit", json_integer(l->grid_lit));
    json_object_set_new(gr, "syms", gs);
    json_object_set_new(gr, "div", json_integer(l->grid_div));
    if (l->ngrid_tile) { /* times tile counts: (lit x syms + add) / per each */
      json_t *ts = json_array();
      for (int j = 0; j < l->ngrid_tile && j < 3; j++) {
        json_t *tj = json_object(), *ss = json_array();
        for (int i = 0; i < l->grid_tile[j].n; i++) json_array_append_new(ss, json_integer(l->grid_tile[j].sym[i]));
        json_object_set_new(tj, "lit", json_integer(l->grid_tile[j].lit));
        json_object_set_new(tj, "syms", ss);
        json_object_set_new(tj, "add", json_integer(l->grid_tile_add[j]));
        json_object_set_new(tj, "per", json_integer(l->grid_tile_per[j]));
        json_array_append_new(ts, tj);
      }
      json_object_set_new(gr, "tiles", ts);
    }
    json_object_set_new(x, l->grid_axis == 1 ? "grid_y" : "grid_x", gr);
  }
  return x;
}

/* Function buffer b of t as gpu.json writes it: where it lives (space,
 * offset) and what fills it (value, name, dtype, shape, bytes). */
static json_t *buffer_json(const cuda_model_tu *t, int b) {
  const fn_buffer *B = &t->f->buffers[b];
  const tiny_node *n = &t->g->nodes[B->node];
  json_t *x = json_object();
  cuda_arg a = {CUDA_ARG_BUF, b, 0};
  bool in_consts;
  json_object_set_new(x, "id", json_integer(b));
  json_object_set_new(x, "space", json_string(space_of(t, &a)));
  json_object_set_new(x, "value", json_string(n->id));
  if (B->kind == FN_INPUT || B->kind == FN_PARAM) json_object_set_new(x, "name", json_string(n->a.input.tensor_id));
  if (B->kind == FN_OUTPUT) json_object_set_new(x, "name", json_string(tiny_output_name(t->g, B->node)));
  json_object_set_new(x, "dtype", json_string(tiny_dtype_name(B->dtype)));
  json_t *shape = json_array();
  for (int d = 0; d < n->shape.rank; d++) json_array_append_new(shape, json_integer(n->shape.d[d].n));
  json_object_set_new(x, "shape", shape);
  json_object_set_new(x, "bytes", json_integer((json_int_t)B->size));
  json_object_set_new(x, "offset", json_integer(cuda_arg_offset(t, &a, &in_consts)));
  return x;
}

harp_status cuda_model_dump_json(harp_error *e, const cuda_model_tu *t, char **out) {
  *out = NULL;
  char *mj = NULL;
  if (cuda_dump_json(e, t->mod, &mj)) return e->code;
  json_error_t je;
  json_t *root = json_loads(mj, 0, &je);
  free(mj);
  json_t *gpu = root ? json_object_get(root, "gpu") : NULL;
  if (!gpu) {
    json_decref(root);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory while dumping the GPU translation unit");
  }
  json_object_set_new(gpu, "precision", json_string(cuda_math_name(t->math)));
  json_object_set_new(gpu, "dead_regions", json_integer(t->ndead));
  json_t *ls = json_array();
  for (int i = 0; i < t->nlaunch; i++) json_array_append_new(ls, launch_json(t, &t->launch[i]));
  json_object_set_new(gpu, "launches", ls);
  json_t *ss = json_array(); /* a ShapeSet build's symbols: the arguments of CUDA_ARG_SYM */
  for (int i = 0; i < t->gen.n; i++) {
    json_t *x = json_object();
    json_object_set_new(x, "name", json_string(t->gen.names[i]));
    json_object_set_new(x, "hi", json_integer(t->gen.hi[i]));
    json_array_append_new(ss, x);
  }
  json_object_set_new(gpu, "syms", ss);
  json_t *bs = json_array(); /* every Function buffer: where it lives and what fills it */
  for (int b = 0; b < t->f->nbuffers; b++) json_array_append_new(bs, buffer_json(t, b));
  json_object_set_new(gpu, "buffers", bs);
  json_t *mem = json_object();
  json_object_set_new(mem, "arena_bytes", json_integer((json_int_t)t->arena_bytes));
  json_object_set_new(mem, "temp_bytes", json_integer((json_int_t)t->temp_bytes));
  json_object_set_new(mem, "scratch_offset", json_integer((json_int_t)t->scratch_off));
  json_object_set_new(mem, "scratch_bytes", json_integer((json_int_t)t->scratch_bytes));
  json_object_set_new(mem, "packed_offset", json_integer((json_int_t)t->packed_off));
  json_object_set_new(mem, "packed_bytes", json_integer((json_int_t)t->packed_bytes));
  json_object_set_new(mem, "status_offset", json_integer((json_int_t)t->status_off));
  json_object_set_new(mem, "weights_bytes", json_integer((json_int_t)t->f->const_bytes));
  json_object_set_new(gpu, "memory", mem);
  json_t *cnt = json_object();
  json_object_set_new(cnt, "template", json_integer(t->ntemplate));
  json_object_set_new(cnt, "simple", json_integer(t->nsimple));
  json_object_set_new(cnt, "generic", json_integer(t->ngeneric));
  json_object_set_new(gpu, "launch_kinds", cnt);
  json_t *sh = json_object(); /* cuda_dedup.c: kernels as the regions made them, and as compiled */
  json_object_set_new(sh, "emitted", json_integer(t->nkernels_emitted));
  json_object_set_new(sh, "compiled", json_integer(t->mod->n));
  json_object_set_new(gpu, "kernel_sharing", sh);
  char *s = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
  json_decref(root);
  if (!s) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory while dumping the GPU translation unit");
  *out = s;
  return HARP_OK;
}
