/* generic_cuda.c — any region as a CUDA kernel: the loop nest isl builds for
 * the CPU backend (rc_nest of src/backend/common/nest.c, the same statements
 * and arithmetic), with the region's shared loops spread over threads.
 * Needs: nest.h (the loop nest), cuda.h, cuda_int.h (cuda_rtsz_text).  Gives: cuda_gen_generic.
 *
 * The shared loops (the region's prefix: every dependence inside the region
 * is the identity on them) are fixed per point; the points are numbered
 * row-major and walked by a grid-stride loop, so consecutive threads take
 * consecutive innermost shared indices (coalesced when that axis is the
 * contiguous one, as for elementwise chains).  Each point runs the rest of
 * the nest: reductions, row loops.  Values kept inside the region live in
 * registers, or in local arrays of the thread; arrays beyond LOCAL_MAX
 * bytes go to a slice of the model's scratch area per thread instead.
 * GATHER regions get a thread per output element; an index out of range
 * writes 0 and sets the model's status word (the runtime reports it); in a
 * ShapeSet build their counts, dims and strides read the sizes at run time. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/common/nest.h"
#include "backend/cuda/cuda_int.h"
#include "backend/cuda/region_cuda.h"
#include "harp/region.h"

#define THREADS 128
#define LOCAL_MAX 2048              /* bytes of local arrays a thread keeps itself */
#define SCRATCH_MAX ((int64_t)1 << 28) /* bytes of scratch slices at most (fewer threads beyond) */
#define MAX_BLOCKS ((int64_t)1 << 20)

/* The helpers of generic kernels: the CPU prelude's names (hp_*), on the
 * GPU prelude's primitives, so the nest's statement text compiles as is. */
static const char generic_helpers[] =
    "/* generic kernels: the CPU backend's helper names on the GPU primitives */\n"
    "#ifndef HK_SIM\n"
    "typedef int int32_t;\ntypedef unsigned int uint32_t;\ntypedef unsigned short uint16_t;\ntypedef unsigned char uint8_t;\n"
    "#define HP_AT(p, i) (p)[i]\n"
    "#endif\n"
    "#ifndef INT32_MAX\n#define INT32_MAX 2147483647\n#endif\n"
    "#ifndef INT32_MIN\n#define INT32_MIN (-2147483647 - 1)\n#endif\n"
    "#ifndef INFINITY\n#define INFINITY HK_INF\n#endif\n"
    "#ifndef NAN\n#define NAN hk_u2f(0x7fc00000u)\n#endif\n"
    "HK_DEV long hp_floord(long a, long b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }\n"
    "HK_DEV long hp_min(long a, long b) { return a < b ? a : b; }\n"
    "HK_DEV long hp_max(long a, long b) { return a > b ? a : b; }\n"
    "HK_DEV float hp_fmax(float a, float b) { return (a != a || b != b) ? NAN : (a > b ? a : b); }\n"
    "HK_DEV float hp_fmin(float a, float b) { return (a != a || b != b) ? NAN : (a < b ? a : b); }\n"
    "HK_DEV int32_t hp_imax(int32_t a, int32_t b) { return a > b ? a : b; }\n"
    "HK_DEV int32_t hp_imin(int32_t a, int32_t b) { return a < b ? a : b; }\n"
    "HK_DEV int32_t hp_f2i(float v) { return hk_f2i(v); }\n"
    "HK_DEV float hp_h2f(uint16_t h) { return hk_h2f(h); }\n"
    "HK_DEV uint16_t hp_f2h(float f) { return hk_f2h(f); }\n"
    "HK_DEV float hp_b2f(uint16_t h) { return hk_bf2f(h); }\n"
    "HK_DEV uint16_t hp_f2b(float f) { return hk_f2bf(f); }\n"
    "HK_DEV float hp_rh(float f) { return hk_h2f(hk_f2h(f)); }\n"
    "HK_DEV float hp_rb(float f) { return hk_bf2f(hk_f2bf(f)); }\n"
    "HK_DEV float hp_exp2f(float x) { return exp2f(x); }\n"
    "HK_DEV float hp_expf(float x) { return expf(x); }\n"
    "HK_DEV float hp_log2f(float x) { return log2f(x); }\n"
    "HK_DEV float hp_erff(float x) { return erff(x); }\n"
    "HK_DEV float hp_relu(float x) { return x < 0 ? 0.0f : x; }\n"
    "HK_DEV float hp_gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }\n";

cuda_launch *cuda_launch_add(cuda_rctx *c, const cuda_kernel *k, int r) {
  if (c->nlaunch == c->caplaunch) {
    int cap = c->caplaunch ? 2 * c->caplaunch : 16;
    cuda_launch *n = ut_xrealloc(c->launch, sizeof *n * (size_t)cap);
    if (!n) return NULL;
    c->launch = n;
    c->caplaunch = cap;
  }
  cuda_launch *l = &c->launch[c->nlaunch++];
  memset(l, 0, sizeof *l);
  l->k = k;
  l->fn_kernel = r;
  l->nargs = k->nparams;
  return l;
}

cuda_arg cuda_arg_slot(const cuda_rctx *c, int r, int slot, int64_t elem_offset, tiny_dtype dt) {
  const fn_kernel *K = &c->f->kernels[r];
  int b = slot < K->nreads ? K->reads[slot] : K->writes[slot - K->nreads];
  return (cuda_arg){CUDA_ARG_BUF, b, elem_offset * tiny_dtype_size(dt)};
}

/* Kernel parameters p<slot> for the Function kernel's buffers. */
static void slot_params(cuda_rctx *c, cuda_b *b, cuda_kernel *k, int r) {
  const fn_kernel *K = &c->f->kernels[r];
  for (int s = 0; s < K->nreads + K->nwrites; s++) {
    int buf = s < K->nreads ? K->reads[s] : K->writes[s - K->nreads];
    tiny_dtype dt = c->f->buffers[buf].dtype;
    cuda_param_add(k, cuda_fmt(b, "p%d", s), cuda_ctype(dt), s < K->nreads ? CUDA_P_PTR_IN : CUDA_P_PTR_OUT, dt);
  }
}

/* ---- the nest as dialect statements ------------------------------------------ */
typedef struct gen {
  cuda_rctx *c;
  cuda_b *b;
  rc_nest *nest;
  ut_str text;
} gen;

static harp_status put_ast(gen *g, const poly_ast *a) {
  if (!a) return HARP_OK;
  cuda_b *b = g->b;
  switch (a->kind) {
  case PA_FOR:
    cuda_open(b, cuda_emit_s(b, CU_LOOP, a->iter, a->init, a->cond, a->inc));
    if (put_ast(g, a->body)) return g->c->e->code;
    cuda_close(b);
    return HARP_OK;
  case PA_IF:
    cuda_if(b, cuda_fmt(b, "%s", a->cond));
    if (put_ast(g, a->then_)) return g->c->e->code;
    if (a->else_) {
      cuda_else(b);
      if (put_ast(g, a->else_)) return g->c->e->code;
    }
    cuda_close(b);
    return HARP_OK;
  case PA_BLOCK:
    for (int i = 0; i < a->nchildren; i++)
      if (put_ast(g, a->children[i])) return g->c->e->code;
    return HARP_OK;
  case PA_USER: {
    ut_str_free(&g->text);
    ut_str_init(&g->text);
    if (rc_nest_stmt(g->nest, a, &g->text)) return g->c->e->code;
    if (g->text.oom) return ut_fail(g->c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
    cuda_emit_s(b, CU_CODE, cuda_fmt(b, "%s", g->text.buf ? g->text.buf : ";"), NULL, NULL, NULL);
    return HARP_OK;
  }
  }
  return HARP_OK;
}

/* Lines of text as Code statements. */
static void put_lines(cuda_b *b, const char *text) {
  for (const char *p = text; p && *p;) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    if (n) cuda_emit_s(b, CU_CODE, cuda_fmt(b, "%.*s", (int)n, p), NULL, NULL, NULL);
    p += n + (nl ? 1 : 0);
  }
}

/* Dims [d0, d1) of sh as C text: in a ShapeSet build where a symbol of c
 * is among them their formula (hp_sv<i> * .. * lit), *z its symbols (z->n
 * 0: none) and *hi its value at the box's corner hi; else their product as
 * a literal, with an L suffix unless bare. */
static const char *dims_text(const cuda_rctx *c, cuda_b *b, const tiny_shape *sh, int d0, int d1, bool bare, cuda_rtsz *z,
                             int64_t *hi) {
  int64_t now = 1;
  for (int d = d0; d < d1; d++) now *= sh->d[d].n;
  if (c->gen.n && cuda_dims_formula(c, sh, d0, d1, z, hi) && z->n) return cuda_rtsz_text(b, z);
  z->n = 0, z->lit = *hi = now; /* no symbol (or more than a formula takes: printed, the box's corners differ) */
  return cuda_fmt(b, bare ? "%" PRId64 : "%" PRId64 "L", now);
}

/* Region r's GATHER (x along axis at the indices, the output's shape) as
 * kernel `name`: a thread per output element, grid-stride; an index out of
 * range writes 0 and sets the status word.  In a ShapeSet build the count,
 * the dims, x's strides and the axis's bound read the box's symbols at run
 * time (hp_sv<i>), the grid from the binding's elements. */
static harp_status gen_gather(cuda_rctx *c, int r, const char *name) {
  const fn_kernel *K = &c->f->kernels[r];
  const rg_region *R = &c->f->part->regions[K->region];
  const tiny_graph *g = c->g;
  int node = R->out_values[0];
  const tiny_node *n = &g->nodes[node], *x = &g->nodes[n->src[0].node];
  int sx = -1, si = -1, so = -1;
  for (int s = 0; s < K->nreads + K->nwrites; s++) {
    int nd = c->f->buffers[s < K->nreads ? K->reads[s] : K->writes[s - K->nreads]].node;
    if (nd == n->src[0].node) sx = s;
    if (nd == n->src[1].node) si = s;
    if (nd == node) so = s;
  }
  if (sx < 0 || si < 0 || so < 0) return ut_fail(c->e, HARP_E_UNSUPPORTED, n->id, "GATHER of a view: materialize its operands first");
  cuda_b bb, *b = &bb;
  cuda_kernel *k = cuda_kernel_new(b, c->mod, c->e, name, "gather");
  if (!k) return c->e->code;
  slot_params(c, b, k, r);
  cuda_param_add(k, "hp_status", "int", CUDA_P_PTR_OUT, TINY_I32);
  for (int i = 0; i < c->gen.n; i++) cuda_param_add(k, cuda_fmt(b, "hp_sv%d", i), "long", CUDA_P_LONG, TINY_I32);
  int axis = n->a.gather.axis, rank = n->shape.rank;
  cuda_rtsz zt, z; /* the elements (the grid's formula); a scratch one */
  int64_t total, h;
  const char *total_t = dims_text(c, b, &n->shape, 0, rank, false, &zt, &total); /* total: at the box's corner hi */
  int64_t blocks = (total + THREADS - 1) / THREADS;
  if (blocks > MAX_BLOCKS) blocks = MAX_BLOCKS;
  if (blocks < 1) blocks = 1;
  k->grid[0] = blocks;
  k->block[0] = THREADS;
  cuda_meta_str(k, "bind", "output element -> thread, grid-stride");
  tiny_dtype xdt = c->f->buffers[c->f->buffer_of[n->src[0].node]].dtype, odt = c->f->buffers[c->f->buffer_of[node]].dtype;
  cuda_open(b, cuda_emit_s(b, CU_LOOP, "hp_i", cuda_fmt(b, "(long)blockIdx.x * %d + threadIdx.x", THREADS),
                           cuda_fmt(b, "hp_i < %s", total_t), cuda_fmt(b, "%" PRId64 "L", blocks * THREADS)));
  cuda_decl(b, "long", "hp_rest", NULL, "hp_i");
  cuda_decl(b, "long", "hp_off", NULL, "0");
  for (int d = rank - 1; d >= 0; d--) {
    const char *dn = dims_text(c, b, &n->shape, d, d + 1, false, &z, &h);
    cuda_decl(b, "const long", cuda_fmt(b, "hp_i%d", d), NULL, cuda_fmt(b, "hp_rest %% %s", dn));
    cuda_assign(b, "hp_rest", cuda_fmt(b, "hp_rest / %s", dn));
    if (d != axis)
      cuda_assign(b, "hp_off", cuda_fmt(b, "hp_off + hp_i%d * %s", d, dims_text(c, b, &x->shape, d + 1, x->shape.rank, false, &z, &h)));
  }
  cuda_decl(b, "const int", "hp_k", NULL, cuda_fmt(b, "p%d[hp_i]", si));
  cuda_decl(b, "const bool", "hp_ok", NULL,
            cuda_fmt(b, "hp_k >= 0 && hp_k < %s", dims_text(c, b, &x->shape, axis, axis + 1, true, &z, &h)));
  cuda_if(b, "!hp_ok");
  cuda_assign(b, "*hp_status", cuda_fmt(b, "%d", r + 1));
  cuda_close(b);
  cuda_decl(b, "const float", "hp_v", NULL,
            cuda_fmt(b, "hp_ok ? %s(p%d + hp_off + (long)hp_k * %s) : 0.0f", cuda_ld_fn(xdt), sx,
                     dims_text(c, b, &x->shape, axis + 1, x->shape.rank, false, &z, &h)));
  const char *sv = odt == TINY_FP16 || odt == TINY_BF16 ? cuda_fmt(b, "%s(hp_v)", cuda_cvt_fn(odt))
                   : odt == TINY_BOOL                   ? "(unsigned char)(hp_v != 0.0f)"
                   : odt == TINY_I32                    ? "hk_f2i(hp_v)"
                                                        : "hp_v";
  cuda_assign(b, cuda_fmt(b, "p%d[hp_i]", so), sv);
  cuda_close(b);
  harp_status st2 = cuda_b_finish(b, k);
  if (st2) return st2;
  cuda_launch *l = cuda_launch_add(c, k, r);
  if (!l) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  int np = K->nreads + K->nwrites;
  for (int s = 0; s < np; s++) l->args[s] = cuda_arg_slot(c, r, s, 0, TINY_FP32);
  l->args[np++] = (cuda_arg){CUDA_ARG_STATUS, -1, 0};
  for (int i = 0; i < c->gen.n; i++) l->args[np++] = (cuda_arg){CUDA_ARG_SYM, i, 0};
  if (zt.n) { /* the grid of the binding's elements */
    l->grid_div = THREADS, l->grid_lit = zt.lit, l->ngrid_sym = zt.n;
    memcpy(l->grid_sym, zt.sym, sizeof zt.sym[0] * (size_t)zt.n);
  }
  return HARP_OK;
}

/* The product of the nest's shared extents [from, to) as C text: the
 * literal, or "(hp_sv<j> * .. * lit L)" where some are symbols. */
static const char *extent_text(cuda_b *b, const rc_nest *nest, int from, int to) {
  int64_t lit = 1;
  const char *syms = NULL;
  for (int i = from; i < to; i++)
    if (!nest->fix_sym[i]) lit *= nest->extent[i];
    else syms = syms ? cuda_fmt(b, "%s * hp_sv%d", syms, nest->fix_sym[i] - 1) : cuda_fmt(b, "hp_sv%d", nest->fix_sym[i] - 1);
  return syms ? cuda_fmt(b, "(%s * %" PRId64 "L)", syms, lit) : cuda_fmt(b, "%" PRId64 "L", lit);
}

/* The grid-stride loop over the nest's points and each point's shared
 * indices hp_p<i> (a symbol's extent is its parameter hp_sv<j>), opened in
 * b; blocks: the grid's (its stride). */
static void put_points(cuda_b *b, const rc_nest *nest, int64_t blocks) {
  cuda_open(b, cuda_emit_s(b, CU_LOOP, "hp_i", cuda_fmt(b, "(long)blockIdx.x * %d + threadIdx.x", THREADS),
                           cuda_fmt(b, "hp_i < %s", extent_text(b, nest, 0, nest->fixed)),
                           cuda_fmt(b, "%" PRId64 "L", blocks * THREADS)));
  for (int i = nest->fixed - 1; i >= 0; i--) {
    const char *inner = extent_text(b, nest, i + 1, nest->fixed);
    const char *v = i == 0 ? cuda_fmt(b, "hp_i / %s", inner) : cuda_fmt(b, "(hp_i / %s) %% %s", inner, extent_text(b, nest, i, i + 1));
    cuda_decl(b, "const long", cuda_fmt(b, "hp_p%d", i), NULL, v);
    cuda_call(b, cuda_fmt(b, "(void)hp_p%d", i));
  }
}

harp_status cuda_gen_generic(cuda_rctx *c, int r, const char *name, const char *note) {
  const fn_kernel *K = &c->f->kernels[r];
  const rg_region *R = &c->f->part->regions[K->region];
  if (R->nblocks == 0) return gen_gather(c, r, name);
  if (cuda_module_helpers(c->e, c->mod, generic_helpers)) return c->e->code;
  rc_nest_ctx rc = {c->e, c->g, c->pv, c->f, c->arena, true, .half_rows = false, .nsyms = c->gen.n, .syms = c->gen.names,
                    .sym_now = c->gen_now, .sym_hi = c->gen.hi};
  rc_nest nest;
  harp_status st = rc_nest_build(&rc, r, &nest);
  if (st) return st;
  int64_t total = 1, total_hi = 1; /* the points; at the box's corner hi (the grid's room) */
  for (int i = 0; i < nest.fixed; i++) {
    total *= nest.extent[i];
    total_hi *= nest.fix_sym[i] ? c->gen.hi[nest.fix_sym[i] - 1] : nest.extent[i];
  }
  cuda_launch grid = {.grid_lit = 1}; /* the points' count as a formula of the symbols */
  for (int i = 0; i < nest.fixed; i++)
    if (nest.fix_sym[i]) grid.grid_sym[grid.ngrid_sym++] = nest.fix_sym[i] - 1;
    else grid.grid_lit *= nest.extent[i];
  int64_t blocks = (total_hi + THREADS - 1) / THREADS;
  if (blocks > MAX_BLOCKS) blocks = MAX_BLOCKS;
  if (blocks < 1) blocks = 1;
  bool scratch = nest.array_bytes > LOCAL_MAX;
  int64_t slice = (nest.array_bytes + 15) / 16 * 16;
  if (scratch && blocks * THREADS * slice > SCRATCH_MAX) {
    blocks = SCRATCH_MAX / slice / THREADS;
    if (blocks < 1) blocks = 1;
  }
  cuda_b bb, *b = &bb;
  gen g = {c, b, &nest, {0}};
  ut_str_init(&g.text);
  cuda_kernel *k = cuda_kernel_new(b, c->mod, c->e, name, "generic");
  if (!k) {
    rc_nest_free(&nest);
    return c->e->code;
  }
  slot_params(c, b, k, r);
  if (scratch) cuda_param_add(k, "hp_scratch", "unsigned char", CUDA_P_PTR_OUT, TINY_BOOL);
  for (int i = 0; i < c->gen.n; i++) cuda_param_add(k, cuda_fmt(b, "hp_sv%d", i), "long", CUDA_P_LONG, TINY_I32);
  k->grid[0] = blocks;
  k->block[0] = THREADS;
  cuda_meta_str(k, "region", R->name);
  cuda_meta_int(k, "shared_loops", nest.fixed);
  cuda_meta_int(k, "points", total);
  cuda_meta_str(k, "bind", "shared loops (row-major points) -> threads, grid-stride");
  cuda_meta_int(k, "local_bytes", nest.local_bytes);
  if (scratch) cuda_meta_int(k, "scratch_per_thread", slice);
  if (note) {
    cuda_meta_str(k, "declined", cuda_fmt(b, "%s", note));
    cuda_comment(b, cuda_fmt(b, "generic loops: %s", note));
  }
  if (scratch)
    cuda_decl(b, "unsigned char *", "hp_scr", NULL,
              cuda_fmt(b, "hp_scratch + ((long)blockIdx.x * %d + threadIdx.x) * %" PRId64 "L", THREADS, slice));
  put_points(b, &nest, blocks);
  ut_str loc;
  ut_str_init(&loc);
  rc_nest_locals(&nest, scratch ? "hp_scr" : NULL, &loc);
  put_lines(b, loc.buf);
  bool oom = loc.oom;
  ut_str_free(&loc);
  if (oom) st = ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (!st) st = put_ast(&g, nest.tree);
  if (!st) cuda_close(b);
  ut_str_free(&g.text);
  rc_nest_free(&nest);
  if (!st) st = cuda_b_finish(b, k);
  if (st) return st;
  cuda_launch *l = cuda_launch_add(c, k, r);
  if (!l) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int s = 0; s < K->nreads + K->nwrites; s++) l->args[s] = cuda_arg_slot(c, r, s, 0, TINY_FP32);
  int np = K->nreads + K->nwrites;
  if (scratch) {
    l->args[np++] = (cuda_arg){CUDA_ARG_SCRATCH, -1, 0};
    if (blocks * THREADS * slice > c->scratch_bytes) c->scratch_bytes = blocks * THREADS * slice;
  }
  for (int i = 0; i < c->gen.n; i++) l->args[np++] = (cuda_arg){CUDA_ARG_SYM, i, 0};
  if (c->gen.n && !scratch) { /* the grid of the binding's points (a scratch slice per thread: the box's) */
    l->grid_div = THREADS, l->grid_lit = grid.grid_lit, l->ngrid_sym = grid.ngrid_sym;
    memcpy(l->grid_sym, grid.grid_sym, sizeof l->grid_sym);
  }
  l->note = note;
  return HARP_OK;
}
