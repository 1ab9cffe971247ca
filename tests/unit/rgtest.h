/* rgtest.h — helpers for the region formation tests: load a model, form
 * regions on a machine, find regions, play the Function back against the
 * interpreter, read the region dump. */
#ifndef HARP_RGTEST_H
#define HARP_RGTEST_H

#include <jansson.h>
#include <math.h>

#include "harp/function.h"
#include "harp/region.h"
#include "testutil.h"
#include "util/util.h"

typedef struct rgt {
  harp_error e;
  tiny_graph *g;
  tiny_symtab syms;
  plan_machine m;
  rg_partition *p;
} rgt;

/* syms: NULL-terminated "NAME=V"; file relative to tests/models, or JSON text starting with '{'. */
static inline void rgt_load(rgt *t, const char *file, const char *const *syms) {
  memset(t, 0, sizeof *t);
  tiny_symtab_init(&t->syms);
  if (file[0] == '{') {
    assert_ok(&t->e, tiny_load_json(&t->e, file, strlen(file), "test.json", &t->g));
  } else {
    char path[1024];
    const char *root = getenv("HARP_SOURCE_DIR");
    if ((size_t)snprintf(path, sizeof path, "%s/tests/models/%s", root ? root : HARP_SOURCE_DIR, file) >= sizeof path)
      fail_msg("the model path under %s is over %zu bytes", root ? root : HARP_SOURCE_DIR, sizeof path - 1);
    assert_ok(&t->e, tiny_load_file(&t->e, path, &t->g));
  }
  for (int i = 0; syms && syms[i]; i++) assert_ok(&t->e, tiny_symtab_parse_assign(&t->e, &t->syms, syms[i]));
  assert_ok(&t->e, tiny_prepare(&t->e, t->g, &t->syms, false));
}

static inline void rgt_form_opt(rgt *t, plan_arch arch, const rg_options *o) {
  plan_machine_get(arch, &t->m);
  rg_options opt = o ? *o : (rg_options){0};
  opt.machine = &t->m;
  rg_partition_free(t->p);
  t->p = NULL;
  assert_ok(&t->e, rg_form(&t->e, t->g, &t->syms, &opt, &t->p));
  assert_ok(&t->e, rg_partition_check(&t->e, t->p));
}

static inline void rgt_form(rgt *t, plan_arch arch) { rgt_form_opt(t, arch, NULL); }

static inline void rgt_free(rgt *t) {
  rg_partition_free(t->p);
  tiny_graph_free(t->g);
  tiny_symtab_free(&t->syms);
  memset(t, 0, sizeof *t);
}

/* The region computing node `id`. */
static inline const rg_region *rgt_region_of(const rgt *t, const char *id) {
  int n = tiny_find(t->g, id);
  for (int i = 0; i < t->g->n && n < 0; i++) /* or a tag */
    if (t->g->nodes[i].tag && !strcmp(t->g->nodes[i].tag, id)) n = i;
  if (n < 0) fail_msg("no node %s", id);
  int r = t->p->region_of[n];
  if (r < 0) fail_msg("node %s is in no region", id);
  return &t->p->regions[r];
}

static inline const char *rgt_block(const rgt *t, int b) { return poly_block(t->p->formed->pv, b)->name; }

/* "a b c": the region's blocks by name. */
static inline void rgt_expect_blocks(const rgt *t, const rg_region *R, const char *want) {
  char buf[1024] = "";
  for (int i = 0; i < R->info->nblocks; i++)
    snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", i ? " " : "", rgt_block(t, R->info->blocks[i]));
  if (strcmp(buf, want)) fail_msg("region %s has blocks '%s', want '%s'", R->name, buf, want);
}

/* The stop recorded for candidate `cand` in region R, or NULL. */
static inline const rg_stop *rgt_stop(const rg_region *R, const char *cand) {
  for (int i = 0; i < R->info->nstops; i++)
    if (!strcmp(R->info->stops[i].candidate, cand)) return &R->info->stops[i];
  return NULL;
}

static inline void rgt_expect_stop(const rg_region *R, const char *cand, const char *reason) {
  const rg_stop *s = rgt_stop(R, cand);
  if (!s) fail_msg("region %s records no stop for %s", R->name, cand);
  if (strcmp(s->reason, reason)) fail_msg("region %s stops at %s for %s (%s), want %s", R->name, cand, s->reason, s->detail, reason);
}

/* Play f back on pseudo-random inputs (tu_random_inputs(g, seed, 1)) and
 * compare every output with whole-graph interpretation under syms: bit for
 * bit when bitwise, else within 1e-3 + 1e-3 |want| (a NaN matches only a
 * NaN).  test_function.c shares it. */
static inline void rgt_playback_check(const tiny_graph *g, const tiny_symtab *syms, const fn_function *f, unsigned seed,
                                      bool bitwise) {
  harp_error e = {0};
  int n;
  ut_tensor *in = tu_random_inputs(g, &n, seed, 1.0f);
  ut_tensor *want = calloc((size_t)g->noutputs, sizeof *want), *got = calloc((size_t)g->noutputs, sizeof *got);
  assert_ok(&e, tiny_interp(&e, g, syms, in, n, want));
  assert_ok(&e, fn_playback(&e, f, syms, in, n, got));
  for (int k = 0; k < g->noutputs; k++) {
    assert_int_equal(got[k].nbytes, want[k].nbytes);
    if (bitwise) {
      if (memcmp(got[k].data, want[k].data, want[k].nbytes)) fail_msg("output %d differs from the interpreter", k);
    } else {
      for (int64_t i = 0; i < ut_tensor_numel(&want[k]); i++) {
        float a = ut_tensor_get(&got[k], i), b = ut_tensor_get(&want[k], i);
        if (!(fabsf(a - b) <= 1e-3f + 1e-3f * fabsf(b)) && !(isnan(a) && isnan(b)))
          fail_msg("output %d element %lld: %g vs %g", k, (long long)i, a, b);
      }
    }
    ut_tensor_free(&got[k]);
    ut_tensor_free(&want[k]);
  }
  for (int k = 0; k < n; k++) ut_tensor_free(&in[k]);
  free(in);
  free(got);
  free(want);
}

/* Build the Function and play it back; compare with whole-graph
 * interpretation (bit for bit when bitwise).  Returns the Function's arena size. */
static inline size_t rgt_playback(rgt *t, bool bitwise) {
  fn_function *f;
  assert_ok(&t->e, fn_build(&t->e, t->p, "main", &f));
  assert_ok(&t->e, fn_check(&t->e, f));
  assert_true(f->required_memory >= fn_peak_live_bytes(f));
  rgt_playback_check(t->g, &t->syms, f, 7, bitwise);
  size_t mem = f->required_memory;
  fn_free(f);
  return mem;
}

/* The region dump, parsed. */
static inline json_t *rgt_dump(rgt *t) {
  char *s;
  assert_ok(&t->e, rg_dump_json(&t->e, t->p, &s));
  json_error_t je;
  json_t *j = json_loads(s, 0, &je);
  free(s);
  if (!j) fail_msg("region dump is not JSON: %s", je.text);
  return j;
}

static inline json_t *rgt_dump_region(json_t *dump, const char *name) {
  json_t *rs = json_object_get(dump, "regions");
  for (size_t i = 0; i < json_array_size(rs); i++) {
    json_t *r = json_array_get(rs, i);
    if (!strcmp(json_string_value(json_object_get(r, "name")), name)) return r;
  }
  fail_msg("no region %s in the dump", name);
  return NULL;
}

#endif
