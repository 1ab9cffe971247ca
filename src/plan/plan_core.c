/* plan_core.c — the plan's vocabularies, defaults, equality and its
 * self-consistency check (the invariants of plan_t in harp/plan.h).
 * Needs: harp/plan.h.  Gives: name tables, plan_init, plan_equal,
 * plan_canonical_order, plan_finish, plan_check, plan_fail. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_int.h"
#include "util/util.h"

/* ---- vocabularies ------------------------------------------------------------- */
static const char *const arch_names[] = {"sm80", "sm90", "cpu"};
static const char *const target_names[] = {
#define PLAN_X_NAME(e, s) s,
    PLAN_TARGETS(PLAN_X_NAME)
#undef PLAN_X_NAME
};
static const char *const epi_names[] = {
#define PLAN_X_NAME(e, s) s,
    PLAN_EPILOGUES(PLAN_X_NAME)
#undef PLAN_X_NAME
};
static const char *const key_names[] = {"matmul", "conv", "attention"};
static const char *const algo_names[] = {
#define PLAN_X_NAME(e, s, m) s,
    PLAN_ALGOS(PLAN_X_NAME)
#undef PLAN_X_NAME
};
static const unsigned algo_masks[] = {
#define PLAN_X_MASK(e, s, m) (m),
    PLAN_ALGOS(PLAN_X_MASK)
#undef PLAN_X_MASK
};
static const char *const buffer_names[] = {"reg", "smem_ring", "gmem"};
static const char *const pattern_names[] = {"ewise", "reduce", "matmul", "conv", "attention"};

static int lookup(const char *const *names, int n, const char *s) {
  if (!s) return -1;
  for (int i = 0; i < n; i++)
    if (names[i][0] && strcmp(names[i], s) == 0) return i;
  return -1;
}
#define NAME_OF(tab, i) ((unsigned)(i) < (unsigned)UT_ARRAY_LEN(tab) ? tab[i] : "?")

const char *plan_arch_name(plan_arch a) { return NAME_OF(arch_names, a); }
int plan_arch_parse(const char *s) { return lookup(arch_names, UT_ARRAY_LEN(arch_names), s); }
const char *plan_target_name(plan_target t) { return NAME_OF(target_names, t); }
int plan_target_parse(const char *s) { return lookup(target_names, UT_ARRAY_LEN(target_names), s); }
const char *plan_epi_name(plan_epi op) { return NAME_OF(epi_names, op); }
int plan_epi_parse(const char *s) { return lookup(epi_names, UT_ARRAY_LEN(epi_names), s); }
const char *plan_algo_key_name(plan_algo_key k) { return NAME_OF(key_names, k); }
int plan_algo_key_parse(const char *s) { return lookup(key_names, UT_ARRAY_LEN(key_names), s); }
const char *plan_algo_name(plan_algo a) { return NAME_OF(algo_names, a); }
int plan_algo_parse(const char *s) { return lookup(algo_names, UT_ARRAY_LEN(algo_names), s); }

const char *plan_algo_absent(const char *s) {
  if (s && !strcmp(s, "fft_conv"))
    return "fft_conv is not an algorithm of harp: no target has an FFT convolution (3x3 windows: winograd_3x3; "
           "others: implicit_gemm; docs/plan.md)";
  return NULL;
}
bool plan_algo_fits(plan_algo a, plan_algo_key k) {
  return (unsigned)a < PLAN_ALGO_COUNT && (unsigned)k < PLAN_KEY_COUNT && (algo_masks[a] >> k & 1u);
}
const char *plan_buffer_name(plan_buffer b) { return NAME_OF(buffer_names, b); }
int plan_buffer_parse(const char *s) { return lookup(buffer_names, UT_ARRAY_LEN(buffer_names), s); }
const char *plan_pattern_name(plan_pattern p) { return NAME_OF(pattern_names, p); }
int plan_pattern_parse(const char *s) { return lookup(pattern_names, UT_ARRAY_LEN(pattern_names), s); }

/* ---- errors -------------------------------------------------------------------- */
harp_status plan_fail(harp_error *e, harp_status code, const plan_src *src, plan_pos pos, const char *node,
                    const char *fmt, ...) {
  if (!e) return code;
  if (e->code != HARP_OK) return e->code;
  va_list ap;
  va_start(ap, fmt);
  ut_vfail(e, code, node, fmt, ap);
  va_end(ap);
  const char *file = src && src->file ? src->file : NULL;
  if (pos.line > 0) {
    snprintf(e->file, sizeof e->file, "%s", file ? file : "<plan>");
    e->line = pos.line;
    e->col = pos.col;
    if (src && src->text) ut_error_set_snippet(e, src->text, pos.line, pos.col);
  } else if (file) {
    snprintf(e->file, sizeof e->file, "%s", file);
  }
  return code;
}

/* ---- names --------------------------------------------------------------------- */
bool plan_copy_name(char *dst, const char *src) {
  size_t n = strlen(src);
  if (n >= PLAN_NAME_MAX) return false;
  memcpy(dst, src, n + 1);
  return true;
}

static bool word_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

bool plan_axis_name_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n >= PLAN_NAME_MAX) return false;
  if (!(isalpha((unsigned char)s[0]) || s[0] == '_')) return false;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '.') {
      if (i + 1 == n || s[i + 1] == '.') return false;
    } else if (!word_char(s[i])) {
      return false;
    }
  }
  return true;
}

bool plan_ident_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n >= PLAN_NAME_MAX || s[0] == '.') return false;
  for (size_t i = 0; i < n; i++)
    if (!word_char(s[i]) && s[i] != '.') return false;
  return true;
}

const char *plan_axis_base(const char *axis, char *buf) {
  size_t n = strcspn(axis, ".");
  if (n >= PLAN_NAME_MAX) n = PLAN_NAME_MAX - 1;
  memcpy(buf, axis, n);
  buf[n] = 0;
  return buf;
}

int plan_tile_index_of(const plan_t *p, const char *axis) {
  char b[PLAN_NAME_MAX];
  plan_axis_base(axis, b);
  for (int i = 0; i < p->ntile; i++)
    if (strcmp(p->tile_axes[i], b) == 0) return i;
  return -1;
}

void plan_default_pipeline_axis(const plan_t *p, char *out) {
  out[0] = 0;
  if (p->ntile > 0) snprintf(out, PLAN_NAME_MAX, "%.*s.i", PLAN_NAME_MAX - 3, p->tile_axes[p->ntile - 1]);
}

int64_t plan_gcd(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* ---- init, defaults, equality -------------------------------------------------------- */
void plan_default_layout(plan_arch arch, bool *a_swizzle, bool *b_swizzle, bool *c_col) {
  /* Swizzled SMEM is fixed by the GPU template (§5 "スウィズル固定"); the CPU
   * packs panels instead, so swizzling means nothing there. */
  *a_swizzle = *b_swizzle = plan_arch_is_gpu(arch);
  *c_col = false;
}

void plan_init(plan_t *p, plan_arch arch) {
  memset(p, 0, sizeof *p);
  p->arch = arch;
  p->stages = 2;
  plan_default_layout(arch, &p->a_swizzle, &p->b_swizzle, &p->c_col);
}

int plan_canonical_order(const plan_t *p, char out[][PLAN_NAME_MAX], int cap) {
  static const char *const suffix[] = {".o", ".i.o", ".i.i"};
  int n = 0;
  for (int s = 0; s < 3; s++)
    for (int i = 0; i < p->ntile && n < cap; i++)
      snprintf(out[n++], PLAN_NAME_MAX, "%.*s%s", PLAN_NAME_MAX - 5, p->tile_axes[i], suffix[s]);
  return n;
}

void plan_finish(plan_t *p, const plan_seen *seen, plan_arch default_arch) {
  if (!seen->arch) p->arch = default_arch;
  bool as, bs, cc;
  plan_default_layout(p->arch, &as, &bs, &cc);
  if (!seen->a_swizzle) p->a_swizzle = as;
  if (!seen->b_swizzle) p->b_swizzle = bs;
  if (!seen->c_stride) p->c_col = cc;
  if (!seen->stages) p->stages = 2;
  if (p->ntile > 0) {
    /* GPU: 64x64 warp tiles (§1.7, §7.1); SM90: a warpgroup covers 64 rows
     * and up to 256 columns.  CPU: a 4x16 micro-tile fits AVX2 and AVX-512.
     * gcd keeps the default a divisor of the tile. */
    int64_t cm = 64, cn = 64;
    if (p->arch == PLAN_ARCH_SM90) cn = 256;
    if (p->arch == PLAN_ARCH_CPU) cm = 4, cn = 16;
    if (p->warp_m == 0) p->warp_m = (int)plan_gcd(p->tile[0], cm);
    if (p->warp_n == 0 && p->ntile >= 2) p->warp_n = (int)plan_gcd(p->tile[1], cn);
  }
  if (!seen->pipeline) plan_default_pipeline_axis(p, p->pipeline_axis);
  if (p->nreorder > 0) {
    char canon[PLAN_MAX_AXLIST][PLAN_NAME_MAX];
    int nc = plan_canonical_order(p, canon, PLAN_MAX_AXLIST);
    bool same = nc == p->nreorder;
    for (int i = 0; same && i < nc; i++) same = strcmp(canon[i], p->reorder[i]) == 0;
    if (same) p->nreorder = 0;
  }
}

#define EQ(f) (a->f == b->f)
#define SEQ(f) (strcmp(a->f, b->f) == 0)
bool plan_equal(const plan_t *a, const plan_t *b) {
  if (!EQ(ntile) || !EQ(stages) || !SEQ(pipeline_axis) || !EQ(nbind) || !EQ(warp_m) || !EQ(warp_n) ||
      !EQ(ncache) || !EQ(vec_width) || !EQ(npred) || !EQ(nepi) || !EQ(arch) || !EQ(a_swizzle) ||
      !EQ(b_swizzle) || !EQ(c_col) || !EQ(nedges) || !EQ(nreorder) || !EQ(nsplits) || !EQ(nfuse) ||
      !EQ(nunroll) || !EQ(splitk))
    return false;
  for (int i = 0; i < a->ntile; i++)
    if (!SEQ(tile_axes[i]) || !EQ(tile[i])) return false;
  for (int i = 0; i < a->nbind; i++)
    if (!SEQ(bind[i].axis) || !EQ(bind[i].target)) return false;
  for (int i = 0; i < a->ncache; i++)
    if (!SEQ(cache[i].tensor) || !SEQ(cache[i].at) || !EQ(cache[i].pingpong)) return false;
  if (a->vec_width && !SEQ(vec_axis)) return false;
  for (int i = 0; i < a->npred; i++)
    if (!SEQ(pred[i])) return false;
  for (int i = 0; i < a->nepi; i++)
    if (!EQ(epi[i])) return false;
  for (int i = 0; i < PLAN_KEY_COUNT; i++)
    if (!EQ(algo[i])) return false;
  for (int i = 0; i < a->nedges; i++)
    if (!SEQ(edges[i].from) || !SEQ(edges[i].to) || !EQ(edges[i].buffer) || !EQ(edges[i].depth)) return false;
  for (int i = 0; i < a->nreorder; i++)
    if (!SEQ(reorder[i])) return false;
  for (int i = 0; i < a->nsplits; i++)
    if (!SEQ(splits[i].axis) || !EQ(splits[i].factor)) return false;
  for (int i = 0; i < a->nfuse; i++)
    if (!SEQ(fuse[i].a) || !SEQ(fuse[i].b) || !SEQ(fuse[i].to)) return false;
  for (int i = 0; i < a->nunroll; i++)
    if (!SEQ(unroll[i].axis) || !EQ(unroll[i].factor)) return false;
  return true;
}
#undef EQ
#undef SEQ

/* ---- plan_check: the invariants of plan_t ---------------------------------------- */
/* The axes a plan defines: tile subtrees, split children and fuse outputs. */
typedef struct axset {
  int n;
  char name[64][PLAN_NAME_MAX];
} axset;

static bool ax_has(const axset *s, const char *a) {
  for (int i = 0; i < s->n; i++)
    if (strcmp(s->name[i], a) == 0) return true;
  return false;
}
static void ax_add(axset *s, const char *a) {
  if (s->n >= UT_ARRAY_LEN(s->name) || ax_has(s, a)) return;
  size_t l = strnlen(a, PLAN_NAME_MAX - 1); /* snprintf's truncation, without its cost (every candidate plan) */
  memcpy(s->name[s->n], a, l);
  s->name[s->n++][l] = 0;
}
static bool child_name(char *out, const char *parent, const char *suffix) {
  size_t a = strlen(parent), b = strlen(suffix);
  out[0] = 0;
  if (a + b >= PLAN_NAME_MAX) return false;
  memcpy(out, parent, a);
  memcpy(out + a, suffix, b + 1);
  return true;
}
static bool is_split_base(const plan_t *p, const char *a) {
  for (int i = 0; i < p->ntile; i++)
    if (strcmp(p->tile_axes[i], a) == 0) return true;
  return false;
}

typedef struct checker {
  const plan_t *p;
  const plan_src *src;
  harp_error *e;
  axset known;
} checker;

/* An axis reference is fine when the plan defines it, or when it is a base
 * name (no '.') the plan does not split: plan_validate checks it exists. */
static harp_status ck_axis(checker *c, const char *a, plan_pos pos, const char *what) {
  if (!plan_axis_name_ok(a))
    return plan_fail(c->e, HARP_E_PARSE, c->src, pos, a, "%s: '%s' is not an axis name", what, a);
  if (ax_has(&c->known, a)) return HARP_OK;
  if (!strchr(a, '.')) {
    if (is_split_base(c->p, a))
      return plan_fail(c->e, HARP_E_INVALID_ARG, c->src, pos, a,
                       "%s: axis '%s' is split; name one of %s.o, %s.i", what, a, a, a);
    return HARP_OK;
  }
  return plan_fail(c->e, HARP_E_INVALID_ARG, c->src, pos, a,
                   "%s: axis '%s' is not defined by the plan's splits or fuses", what, a);
}

static harp_status ck_tree(checker *c) {
  const plan_t *p = c->p;
  static const char *const sfx[] = {".o", ".i", ".i.o", ".i.i"};
  for (int i = 0; i < p->ntile; i++)
    for (int s = 0; s < 4; s++) {
      char nm[PLAN_NAME_MAX];
      if (child_name(nm, p->tile_axes[i], sfx[s])) ax_add(&c->known, nm);
    }
  /* Splits and fuses may build on each other in any order: iterate to a
   * fixed point, then complain about what never resolved. */
  bool done_s[PLAN_MAX_SPLITS] = {0}, done_f[PLAN_MAX_FUSE] = {0};
  char kstep[PLAN_NAME_MAX] = "";
  if (p->ntile == 3) child_name(kstep, p->tile_axes[2], ".i");
  for (bool progress = true; progress;) {
    progress = false;
    for (int i = 0; i < p->nsplits; i++) {
      const char *a = p->splits[i].axis;
      if (done_s[i] || !(ax_has(&c->known, a) || (!strchr(a, '.') && !is_split_base(p, a)))) continue;
      done_s[i] = progress = true;
      char o[PLAN_NAME_MAX], in[PLAN_NAME_MAX];
      if (!child_name(o, a, ".o") || !child_name(in, a, ".i"))
        return plan_fail(c->e, HARP_E_LIMIT, c->src, p->pos.splits[i], a, "split: axis name '%s' too long", a);
      if (strcmp(a, kstep) != 0 && (ax_has(&c->known, o) || ax_has(&c->known, in)))
        return plan_fail(c->e, HARP_E_INVALID_ARG, c->src, p->pos.splits[i], a, "split: axis '%s' is already split", a);
      ax_add(&c->known, o);
      ax_add(&c->known, in);
    }
    for (int i = 0; i < p->nfuse; i++) {
      const plan_fuse *f = &p->fuse[i];
      bool ka = ax_has(&c->known, f->a) || !strchr(f->a, '.');
      bool kb = ax_has(&c->known, f->b) || !strchr(f->b, '.');
      if (done_f[i] || !ka || !kb) continue;
      done_f[i] = progress = true;
      if (ax_has(&c->known, f->to) || is_split_base(p, f->to))
        return plan_fail(c->e, HARP_E_INVALID_ARG, c->src, p->pos.fuse[i], f->to,
                         "fuse: result '%s' names an axis that already exists", f->to);
      ax_add(&c->known, f->to);
    }
  }
  for (int i = 0; i < p->nsplits; i++)
    if (!done_s[i]) return ck_axis(c, p->splits[i].axis, p->pos.splits[i], "split");
  for (int i = 0; i < p->nfuse; i++)
    if (!done_f[i]) {
      harp_status st = ck_axis(c, p->fuse[i].a, p->pos.fuse[i], "fuse");
      return st ? st : ck_axis(c, p->fuse[i].b, p->pos.fuse[i], "fuse");
    }
  return HARP_OK;
}

static harp_status ck_tile(checker *c) {
  const plan_t *p = c->p;
  const plan_src *src = c->src;
  if (p->ntile < 1 || p->ntile > PLAN_MAX_TILE)
    return plan_fail(c->e, HARP_E_INVALID_ARG, src, p->pos.tile[0], "tile",
                     "a plan tiles 1 to 3 axes (tile = [BM, BN, BK]), got %d", p->ntile);
  for (int i = 0; i < p->ntile; i++) {
    const char *a = p->tile_axes[i];
    if (!plan_axis_name_ok(a) || strchr(a, '.'))
      return plan_fail(c->e, HARP_E_INVALID_ARG, src, p->pos.tile[i], a, "tile axis '%s' must be a base axis name", a);
    /* its loops (a.i.o, a.i.i) are names too: they must fit, or they would print cut short */
    if (strlen(a) > PLAN_NAME_MAX - 5)
      return plan_fail(c->e, HARP_E_LIMIT, src, p->pos.tile[i], a,
                       "tile axis '%.24s...' has %zu characters; at most %d, so that its loops' names (NAME.i.o) fit in %d",
                       a, strlen(a), PLAN_NAME_MAX - 5, PLAN_NAME_MAX - 1);
    for (int j = 0; j < i; j++)
      if (strcmp(p->tile_axes[j], a) == 0)
        return plan_fail(c->e, HARP_E_INVALID_ARG, src, p->pos.tile[i], a, "axis '%s' is tiled twice", a);
    if (p->tile[i] < 1 || p->tile[i] > PLAN_MAX_FACTOR)
      return plan_fail(c->e, HARP_E_INVALID_ARG, src, p->pos.tile[i], a, "tile of '%s' is %lld; it must be in [1, %d]",
                       a, (long long)p->tile[i], PLAN_MAX_FACTOR);
  }
  if (p->stages != 2 && p->stages != 3)
    return plan_fail(c->e, HARP_E_INVALID_ARG, src, p->pos.stages, "stages", "stages is %d; it must be 2 or 3 (§1.7)",
                     p->stages);
  if (p->warp_m < 1 || p->tile[0] % p->warp_m)
    return plan_fail(c->e, HARP_E_INVALID_ARG, src, p->pos.warp_tile, "warp_tile",
                     "warp tile %d in '%s' does not divide the tile %lld", p->warp_m, p->tile_axes[0],
                     (long long)p->tile[0]);
  if (p->ntile >= 2 && (p->warp_n < 1 || p->tile[1] % p->warp_n))
    return plan_fail(c->e, HARP_E_INVALID_ARG, src, p->pos.warp_tile, "warp_tile",
                     "warp tile %d in '%s' does not divide the tile %lld", p->warp_n, p->tile_axes[1],
                     (long long)p->tile[1]);
  if (p->ntile < 2 && p->warp_n != 0)
    return plan_fail(c->e, HARP_E_INVALID_ARG, src, p->pos.warp_tile, "warp_tile",
                     "warp_tile has a second dimension but only one axis is tiled");
  return HARP_OK;
}

static harp_status ck_refs(checker *c) {
  const plan_t *p = c->p;
  const plan_src *src = c->src;
  harp_error *e = c->e;
  harp_status st;
  if ((st = ck_axis(c, p->pipeline_axis, p->pos.pipeline, "pipeline"))) return st;
  for (int i = 0; i < p->nbind; i++) {
    if ((unsigned)p->bind[i].target >= PLAN_T_COUNT)
      return plan_fail(e, HARP_E_PARSE, src, p->pos.bind[i], "bind", "bind: unknown target");
    if ((st = ck_axis(c, p->bind[i].axis, p->pos.bind[i], "bind"))) return st;
    for (int j = 0; j < i; j++) {
      if (p->bind[j].target == p->bind[i].target)
        return plan_fail(e, HARP_E_INVALID_ARG, src, p->pos.bind[i], p->bind[i].axis,
                         "bind: %s is already bound to '%s'", plan_target_name(p->bind[i].target), p->bind[j].axis);
      if (strcmp(p->bind[j].axis, p->bind[i].axis) == 0)
        return plan_fail(e, HARP_E_INVALID_ARG, src, p->pos.bind[i], p->bind[i].axis, "bind: axis '%s' is bound twice",
                         p->bind[i].axis);
    }
  }
  for (int i = 0; i < p->ncache; i++) {
    if (!plan_ident_ok(p->cache[i].tensor))
      return plan_fail(e, HARP_E_PARSE, src, p->pos.cache[i], "cache", "cache_read: bad tensor name '%s'",
                       p->cache[i].tensor);
    for (int j = 0; j < i; j++)
      if (strcmp(p->cache[j].tensor, p->cache[i].tensor) == 0)
        return plan_fail(e, HARP_E_INVALID_ARG, src, p->pos.cache[i], p->cache[i].tensor,
                         "cache_read: tensor '%s' is cached twice", p->cache[i].tensor);
    if ((st = ck_axis(c, p->cache[i].at, p->pos.cache[i], "cache_read at="))) return st;
  }
  if (p->vec_width) {
    int w = p->vec_width;
    if (w != 1 && w != 2 && w != 4 && w != 8 && w != 16)
      return plan_fail(e, HARP_E_INVALID_ARG, src, p->pos.vec_width, "vectorize",
                       "vectorize: width %d is not 1, 2, 4, 8 or 16", w);
    if ((st = ck_axis(c, p->vec_axis, p->pos.vec, "vectorize"))) return st;
  }
  for (int i = 0; i < p->npred; i++) {
    if ((st = ck_axis(c, p->pred[i], p->pos.pred[i], "predicate_tail"))) return st;
    for (int j = 0; j < i; j++)
      if (strcmp(p->pred[j], p->pred[i]) == 0)
        return plan_fail(e, HARP_E_INVALID_ARG, src, p->pos.pred[i], p->pred[i], "predicate_tail: '%s' repeated", p->pred[i]);
  }
  for (int i = 0; i < p->nreorder; i++) {
    if ((st = ck_axis(c, p->reorder[i], p->pos.reorder[i], "reorder"))) return st;
    for (int j = 0; j < i; j++)
      if (strcmp(p->reorder[j], p->reorder[i]) == 0)
        return plan_fail(e, HARP_E_INVALID_ARG, src, p->pos.reorder[i], p->reorder[i], "reorder: '%s' repeated",
                         p->reorder[i]);
  }
  for (int i = 0; i < p->nunroll; i++) {
    if ((st = ck_axis(c, p->unroll[i].axis, p->pos.unroll[i], "unroll"))) return st;
    if (p->unroll[i].factor < 1 || p->unroll[i].factor > 64)
      return plan_fail(e, HARP_E_INVALID_ARG, src, p->pos.unroll[i], p->unroll[i].axis,
                       "unroll: factor %d is not in [1, 64]", p->unroll[i].factor);
    for (int j = 0; j < i; j++)
      if (strcmp(p->unroll[j].axis, p->unroll[i].axis) == 0)
        return plan_fail(e, HARP_E_INVALID_ARG, src, p->pos.unroll[i], p->unroll[i].axis, "unroll: '%s' repeated",
                         p->unroll[i].axis);
  }
  for (int i = 0; i < p->nsplits; i++) {
    const char *a = p->splits[i].axis;
    if (p->splits[i].factor < 1 || p->splits[i].factor > PLAN_MAX_FACTOR)
      return plan_fail(e, HARP_E_INVALID_ARG, src, p->pos.splits[i], a, "split: factor %lld is not in [1, %d]",
                       (long long)p->splits[i].factor, PLAN_MAX_FACTOR);
    char wi[PLAN_NAME_MAX];
    for (int t = 0; t < p->ntile && t < 2; t++)
      if (child_name(wi, p->tile_axes[t], ".i") && strcmp(wi, a) == 0)
        return plan_fail(e, HARP_E_INVALID_ARG, src, p->pos.splits[i], a,
                         "split of '%s' is the warp tile; give it as warp_tile", a);
    for (int j = 0; j < i; j++)
      if (strcmp(p->splits[j].axis, a) == 0)
        return plan_fail(e, HARP_E_INVALID_ARG, src, p->pos.splits[i], a, "split: axis '%s' is already split", a);
  }
  for (int i = 0; i < p->nfuse; i++) {
    const plan_fuse *f = &p->fuse[i];
    if (!plan_axis_name_ok(f->a) || !plan_axis_name_ok(f->b) || !plan_axis_name_ok(f->to))
      return plan_fail(e, HARP_E_PARSE, src, p->pos.fuse[i], "fuse", "fuse: bad axis name");
    if (strcmp(f->a, f->b) == 0)
      return plan_fail(e, HARP_E_INVALID_ARG, src, p->pos.fuse[i], f->a, "fuse: '%s' fused with itself", f->a);
  }
  return HARP_OK;
}

static harp_status ck_rest(checker *c) {
  const plan_t *p = c->p;
  const plan_src *src = c->src;
  harp_error *e = c->e;
  if ((unsigned)p->arch >= PLAN_ARCH_COUNT) return plan_fail(e, HARP_E_PARSE, src, p->pos.arch, "arch", "unknown arch");
  for (int i = 0; i < p->nepi; i++) {
    if ((unsigned)p->epi[i] >= PLAN_EPI_COUNT)
      return plan_fail(e, HARP_E_PARSE, src, p->pos.epilogue, "epilogue", "epilogue: unknown op");
    for (int j = 0; j < i; j++)
      if (p->epi[j] == p->epi[i])
        return plan_fail(e, HARP_E_INVALID_ARG, src, p->pos.epilogue, "epilogue", "epilogue: '%s' repeated",
                         plan_epi_name(p->epi[i]));
  }
  for (int k = 0; k < PLAN_KEY_COUNT; k++)
    if (p->algo[k] != PLAN_ALGO_NONE && !plan_algo_fits(p->algo[k], (plan_algo_key)k))
      return plan_fail(e, HARP_E_INVALID_ARG, src, p->pos.algo[k], "algo_choice", "algo_choice: '%s' is not an algorithm for %s",
                       plan_algo_name(p->algo[k]), plan_algo_key_name((plan_algo_key)k));
  for (int i = 0; i < p->nedges; i++) {
    const plan_edge *d = &p->edges[i];
    if (!plan_ident_ok(d->from) || !plan_ident_ok(d->to))
      return plan_fail(e, HARP_E_PARSE, src, p->pos.edges[i], "local_edges", "local_edges: bad node name");
    if ((unsigned)d->buffer >= PLAN_BUF_COUNT)
      return plan_fail(e, HARP_E_PARSE, src, p->pos.edges[i], "local_edges", "local_edges: unknown buffer");
    if (d->depth != 0 && (d->buffer != PLAN_BUF_SMEM_RING || (d->depth != 2 && d->depth != 3)))
      return plan_fail(e, HARP_E_INVALID_ARG, src, p->pos.edges[i], d->from,
                       "local_edges: depth %d; only a smem_ring has a depth, 2 or 3", d->depth);
  }
  return HARP_OK;
}

harp_status plan_check(const plan_t *p, const plan_src *src, harp_error *e) {
  checker *c = ut_xcalloc(1, sizeof *c);
  if (!c) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  c->p = p;
  c->src = src;
  c->e = e;
  harp_status st = ck_tile(c);
  if (!st) st = ck_tree(c);
  if (!st) st = ck_refs(c);
  if (!st) st = ck_rest(c);
  free(c);
  return st;
}
