/* gpu_box.c — one GPU build for a ShapeSet box (issue 25; seed 000 §8):
 * the kernels of a session's cluster read the sizes of the box's symbols at
 * run time, so one NVRTC build and one device arena serve every binding in
 * it, and the cluster's CUDA Graph is updated in place with the binding's
 * sizes and grids.
 *
 * The box of a binding is its ShapeSet class (plan_shapeset_class): a
 * symbol at v in 3..2^k runs from 2^(k-1) + 1 to 2^k; one at 1 or 2 is
 * fixed.  Both corners are generated with the box's symbols as run-time
 * sizes (cuda_syms: the generic loop nests take them as parameters hp_sv<i>,
 * their grids computed from the binding at launch), the upper first: it
 * decides the regions and the plans (tiles, stages, template, split-K) by
 * the cost model at the box's largest sizes, and the lower replays them
 * (rt_compile_opts.replay_regions / replay_plans), so one decision serves
 * the box; a choice the lower corner's templates refuse makes its text
 * differ.  When the two translation units are the same text, with the same
 * launch list and Function, the upper corner's build serves the box (its
 * arena, the largest).
 * An SM90 GEMM's tensor maps are compared by their run-time formulas
 * (cuda_tmap_same): the runtime encodes them at each binding.
 * A derived symbol that reads a varying one (a strided pool's output
 * height (H + 1) floordiv 2) varies too: it joins the box's symbols
 * (cuda_syms_derived), its value at each binding the prepared graph's.
 * Where a kernel still prints a size (a conv's channels, split-K's
 * workspace over a varying inner batch), the corners differ
 * and the cluster falls back to one build per binding, the kernel that
 * differs named in `why` (as the CPU's sgen.c does).  Before that, the box
 * is compared once more with its symbols that are an input's or output's
 * innermost dimension pinned at the binding's value (retry_pinned: an
 * attention's head width, whose corner lo no template takes); such a box
 * serves the bindings at those values only (gpu_box_fits).  The symbols
 * the options hold fixed (rt_gpu_opts.fixed: a CNN's channels) are pinned
 * so from the start: the box varies over the others only.
 * A symbol the model's ops tie to others over the box (G = 2 H: an ADD of
 * an upsampled map and a lateral one) would put the lower corner at a
 * binding no model accepts: the session makes it a derived symbol of the
 * cluster's model first (gpu_box_ties, tiny_ties_text), and the box
 * leaves it out (free_symbols): its value follows the others'.
 * Needs: gpu.c (gpu_build_gen), plan (plan_shapeset_class), tiny.
 * Gives: gpu_box_decide, gpu_box_ties, gpu_box_fits, gpu_sym_fixed, gpu_box_free, gpu_prepare_at (gpu_int.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "gpu_int.h"
#include "harp/plan.h"
#include "util/util.h"

#define GPU_BOX_DERIVED 64 /* derived symbols that vary with a box, at most */

harp_status gpu_prepare_at(harp_error *e, const char *json, const char *const *names, const int64_t *vals, int n,
                              tiny_graph **g, tiny_symtab *t) {
  *g = NULL;
  tiny_symtab_init(t);
  t->sym_broadcasts = true; /* a ShapeSet's preparation (as sgen.c's): a POOL's window count named (tiny_dsym) */
  for (int i = 0; i < n; i++)
    if (tiny_symtab_set(e, t, names[i], vals[i])) return e->code;
  if (tiny_load_json(e, json, strlen(json), "<session>", g) || tiny_dsym_bind(e, *g, t) || tiny_prepare(e, *g, t, false))
    return e->code;
  return tiny_dsym_bind(e, *g, t); /* the ones the preparation named */
}

/* Whether kernels x and y take the same tensor maps (the sizes an SM90
 * template's maps hold are not in its source). */
static bool same_maps(const cuda_kernel *x, const cuda_kernel *y) {
  if (x->nparams != y->nparams) return false;
  for (int p = 0; p < x->nparams; p++) {
    const cuda_tmap_desc *a = x->params[p].tmap, *b = y->params[p].tmap;
    if (!a != !b || (a && !cuda_tmap_same(a, b))) return false; /* run-time dims and strides: their formulas */
  }
  return true;
}

/* Whether launches x and y size the same grid axis by the same tile counts. */
static bool same_tiles(const cuda_launch *x, const cuda_launch *y) {
  if (x->ngrid_tile != y->ngrid_tile || x->grid_axis != y->grid_axis) return false;
  for (int j = 0; j < x->ngrid_tile && j < 3; j++) {
    const cuda_rtsz *a = &x->grid_tile[j], *b = &y->grid_tile[j];
    if (a->lit != b->lit || a->n != b->n || memcmp(a->sym, b->sym, sizeof a->sym[0] * (size_t)a->n) ||
        x->grid_tile_add[j] != y->grid_tile_add[j] || x->grid_tile_per[j] != y->grid_tile_per[j])
      return false;
  }
  return true;
}

/* Whether launch lists a and b are the same up to the arena's layout: the
 * same kernels, arguments (a buffer, its offset inside it), grids or grid
 * formulas, blocks, tensor maps. */
static bool same_launches(const cuda_model_tu *a, const cuda_model_tu *b) {
  if (a->nlaunch != b->nlaunch || a->f->nbuffers != b->f->nbuffers || a->f->nargs != b->f->nargs ||
      a->f->nret != b->f->nret || a->scratch_bytes > b->scratch_bytes || a->packed_bytes != b->packed_bytes)
    return false;
  for (int i = 0; i < a->f->nbuffers; i++)
    if (a->f->buffers[i].kind != b->f->buffers[i].kind || a->f->buffers[i].node != b->f->buffers[i].node ||
        a->f->buffers[i].dtype != b->f->buffers[i].dtype)
      return false;
  for (int i = 0; i < a->nlaunch; i++) {
    const cuda_launch *x = &a->launch[i], *y = &b->launch[i];
    if (strcmp(x->k->name, y->k->name) || x->nargs != y->nargs || x->once != y->once || x->grid_div != y->grid_div ||
        x->grid_lit != y->grid_lit || x->ngrid_sym != y->ngrid_sym ||
        memcmp(x->grid_sym, y->grid_sym, sizeof x->grid_sym[0] * (size_t)x->ngrid_sym) ||
        memcmp(x->k->grid, y->k->grid, sizeof x->k->grid) || memcmp(x->k->block, y->k->block, sizeof x->k->block) ||
        x->k->smem_bytes != y->k->smem_bytes || !same_maps(x->k, y->k) || !same_tiles(x, y))
      return false;
    for (int p = 0; p < x->nargs; p++)
      if (x->args[p].kind != y->args[p].kind || x->args[p].buffer != y->args[p].buffer || x->args[p].offset != y->args[p].offset)
        return false;
  }
  return true;
}

/* The next kernel's header after p in a unit's source (NULL: none). */
static const char *next_kernel(const char *p) { return p ? strstr(p + 1, "\n/* kernel ") : NULL; }

/* Why sources a and b (the two corners) differ: the first kernel whose
 * code differs (a difference in the prelude, e.g. an MMA helper, is that
 * of the kernel that calls it) and its first differing line, into
 * why[cap]; the prelude when no kernel differs. */
static void differing_kernel(const char *a, const char *b, char *why, size_t cap) {
  const char *ka = strstr(a, "\n/* kernel "), *kb = strstr(b, "\n/* kernel "), *xa = a, *xb = b;
  const char *k = NULL;
  for (; ka && kb && !k; ka = next_kernel(ka), kb = next_kernel(kb)) {
    const char *na = next_kernel(ka), *nb = next_kernel(kb);
    size_t la = na ? (size_t)(na - ka) : strlen(ka), lb = nb ? (size_t)(nb - kb) : strlen(kb);
    if (la != lb || memcmp(ka, kb, la)) k = ka + 11, xa = ka, xb = kb;
  }
  if (!k && (ka || kb)) {
    snprintf(why, cap, "the kernels depend on the binding: the corners generate %s kernels", ka ? "fewer" : "more");
    return;
  }
  size_t at = 0;
  while (xa[at] && xa[at] == xb[at]) at++;
  const char *line = xa + at;
  while (line > a && line[-1] != '\n') line--;
  int len = (int)strcspn(line, "\n");
  int klen = k ? (int)strcspn(k, ":") : 0;
  snprintf(why, cap, "the code of %.*s depends on the binding: `%.*s`", k ? (klen > 80 ? 80 : klen) : 11,
           k ? k : "the prelude", len > 100 ? 100 : len, line);
}

/* The derived symbols of b's graph (prepared at the corner hi) that read
 * the box's varying symbols join b->gen (cuda_syms_derived), copied into
 * b's arena. */
static harp_status derived_gens(harp_error *e, gpu_box *b) {
  int n = b->gen.n;
  if (cuda_syms_derived(e, b->g, &b->syms, b->names, b->hi, n, n + GPU_BOX_DERIVED, &b->gen.n)) return e->code;
  for (int i = n; i < b->gen.n; i++)
    if (!(b->names[i] = ut_arena_strdup(b->arena, b->names[i]))) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  return HARP_OK;
}

/* The box's corners lo and hi generated, hi first: it decides the regions
 * and plans (the cost model at the box's largest sizes), and lo replays them
 * (a choice taken at every binding alike); b->m the upper's build when the
 * two agree, else b->why says why not.  Errors of a corner are reasons. */
static harp_status compare_corners(harp_error *e, gpu_box *b, const char *json, const char *const *names,
                                   const int64_t *lo, const int64_t *hi, int n, const rt_gpu_opts *o, cuda_rt *rt) {
  tiny_graph *glo = NULL;
  tiny_symtab slo;
  tiny_symtab_init(&slo);
  rt_gpu_model *mlo = NULL, *mhi = NULL;
  harp_error ce = {0};
  harp_status st = HARP_OK;
  const char *which = "upper";
  bool ok = !gpu_prepare_at(&ce, json, names, hi, n, &b->g, &b->syms) && !derived_gens(&ce, b) &&
            !gpu_build_gen(&ce, b->g, &b->syms, o, rt, &b->gen, NULL, &mhi);
  if (ok) which = "lower";
  ok = ok && !gpu_prepare_at(&ce, json, names, lo, n, &glo, &slo) && !gpu_build_gen(&ce, glo, &slo, o, rt, &b->gen, mhi->comp, &mlo);
  if (!ok && ce.code == HARP_E_NO_MEMORY) {
    st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  } else if (!ok) {
    snprintf(b->why, sizeof b->why, "the box's %s corner does not build%s: %.60s%s%.300s", which,
             mhi ? " with the upper's regions and plans" : "", ce.node, ce.node[0] ? ": " : "", ce.msg);
  } else if (strcmp(mlo->source, mhi->source)) {
    differing_kernel(mhi->source, mlo->source, b->why, sizeof b->why);
  } else if (!same_launches(mlo->tu, mhi->tu)) {
    snprintf(b->why, sizeof b->why, "the launch list (grids, arguments) depends on the binding");
  } else {
    b->m = mhi, mhi = NULL;
  }
  rt_gpu_free(mlo);
  rt_gpu_free(mhi);
  tiny_graph_free(glo);
  tiny_symtab_free(&slo);
  return st;
}

/* Box b's varying symbols: the binding's symbols i (names) with lo[i] <
 * hi[i], at their hi, into b->gen (copies in b's arena). */
static harp_status box_gens(harp_error *e, gpu_box *b, const char *const *names, const int64_t *lo, const int64_t *hi, int n) {
  b->gen.n = 0;
  for (int i = 0; i < n; i++) {
    if (lo[i] == hi[i]) continue;
    if (!(b->names[b->gen.n] = ut_arena_strdup(b->arena, names[i]))) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    b->hi[b->gen.n++] = hi[i];
  }
  b->gen.names = (const char *const *)b->names, b->gen.hi = b->hi;
  return HARP_OK;
}

/* Whether symbol name is the innermost (last) dimension of an input or an
 * output of g: a head or channel width a template takes whole (its
 * alignment, its register tiles), which a corner lo = hi / 2 + 1 breaks. */
static bool innermost_of_io(const tiny_graph *g, const char *name) {
  for (int i = 0; g && i < g->n; i++) {
    const tiny_node *x = &g->nodes[i];
    bool io = x->op == TINY_INPUT;
    for (int k = 0; !io && k < g->noutputs; k++) io = g->outputs[k] == i;
    const char *sym = io && x->shape.rank ? x->shape.d[x->shape.rank - 1].sym : NULL;
    if (sym && !strcmp(sym, name)) return true;
  }
  return false;
}

/* When box b's corners differ: pin (lo = hi = the binding's value) its
 * varying symbols that are an input's or output's innermost dimension
 * (innermost_of_io, b->g the upper corner's graph) and compare again; the
 * box then serves the bindings with those values only (gpu_box_fits).  The
 * first attempt's reason stays when the second fails too. */
static harp_status retry_pinned(harp_error *e, gpu_box *b, const char *json, const tiny_symtab *binding, int64_t *lo, int64_t *hi,
                                const rt_gpu_opts *o, cuda_rt *rt) {
  int n = binding->n, pinned = 0;
  for (int i = 0; i < n; i++)
    if (lo[i] != hi[i] && innermost_of_io(b->g, binding->names[i])) lo[i] = hi[i] = binding->values[i], pinned++;
  if (!pinned || pinned == b->gen.n) return HARP_OK; /* nothing to pin, or nothing left to vary */
  char why[sizeof b->why];
  memcpy(why, b->why, sizeof why);
  tiny_graph_free(b->g);
  b->g = NULL;
  tiny_symtab_free(&b->syms);
  tiny_symtab_init(&b->syms);
  harp_status st = box_gens(e, b, (const char *const *)binding->names, lo, hi, n);
  if (!st) st = compare_corners(e, b, json, (const char *const *)binding->names, lo, hi, n, o, rt);
  if (!st && !b->m) memcpy(b->why, why, sizeof why);
  else if (!st) b->why[0] = '\0';
  return st;
}

bool gpu_sym_fixed(const rt_gpu_opts *o, const char *name) {
  for (int i = 0; o && i < o->nfixed; i++)
    if (o->fixed[i] && !strcmp(o->fixed[i], name)) return true;
  return false;
}

/* The ShapeSet class box of value v: (2^(k-1), 2^k] from 3 on; 1 and 2 alone. */
static void class_box(int64_t v, int64_t *lo, int64_t *hi) {
  *hi = plan_shapeset_class(v);
  *lo = *hi > 2 ? *hi / 2 + 1 : *hi;
}

harp_status gpu_box_ties(harp_error *e, const char *json, const tiny_symtab *binding, char **out, char *said, size_t cap) {
  *out = NULL;
  int64_t *lo = ut_xcalloc((size_t)binding->n + 1, sizeof *lo), *hi = ut_xcalloc((size_t)binding->n + 1, sizeof *hi);
  harp_status st = !lo || !hi ? ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory") : HARP_OK;
  for (int i = 0; !st && i < binding->n; i++) class_box(binding->values[i], &lo[i], &hi[i]);
  if (!st) st = tiny_ties_text(e, json, (const char *const *)binding->names, lo, hi, binding->n, out, said, cap);
  free(lo), free(hi);
  return st;
}

/* binding's symbols but those json's model defines (a tie, G := 2*H: its
 * value follows the others) into *own (tiny_ties_drop). */
static harp_status free_symbols(harp_error *e, const char *json, const tiny_symtab *binding, tiny_symtab *own) {
  tiny_graph *g = NULL;
  if (tiny_load_json(e, json, strlen(json), "<session>", &g)) return e->code;
  harp_status st = tiny_ties_drop(e, g, binding, own);
  tiny_graph_free(g);
  return st;
}

static harp_status box_decide(harp_error *e, const char *json, const tiny_symtab *binding, const rt_gpu_opts *o, cuda_rt *rt,
                              gpu_box **out);

harp_status gpu_box_decide(harp_error *e, const char *json, const tiny_symtab *given, const rt_gpu_opts *o, cuda_rt *rt,
                           gpu_box **out) {
  *out = NULL;
  tiny_symtab own;
  if (free_symbols(e, json, given, &own)) return e->code;
  harp_status st = box_decide(e, json, &own, o, rt, out);
  tiny_symtab_free(&own);
  return st;
}

/* lo, hi narrowed to the bindings json's exact ties accept (2 G = 3 H:
 * H's corners even; tiny_dsym_snap). */
static harp_status snap_box(harp_error *e, const char *json, const tiny_symtab *binding, int64_t *lo, int64_t *hi) {
  tiny_graph *g = NULL;
  if (!strstr(json, "\"exact\"")) return HARP_OK;
  if (tiny_load_json(e, json, strlen(json), "<session>", &g)) return e->code;
  tiny_dsym_snap(g, (const char *const *)binding->names, lo, hi, binding->n);
  tiny_graph_free(g);
  return HARP_OK;
}

/* gpu_box_decide over binding, every symbol of it free. */
static harp_status box_decide(harp_error *e, const char *json, const tiny_symtab *binding, const rt_gpu_opts *o, cuda_rt *rt,
                              gpu_box **out) {
  int n = binding->n;
  gpu_box *b = ut_xcalloc(1, sizeof *b);
  if (!b) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  int64_t *lo = ut_xcalloc((size_t)n + 1, sizeof *lo), *hi = ut_xcalloc((size_t)n + 1, sizeof *hi);
  b->names = ut_xcalloc((size_t)n + GPU_BOX_DERIVED + 1, sizeof *b->names);
  b->arena = ut_arena_new();
  b->hi = ut_xcalloc((size_t)n + GPU_BOX_DERIVED + 1, sizeof *b->hi);
  tiny_symtab_init(&b->syms);
  if (!lo || !hi || !b->names || !b->hi || !b->arena) {
    free(lo), free(hi);
    gpu_box_free(b);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  for (int i = 0; i < n; i++) { /* a fixed symbol its value */
    if (gpu_sym_fixed(o, binding->names[i])) lo[i] = hi[i] = binding->values[i];
    else class_box(binding->values[i], &lo[i], &hi[i]);
  }
  harp_status st = snap_box(e, json, binding, lo, hi);
  if (!st) st = box_gens(e, b, (const char *const *)binding->names, lo, hi, n);
  if (!st && o && o->per_binding) snprintf(b->why, sizeof b->why, "per-binding builds were asked for");
  else if (!st && !b->gen.n) snprintf(b->why, sizeof b->why, "the ShapeSet holds this binding alone");
  else if (!st) st = compare_corners(e, b, json, (const char *const *)binding->names, lo, hi, n, o, rt);
  if (!st && !b->m && b->gen.n && !(o && o->per_binding)) st = retry_pinned(e, b, json, binding, lo, hi, o, rt);
  free(lo), free(hi);
  if (st) {
    gpu_box_free(b);
    return st;
  }
  *out = b;
  return HARP_OK;
}

bool gpu_box_fits(const gpu_box *b, const tiny_graph *g, const tiny_symtab *binding, int64_t *sv) {
  const tiny_graph *h = b->m ? b->g : NULL;
  if (!h || h->n != g->n || h->noutputs != g->noutputs) return false;
  for (int i = 0; i < h->noutputs; i++)
    if (h->outputs[i] != g->outputs[i]) return false;
  for (int i = 0; i < h->n; i++) { /* node for node the box's graph, no size past its corner hi */
    const tiny_node *x = &h->nodes[i], *y = &g->nodes[i];
    if (x->op != y->op || x->dtype != y->dtype || x->nsrc != y->nsrc || x->shape.rank != y->shape.rank) return false;
    for (int k = 0; k < x->nsrc; k++)
      if (x->src[k].node != y->src[k].node) return false;
    for (int d = 0; d < x->shape.rank; d++)
      if (y->shape.d[d].n > x->shape.d[d].n) return false;
  }
  for (int i = 0; i < b->gen.n; i++) {
    int64_t v = 0;
    if (!tiny_symtab_get(binding, b->gen.names[i], &v) || v < 1 || v > b->gen.hi[i]) return false;
    sv[i] = v;
  }
  for (int i = 0; i < b->syms.n; i++) { /* every other symbol (one retry_pinned pinned) at the box's value */
    int64_t v = 0;
    bool varies = false;
    for (int k = 0; k < b->gen.n && !varies; k++) varies = !strcmp(b->gen.names[k], b->syms.names[i]);
    if (!varies && tiny_symtab_get(binding, b->syms.names[i], &v) && v != b->syms.values[i]) return false;
  }
  return true;
}

void gpu_box_free(gpu_box *b) {
  if (!b) return;
  rt_gpu_free(b->m);
  tiny_graph_free(b->g);
  tiny_symtab_free(&b->syms);
  free(b->names);
  free(b->hi);
  ut_arena_free(b->arena);
  free(b);
}
