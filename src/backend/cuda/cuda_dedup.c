/* cuda_dedup.c — the kernels of a model's GPU translation unit that are the
 * same code, compiled once.
 * Needs: common/kdedup.c (the normal form), cuda_print.c.  Gives: cuda_model_dedup.
 *
 * A model that repeats its layers gets, from region_cuda.c, one kernel per
 * region: twelve BERT layers give NVRTC twelve copies of each layer's
 * kernels, differing only in their names, their loop nests' local names and
 * which parameter holds which buffer.  This pass keeps the first kernel of
 * each kind in the module and points the launches of the others at it, so
 * every consumer of the launch list (the JIT in src/runtime/gpu.c, its CUDA
 * Graph capture, `harp compile` packages, the simulator tests) follows it.
 *
 * Two kernels are the same when
 *   - their bodies, as printed, have one normal form (cg_kform_make with
 *     the parameter names: comments, the kernel's name prefix and the local
 *     names do not count; parameters are renumbered by first use), and
 *   - everything a launch takes from the kernel is equal: kind, arch, grid,
 *     block, dynamic shared memory, launch bounds, persistent tile count, and
 *     per parameter (in first-use order) its kind, element type, dtype,
 *     alignment and tensor-map descriptor.
 * A repeat's arguments are then reordered into the kept kernel's parameter
 * order: the j-th parameter first used by one is the j-th of the other. */
#include <stdlib.h>
#include <string.h>

#include "backend/common/kdedup.h"
#include "backend/cuda/region_cuda.h"

/* What a launch takes from kernel k besides its code, parameters in the
 * normal form's order. */
static void launch_key(ut_str *o, const cuda_kernel *k, const cg_kform *f) {
  ut_str_printf(o, "%s %d grid %lld %lld %lld block %d %d %d smem %lld bounds %d tiles %lld params %d\n", k->kind,
                (int)k->arch, (long long)k->grid[0], (long long)k->grid[1], (long long)k->grid[2], k->block[0],
                k->block[1], k->block[2], (long long)k->smem_bytes, k->min_blocks, (long long)k->persistent_tiles,
                k->nparams);
  for (int j = 0; j < f->norder; j++) {
    const cuda_param *p = &k->params[f->order[j]];
    ut_str_printf(o, "%d %s %d align %d", (int)p->kind, p->ctype, (int)p->dtype, p->align);
    const cuda_tmap_desc *d = p->kind == CUDA_P_TMAP ? p->tmap : NULL;
    if (d) {
      ut_str_printf(o, " tmap %s %d %d %d", d->tensor ? d->tensor : "", (int)d->dtype, d->rank, d->swizzle);
      for (int r = 0; r < d->rank && r < CUDA_TMAP_MAX_RANK; r++)
        ut_str_printf(o, " %llu/%llu/%u", (unsigned long long)d->dims[r],
                      (unsigned long long)(r ? d->strides[r - 1] : 0), d->box[r]);
      for (int r = 0; r < d->rank && r < CUDA_TMAP_MAX_RANK; r++) /* a ShapeSet build's run-time sizes */
        for (int q = 0; q < 2; q++) {
          const cuda_rtsz *z = q ? (r ? &d->rt_strides[r - 1] : NULL) : &d->rt_dims[r];
          for (int u = 0; z && u < z->n; u++)
            ut_str_printf(o, "%s%c%d:%lld*sv%d", u ? "" : " rt", q ? 's' : 'd', r, (long long)z->lit, z->sym[u]);
        }
    }
    ut_str_putc(o, '\n');
  }
}

typedef struct kinfo {
  cg_kform form;
  char *key;
  int copy_of; /* the kept kernel with this code, or -1 */
} kinfo;

static harp_status describe(harp_error *e, const cuda_kernel *k, kinfo *ki) {
  const char *names[CUDA_MAX_PARAMS];
  for (int i = 0; i < k->nparams && i < CUDA_MAX_PARAMS; i++) names[i] = k->params[i].name;
  ut_str body;
  ut_str_init(&body);
  cuda_print_body(&body, k);
  harp_status st = body.oom ? ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory")
                          : cg_kform_make(body.buf ? body.buf : "", k->name, names, k->nparams, e, &ki->form);
  ut_str_free(&body);
  if (st) return st;
  ut_str key;
  ut_str_init(&key);
  launch_key(&key, k, &ki->form);
  if (key.oom) {
    ut_str_free(&key);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  ki->key = ut_str_take(&key);
  return ki->key ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
}

static bool same(const kinfo *a, const kinfo *b) {
  return a->form.norder == b->form.norder && cg_kform_same(&a->form, &b->form) && !strcmp(a->key, b->key);
}

static int index_of(const cuda_module *m, const cuda_kernel *k) {
  for (int i = 0; i < m->n; i++)
    if (m->k[i] == k) return i;
  return -1;
}

harp_status cuda_model_dedup(harp_error *e, cuda_model_tu *t) {
  cuda_module *m = t->mod;
  int n = m->n;
  kinfo *ki = ut_xcalloc((size_t)n + 1, sizeof *ki);
  if (!ki) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  harp_status st = HARP_OK;
  for (int i = 0; i < n && !st; i++) {
    ki[i].copy_of = -1;
    st = describe(e, m->k[i], &ki[i]);
    for (int j = 0; j < i && !st && ki[i].copy_of < 0; j++)
      if (ki[j].copy_of < 0 && same(&ki[j], &ki[i])) ki[i].copy_of = j;
  }
  for (int l = 0; l < t->nlaunch && !st; l++) {
    cuda_launch *L = &t->launch[l];
    int i = index_of(m, L->k);
    if (i < 0 || ki[i].copy_of < 0) continue;
    const kinfo *to = &ki[ki[i].copy_of], *from = &ki[i];
    if (L->nargs != from->form.norder) { /* every parameter has an argument (cuda_launch_add) */
      st = ut_fail(e, HARP_E_INTERNAL, L->k->name, "a launch of %d arguments for %d parameters", L->nargs,
                   from->form.norder);
      break;
    }
    cuda_arg args[CUDA_MAX_PARAMS];
    for (int j = 0; j < from->form.norder; j++) args[to->form.order[j]] = L->args[from->form.order[j]];
    memcpy(L->args, args, sizeof args[0] * (size_t)L->nargs);
    L->k = m->k[ki[i].copy_of];
  }
  if (!st) { /* the repeats leave the module (their IR stays in its arena) */
    int w = 0;
    for (int i = 0; i < n; i++)
      if (ki[i].copy_of < 0) m->k[w++] = m->k[i];
    m->n = w;
  }
  for (int i = 0; i < n; i++) {
    cg_kform_free(&ki[i].form);
    free(ki[i].key);
  }
  free(ki);
  return st;
}
