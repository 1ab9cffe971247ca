/* sgen.c — a ShapeSet model on the CPU: one compiled object for every
 * binding of the shape symbols in a box, when its kernels read their sizes
 * at run time (rc_syms.c); else one compile per binding met, with the
 * reason kept.  Every run checks its binding first: in the box, the model's
 * constraints hold (the graph prepared at it), the same graph node for node
 * as the one compiled, no value larger than at the corner hi (whose arena
 * the object has); a new binding quickly where that says what the full
 * check says at the box's probes: the compiled graph re-inferred at it
 * (quick_at).  A derived symbol of the graph (tiny_dsym: a strided
 * conv's (H + 1)/2) that reads a varying one varies too: the object reads
 * it from hp_sym_ like the others, its value computed per binding and its
 * largest at the corner hi (the definition is monotone: by its form, or
 * checked at every binding of a small box).
 * A box symbol that the model's ops tie to others (an ADD of [.., 2*H]
 * and [.., G]: G = 2 H; tiny_ties_text) is made a derived symbol of the
 * model first, so the corners are bindings the model accepts; it follows
 * the others (s->follows) and a binding that breaks the tie is refused.
 * A weight whose shape moves with a symbol is one table at the corner hi,
 * read through a SHRINK by the binding (sgen_weights.c).
 * Needs: cpu.c (rt_cpu_compile_code, rt_cpu_adopt, rt_cpu_run_bound), sgen_weights.c, sgen_quick.c, tiny.
 * Gives: harp/sgen.h (rt_sgen_layout_of: what a standalone package needs). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harp/function.h"
#include "harp/pipeline.h"
#include "harp/sgen.h"
#include "sgen_manifest.h"
#include "sgen_quick.h"
#include "sgen_weights.h"
#include "util/util.h"

#define SGEN_MAX_VARIANTS 16
#define SGEN_BREAKS "this binding breaks the model"
#define SGEN_LARGER "this binding makes a value larger than the compiled ShapeSet holds"

static char *sg_strdup(const char *x) {
  size_t n = strlen(x) + 1;
  char *d = ut_xmalloc(n);
  if (d) memcpy(d, x, n);
  return d;
}

/* A compile per binding (fallback, or a binding outside the box). */
typedef struct sgen_variant {
  int64_t *vals; /* per symbol */
  tiny_graph *g; /* prepared at vals (the model borrows it) */
  tiny_symtab syms;
  rt_cpu_model *m;
} sgen_variant;

struct rt_sgen {
  char *text;              /* the model as loaded, canonical JSON: each binding prepares a copy (its moved weights at hi) */
  sgw_moved moved;         /* the weights whose shape moves with the box (sgen_weights.c) */
  rt_sgen_sym *syms;
  int nsyms;
  bool *follows;           /* per symbol: a derived one of the model (a tie, G := 2*H): its value from the others */
  char ties[256];          /* the ties learned for the box (tiny_ties_text): "G = 2*H, .." */
  rt_sgen_opts o;
  rt_cpu_opts cpu;
  /* the one object (fallback == NULL) */
  const char **gen_names;  /* the varying symbols, in syms order, then the derived ones that read them */
  int64_t *gen_hi;
  int64_t *glo;            /* per symbol: the lower corner the object serves from (its lo, or 2) */
  int *gen_of;             /* per varying symbol of syms: its index there */
  int ngen, nbase;         /* all varying symbols; of them, the first nbase are syms' */
  tiny_graph *ghi;         /* prepared at the corner hi */
  tiny_symtab symhi;
  rt_cpu_model *m;
  char *fallback;
  /* the last binding run on the object, its graph kept */
  int64_t *last;
  const tiny_graph *gb;    /* the graph at last (glast or gfast); NULL: none checked */
  tiny_graph *glast;       /* the model prepared at last (the full check), or NULL */
  tiny_graph *gfast;       /* a shadow of ghi, its shapes re-derived at last (the quick check: quick_at) */
  bool quick;              /* the quick check agrees with the full one at the box's probes: it serves the box */
  sgen_variant var[SGEN_MAX_VARIANTS];
  int nvar, objects, cc_runs; /* objects made; of them, by the C compiler (not the disk cache) */
  bool from_manifest;      /* the box's decision came from the cache's manifest: no corner compiled */
  pthread_mutex_t mu;      /* one run at a time: the binding state is shared */
};

/* A copy of s's model prepared at vals (per symbol) into *g, its symbols in *t. */
static harp_status prepare_at(harp_error *e, const rt_sgen *s, const int64_t *vals, tiny_graph **g, tiny_symtab *t) {
  *g = NULL;
  tiny_symtab_init(t);
  t->sym_broadcasts = true; /* a symbol at 1 broadcasts as at 2: one graph for the box */
  for (int i = 0; i < s->nsyms; i++) /* a tied symbol follows its definition (checked where an input gives it) */
    if (!s->follows[i] && tiny_symtab_set(e, t, s->syms[i].name, vals[i])) return e->code;
  if (tiny_load_json(e, s->text, strlen(s->text), NULL, g) || tiny_dsym_bind(e, *g, t) || tiny_prepare(e, *g, t, false))
    return e->code;
  return tiny_dsym_bind(e, *g, t); /* the ones the preparation named (a window count: tiny_infer_move) */
}

/* Whether two Functions have the same kernels over the same buffers. */
static bool same_function(const fn_function *a, const fn_function *b) {
  if (a->nkernels != b->nkernels || a->nbuffers != b->nbuffers || a->nargs != b->nargs || a->nret != b->nret) return false;
  for (int i = 0; i < a->nbuffers; i++) {
    const fn_buffer *x = &a->buffers[i], *y = &b->buffers[i];
    if (x->node != y->node || x->kind != y->kind || x->dtype != y->dtype) return false;
  }
  for (int k = 0; k < a->nkernels; k++) {
    const fn_kernel *x = &a->kernels[k], *y = &b->kernels[k];
    if (x->region != y->region || x->nreads != y->nreads || x->nwrites != y->nwrites) return false;
    if (memcmp(x->reads, y->reads, (size_t)x->nreads * sizeof *x->reads) ||
        memcmp(x->writes, y->writes, (size_t)x->nwrites * sizeof *x->writes))
      return false;
  }
  return true;
}

/* The kernels' part of a translation unit (up to the model struct), its
 * comments dropped, into a new string. */
static char *kernel_text(const char *src) {
  const char *end = strstr(src, "\ntypedef struct model_t {");
  size_t n = end ? (size_t)(end - src) : strlen(src), k = 0;
  char *t = ut_xmalloc(n + 1);
  if (!t) return NULL;
  for (size_t i = 0; i < n; i++) {
    if (src[i] == '/' && i + 1 < n && src[i + 1] == '*') {
      const char *c = strstr(src + i + 2, "*/");
      i = c ? (size_t)(c - src) + 1 : n;
      continue;
    }
    t[k++] = src[i];
  }
  t[k] = 0;
  return t;
}

/* Why a's kernels differ at offset at: the kernel around it (the last
 * "model_k<digits>" name before it) and the line. */
static void differing_kernel(const char *a, size_t at, char *why, size_t cap) {
  const char *k = NULL;
  for (const char *p = strstr(a, "model_k"); p && (size_t)(p - a) <= at; p = strstr(p + 1, "model_k"))
    if (p[7] >= '0' && p[7] <= '9') k = p;
  int klen = 0;
  while (k && (k[klen] == '_' || (k[klen] >= 'a' && k[klen] <= 'z') || (k[klen] >= '0' && k[klen] <= '9'))) klen++;
  const char *line = a + at;
  while (line > a && line[-1] != '\n') line--;
  const char *nl = strchr(line, '\n');
  int len = nl ? (int)(nl - line) : (int)strlen(line);
  snprintf(why, cap, "the code of %.*s depends on the binding: `%.*s`", k ? klen : 11, k ? k : "the prelude", len > 100 ? 100 : len,
           line);
}

/* The part of kernel text t that kernel k's functions span: from the first
 * "model_k<k>_" or "model_k<k>(" to the first of kernel k + 1 (or the end);
 * NULL when t has none of kernel k. */
static const char *kernel_span(const char *t, int k, size_t *len) {
  char a[32], b[32];
  const char *s = NULL, *e = NULL;
  for (int i = 0; i < 2; i++) {
    snprintf(a, sizeof a, i ? "model_k%d(" : "model_k%d_", k);
    snprintf(b, sizeof b, i ? "model_k%d(" : "model_k%d_", k + 1);
    const char *x = strstr(t, a), *y = strstr(t, b);
    if (x && (!s || x < s)) s = x;
    if (y && (!e || y < e)) e = y;
  }
  if (!s) return NULL;
  *len = e && e > s ? (size_t)(e - s) : strlen(s);
  return s;
}

/* Every kernel whose text differs between a and b after the first
 * (differing_kernel named it), appended to why[cap] as "(also: model_k5,
 * ...; N kernels in all)": what else prints its sizes. */
static void other_kernels(const char *a, const char *b, char *why, size_t cap) {
  size_t n = strlen(why);
  int count = 0;
  bool full = false;
  for (int k = 0; k < 100000; k++) {
    size_t la = 0, lb = 0;
    const char *sa = kernel_span(a, k, &la), *sb = kernel_span(b, k, &lb);
    if (!sa && !sb) break;
    if ((sa && sb && la == lb && !memcmp(sa, sb, la)) || ++count == 1) continue; /* the same; or the first, named */
    const char *id = sa ? sa : sb; /* "model_k5_conv..." or "model_k5(": the kernel and its kind */
    int len = (int)strcspn(id, "(");
    const char *kind = memchr(id + 7, '_', (size_t)len > 7 ? (size_t)len - 7 : 0);
    if (kind) len = (int)(kind - id) + 1 + (int)strcspn(kind + 1, "_(");
    int w = full ? -1 : snprintf(why + n, cap - n, "%s %.*s", count == 2 ? " (also:" : ",", len > 40 ? 40 : len, id);
    if (w < 0 || (size_t)w >= cap - n - 32) full = true, why[n] = 0;
    else n += (size_t)w;
  }
  if (count > 1) snprintf(why + n, cap - n, "%s; %d kernels in all)", count == 2 && full ? " (" : full ? ", ..." : "", count);
}

/* e's error again as code, its message after `what` (the first error
 * recorded wins: cleared first). */
static harp_status restate(harp_error *e, harp_status code, const char *what) {
  harp_error old = *e;
  harp_error_clear(e);
  return ut_fail(e, code, old.node[0] ? old.node : NULL, "%s: %s", what, old.msg);
}

/* prepare_at for a corner of the box, its error saying which. */
static harp_status corner_at(harp_error *e, const rt_sgen *s, const int64_t *vals, const char *which, tiny_graph **g,
                             tiny_symtab *t) {
  if (!prepare_at(e, s, vals, g, t)) return HARP_OK;
  char what[64];
  snprintf(what, sizeof what, "the ShapeSet's %s corner", which);
  return restate(e, e->code, what);
}

/* Whether an INPUT node of g declares symbol sym in its shape (so a run's
 * inputs give its value). */
static bool declared_by_input(const tiny_graph *g, const char *sym) {
  for (int i = 0; i < g->n; i++) {
    const tiny_node *n = &g->nodes[i];
    for (int d = 0; n->op == TINY_INPUT && d < n->a.input.shape.rank; d++)
      if (n->a.input.shape.d[d].sym && !strcmp(n->a.input.shape.d[d].sym, sym)) return true;
  }
  return false;
}

/* The box's lower corner lo with every varying symbol at 1 raised to 2
 * (s->glo: where the object starts); false when none was at 1. */
static bool raise_ones(rt_sgen *s, int64_t *lo) {
  bool any = false;
  for (int i = 0; i < s->nsyms; i++)
    if (lo[i] == 1 && s->syms[i].hi >= 2 && !s->follows[i]) lo[i] = s->glo[i] = 2, any = true;
  return any;
}

/* Derived symbol d's value at every binding of s's box (at most
 * SGEN_MONO_POINTS of them), into v[] in mixed radix over s->syms (the
 * first symbol fastest); false when the box is larger or d has no value at
 * some binding. */
#define SGEN_MONO_POINTS 4096
static bool box_values(const rt_sgen *s, const tiny_dsym *d, int64_t *v, int64_t n) {
  int64_t vals[RT_SGEN_MAX_GEN + 64];
  if (s->nsyms > RT_SGEN_MAX_GEN + 64) return false;
  harp_error e = {0};
  bool ok = true;
  for (int64_t p = 0; ok && p < n; p++) {
    int64_t q = p;
    for (int i = 0; i < s->nsyms; i++) {
      int64_t w = s->syms[i].hi - s->syms[i].lo + 1;
      vals[i] = s->syms[i].lo + q % w, q /= w;
    }
    tiny_symtab t;
    tiny_symtab_init(&t);
    for (int i = 0; ok && i < s->nsyms; i++) ok = s->follows[i] || !tiny_symtab_set(&e, &t, s->syms[i].name, vals[i]);
    ok = ok && !tiny_dsym_bind(&e, s->ghi, &t) && tiny_symtab_get(&t, d->name, &v[p]);
    tiny_symtab_free(&t);
  }
  harp_error_clear(&e);
  return ok;
}

/* Whether derived symbol d never shrinks as one of s's box symbols grows
 * by one, checked at every binding of the box (a small box: box_values):
 * what neither tiny_dsym_monotone nor tiny_dsym_steps_up can prove from
 * d's definition alone. */
static bool monotone_over_box(const rt_sgen *s, const tiny_dsym *d) {
  int64_t n = 1;
  for (int i = 0; i < s->nsyms; i++)
    if ((n *= s->syms[i].hi - s->syms[i].lo + 1) > SGEN_MONO_POINTS || n < 1) return false;
  int64_t *v = ut_xcalloc((size_t)n, sizeof *v);
  bool ok = v && box_values(s, d, v, n);
  for (int64_t p = 0, stride = 1; ok && p < n; p++, stride = 1)
    for (int i = 0; ok && i < s->nsyms; stride *= s->syms[i].hi - s->syms[i].lo + 1, i++) {
      int64_t w = s->syms[i].hi - s->syms[i].lo + 1;
      if ((p / stride) % w + 1 < w) ok = v[p + stride] >= v[p];
    }
  free(v);
  return ok;
}

/* Derived symbol d (reading a varying symbol) joins the varying ones
 * (gen_names; gen_hi: its value at the corner hi, s->symhi); a definition
 * that is not monotone leaves why[] saying so. */
static harp_status derived_gen(harp_error *e, rt_sgen *s, const tiny_dsym *d, char *why, size_t cap) {
  char def[200];
  tiny_expr_print(d->def, def, sizeof def);
  if (!tiny_dsym_monotone(d->def) && !tiny_dsym_steps_up(s->ghi, d->def) && !monotone_over_box(s, d)) {
    snprintf(why, cap, "the derived size %.60s = %.120s may shrink as the box's symbols grow", d->name, def);
    return HARP_OK;
  }
  if (s->ngen == RT_SGEN_MAX_GEN)
    return ut_fail(e, HARP_E_LIMIT, NULL, "more than %d varying sizes in one ShapeSet object", RT_SGEN_MAX_GEN);
  int64_t v;
  if (!tiny_symtab_get(&s->symhi, d->name, &v))
    return ut_fail(e, HARP_E_INTERNAL, NULL, "derived symbol %s = %s unbound at the ShapeSet's upper corner", d->name, def);
  s->gen_names[s->ngen] = d->name, s->gen_hi[s->ngen++] = v;
  return HARP_OK;
}

/* The derived symbols of s->ghi that read a varying symbol, directly or
 * through others, join the varying ones (derived_gen). */
static harp_status derived_gens(harp_error *e, rt_sgen *s, char *why, size_t cap) {
  s->ngen = s->nbase;
  bool *varies = ut_xcalloc((size_t)s->ghi->ndsyms + 1, sizeof *varies), *r = ut_xcalloc((size_t)s->ghi->ndsyms + 1, sizeof *r);
  harp_status st = varies && r ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0; !st && i < s->nbase; i++) {
    tiny_dsym_readers(s->ghi, s->gen_names[i], r);
    for (int k = 0; k < s->ghi->ndsyms; k++) varies[k] |= r[k];
  }
  for (int k = 0; !st && k < s->ghi->ndsyms && !why[0]; k++)
    if (varies[k]) st = derived_gen(e, s, &s->ghi->dsyms[k], why, cap);
  free(varies);
  free(r);
  return st;
}

/* The varying symbols' values at binding vals (per symbol of s->syms), the
 * derived ones computed, into sv[0..s->ngen). */
static harp_status gen_values(harp_error *e, const rt_sgen *s, const int64_t *vals, long long *sv) {
  tiny_symtab t;
  tiny_symtab_init(&t);
  harp_status st = HARP_OK;
  for (int i = 0; !st && i < s->nsyms; i++) st = s->follows[i] ? HARP_OK : tiny_symtab_set(e, &t, s->syms[i].name, vals[i]);
  if (!st && s->ngen > s->nbase) st = tiny_dsym_bind(e, s->ghi, &t);
  for (int i = 0; !st && i < s->ngen; i++) {
    int64_t v = 0;
    if (!tiny_symtab_get(&t, s->gen_names[i], &v))
      st = ut_fail(e, HARP_E_INTERNAL, NULL, "shape symbol %s has no value at this binding", s->gen_names[i]);
    sv[i] = v;
  }
  tiny_symtab_free(&t);
  return st;
}

/* The box's lower corner lo raised, one step at a time, until no varying
 * derived symbol (s->gen_names past nbase, defined in s->ghi) is 1 there:
 * each step raises the box's symbols that a derived one at 1 reads (a
 * strided read's (H + 1) / 2 at H = 2 is one point, its loop folded, as
 * a symbol at 1 is: raise_ones).  The definitions are monotone
 * (derived_gen), so the corner only moves up, never past hi; false when
 * nothing was at 1 or nothing could move. */
static bool raise_derived_ones(rt_sgen *s, int64_t *lo, const int64_t *hi) {
  long long sv[RT_SGEN_MAX_GEN];
  bool *r = ut_xcalloc((size_t)s->ghi->ndsyms + 1, sizeof *r), any = false;
  harp_error e = {0};
  for (bool moved = r != NULL; moved && !gen_values(&e, s, lo, sv);) {
    moved = false;
    for (int b = 0; b < s->nbase; b++) { /* box symbol b up by one where a derived one at 1 reads it */
      int i = s->gen_of[b];
      bool up = false;
      tiny_dsym_readers(s->ghi, s->gen_names[b], r);
      for (int k = s->nbase; k < s->ngen && !up; k++) {
        int d = tiny_dsym_find(s->ghi, s->gen_names[k]);
        up = sv[k] == 1 && d >= 0 && r[d] && lo[i] < hi[i];
      }
      if (up) lo[i]++, s->glo[i] = lo[i], moved = any = true;
    }
  }
  harp_error_clear(&e);
  free(r);
  return any;
}

/* Probe b of the box (b = 0: the lower corner it serves, 1: the upper,
 * then interior points with the symbols apart) into vals, per symbol. */
static void probe_at(const rt_sgen *s, int b, int64_t *vals) {
  for (int i = 0; i < s->nsyms; i++) {
    int64_t lo = s->glo[i], hi = s->syms[i].hi, span = hi - lo;
    vals[i] = b == 0 ? lo : b == 1 ? hi : lo + (span * (2 * b + 3 * i + 1) / 13 + b + i) % (span + 1);
  }
}

/* The quick check of binding vals (none of its symbols below the corner
 * glo) on s->gfast (sgq_check: the graph the object runs re-inferred and
 * verified at vals; the model not prepared again), its errors said as the
 * full check's (bound_graph). */
static harp_status quick_at(harp_error *e, rt_sgen *s, const int64_t *vals) {
  bool bigger = false;
  if (sgq_check(e, s->ghi, s->gfast, s->syms, s->follows, s->nsyms, vals, &bigger))
    return restate(e, HARP_E_INPUT_MISMATCH, SGEN_BREAKS);
  return bigger ? ut_fail(e, HARP_E_INPUT_MISMATCH, NULL, SGEN_LARGER) : HARP_OK;
}

/* Whether the quick check says at binding vals what the full one says
 * (the model prepared there; g: that graph when at hand): both refuse
 * vals, or both take it with the same sizes at every node. */
static bool quick_agrees_at(rt_sgen *s, const int64_t *vals, const tiny_graph *g) {
  harp_error e = {0};
  tiny_graph *own = NULL;
  bool full = true, bigger = false;
  if (!g) {
    tiny_symtab t;
    full = !prepare_at(&e, s, vals, &own, &t);
    tiny_symtab_free(&t);
    harp_error_clear(&e);
    g = own;
  }
  full = full && sgq_same_graph(g, s->ghi, &bigger) && !bigger;
  bool quick = !quick_at(&e, s, vals);
  harp_error_clear(&e);
  bool ok = full == quick && (!full || sgq_same_sizes(g, s->gfast));
  tiny_graph_free(own);
  return ok;
}

/* s->gfast, a shadow of ghi, and s->quick: whether the quick check agrees
 * with the full one at the box's lower corner lo (glo: the model prepared
 * there), its upper and its interior probes (probe_at): then it checks
 * every new binding at or above lo (bound_graph). */
#define SGEN_QUICK_PROBES 6
static harp_status quick_setup(harp_error *e, rt_sgen *s, const int64_t *lo, const tiny_graph *glo) {
  if (!(s->gfast = tiny_graph_shadow(s->ghi))) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  int64_t vals[64];
  s->quick = quick_agrees_at(s, lo, glo);
  for (int b = 1; s->quick && b < SGEN_QUICK_PROBES; b++) {
    probe_at(s, b, vals);
    s->quick = quick_agrees_at(s, vals, b == 1 ? s->ghi : NULL);
  }
  return HARP_OK;
}

/* Both corners to the code stage; the one object from hi when they agree
 * (its compile then owns ghi), else s->fallback says why. */
static harp_status compile_corners(harp_error *e, rt_sgen *s, int64_t *lo, const int64_t *hi) {
  tiny_graph *glo = NULL;
  tiny_symtab symlo;
  rt_compile *clo = NULL, *chi = NULL;
  char why[640] = "";
  harp_status st = corner_at(e, s, lo, "lower", &glo, &symlo);
  if (!st) st = corner_at(e, s, hi, "upper", &s->ghi, &s->symhi);
  for (int i = 0; !st && i < s->nbase; i++) /* the box's own (a retry from 2 still holds the derived ones) */
    if (!declared_by_input(s->ghi, s->gen_names[i]))
      st = ut_fail(e, HARP_E_INVALID_ARG, NULL, "ShapeSet symbol %s: no input of the model declares it in its shape",
                   s->gen_names[i]);
  bool bigger = false;
  if (!st) st = derived_gens(e, s, why, sizeof why);
  if (!st && !why[0] && !sgq_same_graph(glo, s->ghi, &bigger)) snprintf(why, sizeof why, "the graph differs between the box's corners");
  /* the upper corner decides the regions and plans (the cost model at the box's largest sizes); the lower replays them */
  if (!st && !why[0]) st = rt_cpu_compile_code(e, s->ghi, &s->symhi, &s->cpu, s->gen_names, s->gen_hi, s->ngen, NULL, NULL, &chi);
  if (!st && !why[0]) { /* a lower corner that cannot replay them (other units at 1) is a reason, not an error */
    harp_error le = {0};
    if (rt_cpu_compile_code(&le, glo, &symlo, &s->cpu, s->gen_names, s->gen_hi, s->ngen, chi->part, &chi->plans, &clo))
      snprintf(why, sizeof why, "the box's lower corner does not replay the upper's regions: %.500s", le.msg);
    harp_error_clear(&le);
  }
  if (!st && !why[0] && !same_function(clo->f, chi->f))
    snprintf(why, sizeof why, "the regions or the Function differ between the box's corners");
  if (!st && !why[0]) {
    char *a = kernel_text(chi->source), *b = kernel_text(clo->source);
    if (!a || !b) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    else if (strcmp(a, b)) {
      size_t at = 0;
      while (a[at] == b[at]) at++;
      differing_kernel(a, at, why, sizeof why);
      other_kernels(a, b, why, sizeof why);
    }
    free(a);
    free(b);
  }
  if (!st && !why[0]) st = quick_setup(e, s, lo, glo);
  rt_compile_free(clo);
  tiny_graph_free(glo);
  tiny_symtab_free(&symlo);
  if (!st && why[0] && (raise_ones(s, lo) || (s->ngen > s->nbase && raise_derived_ones(s, lo, hi)))) { /* at 1 a loop over the symbol is one point, a reshape may fold: */
    rt_compile_free(chi);                   /* the corners from 2; 1 on the object where its graph is the same */
    tiny_graph_free(s->ghi), tiny_symtab_free(&s->symhi);
    s->ghi = NULL;
    return compile_corners(e, s, lo, hi);
  }
  if (!st && why[0]) {
    rt_compile_free(chi);
    if (!(s->fallback = sg_strdup(why))) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    return st;
  }
  if (st) {
    rt_compile_free(chi);
    return st;
  }
  st = rt_cpu_adopt(e, chi, &s->m);
  if (!st) s->objects++, s->cc_runs += !rt_cpu_cache_hit(s->m);
  return st;
}

/* s's state as box_setup left it (a manifest that did not fit). */
static void unload_manifest(rt_sgen *s) {
  rt_cpu_free(s->m);
  s->m = NULL;
  tiny_graph_shadow_free(s->gfast);
  s->gfast = NULL;
  tiny_graph_free(s->ghi);
  s->ghi = NULL;
  tiny_symtab_free(&s->symhi);
  tiny_symtab_init(&s->symhi);
  s->ngen = s->nbase;
}

/* Whether Function f (a manifest's) runs graph g: one argument per input
 * (an INPUT node each, weights in the ConstPool), one result per output. */
static bool function_fits(const fn_function *f, const tiny_graph *g) {
  int *in = NULL;
  int nin = tiny_inputs(g, &in);
  bool ok = in && f->nargs == nin && f->nret == g->noutputs;
  for (int a = 0; ok && a < nin; a++) {
    const fn_buffer *b = &f->buffers[f->args[a]];
    ok = b->node == in[a] && (b->kind == FN_INPUT || b->kind == FN_PARAM);
  }
  for (int k = 0; ok && k < f->nret; k++) ok = f->buffers[f->ret[k]].node == g->outputs[k];
  free(in);
  return ok;
}

/* The box's decision from the manifest at path (sgen_manifest.h): the
 * corner hi prepared, the object loaded from the cache, or the fallback's
 * reason; no corner compiled.  False (s as before) on any misfit: a
 * missing, damaged or stale manifest, a gone object. */
static bool from_manifest(rt_sgen *s, const char *path, const int64_t *hi) {
  harp_error e = {0};
  rt_ssm mf = {0};
  char why[640] = "";
  bool ok = !corner_at(&e, s, hi, "upper", &s->ghi, &s->symhi) && rt_ssm_load(path, s->ghi->n, s->nsyms, &mf);
  if (ok && !mf.fallback) {
    ok = function_fits(mf.f, s->ghi) && !derived_gens(&e, s, why, sizeof why) && !why[0];
    fn_function *f = mf.f;
    mf.f = NULL; /* the model's now, or freed */
    ok = ok ? !rt_cpu_load_cached(&e, s->ghi, &s->symhi, &s->cpu, f, mf.so, &s->m) : (fn_free(f), false);
  }
  if (ok && s->m && !(s->gfast = tiny_graph_shadow(s->ghi))) ok = false;
  if (ok) {
    memcpy(s->glo, mf.glo, (size_t)s->nsyms * sizeof *s->glo);
    s->quick = s->m && mf.quick;
    s->fallback = mf.fallback, mf.fallback = NULL;
    s->objects += s->m != NULL, s->from_manifest = true;
  } else {
    unload_manifest(s);
  }
  rt_ssm_free(&mf);
  harp_error_clear(&e);
  return ok;
}

/* The box's decision into the manifest at path (a failure to write it only
 * costs the next process the corners). */
static void store_manifest(const rt_sgen *s, const char *path) {
  rt_ssm mf = {.nsyms = s->nsyms, .fallback = s->fallback, .quick = s->quick};
  const fn_function *f = s->m ? rt_cpu_function(s->m) : NULL;
  const rt_compile *c = s->m ? rt_cpu_stages(s->m) : NULL;
  if (!s->ghi || s->nsyms > 64 || (s->m && (!c->so_path || !strrchr(c->so_path, '/')))) return;
  if (s->m) snprintf(mf.so, sizeof mf.so, "%s", strrchr(c->so_path, '/') + 1);
  memcpy(mf.glo, s->glo, (size_t)s->nsyms * sizeof *s->glo);
  mf.f = (fn_function *)f;
  harp_error e = {0};
  rt_ssm_store(&e, path, &mf, s->ghi->n);
  harp_error_clear(&e);
}

/* The box's decision: from the manifest when one fits, else the corners
 * compiled (compile_corners) and the manifest written. */
static harp_status decide_box(harp_error *e, rt_sgen *s, int64_t *lo, const int64_t *hi) {
  char path[4400];
  bool keep = rt_ssm_path(s->text, s->syms, s->nsyms, &s->cpu, path, sizeof path);
  if (keep && from_manifest(s, path, hi)) return HARP_OK;
  harp_status st = compile_corners(e, s, lo, hi);
  if (!st && keep) store_manifest(s, path);
  return st;
}

/* s's varying symbols (lo < hi) and the corners' values. */
static harp_status box_setup(harp_error *e, rt_sgen *s, int64_t *lo, int64_t *hi) {
  s->gen_names = ut_xcalloc(RT_SGEN_MAX_GEN + 1, sizeof *s->gen_names); /* room for the derived ones */
  s->gen_hi = ut_xcalloc(RT_SGEN_MAX_GEN + 1, sizeof *s->gen_hi);
  s->gen_of = ut_xcalloc((size_t)s->nsyms + 1, sizeof *s->gen_of);
  s->last = ut_xcalloc((size_t)s->nsyms + 1, sizeof *s->last);
  s->glo = ut_xcalloc((size_t)s->nsyms + 1, sizeof *s->glo);
  if (!s->gen_names || !s->gen_hi || !s->gen_of || !s->last || !s->glo) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (s->nsyms > 64) return ut_fail(e, HARP_E_LIMIT, NULL, "a ShapeSet of %d symbols: at most 64", s->nsyms);
  for (int i = 0; i < s->nsyms; i++) {
    const rt_sgen_sym *y = &s->syms[i];
    if (!y->name || y->lo < 1 || y->hi < y->lo)
      return ut_fail(e, HARP_E_INVALID_ARG, NULL, "ShapeSet symbol %s: the range %" PRId64 "..%" PRId64 " is not 1 <= lo <= hi",
                     y->name ? y->name : "(null)", y->lo, y->hi);
    for (int k = 0; k < i; k++)
      if (!strcmp(s->syms[k].name, y->name)) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "ShapeSet symbol %s given twice", y->name);
    lo[i] = s->glo[i] = y->lo, hi[i] = y->hi;
    if (y->lo < y->hi && !s->follows[i]) s->gen_names[s->ngen] = y->name, s->gen_hi[s->ngen] = y->hi, s->gen_of[s->ngen++] = i;
  }
  s->nbase = s->ngen;
  return HARP_OK;
}

harp_status rt_sgen_parse_box(harp_error *e, const char *spec, const char *option, char *name, size_t cap, rt_sgen_sym *y) {
  const char *eq = spec ? strchr(spec, '=') : NULL;
  char *dots = NULL, *end = NULL;
  errno = 0;
  long long lo = eq ? strtoll(eq + 1, &dots, 10) : 0;
  long long hi = dots && dots > eq + 1 && !strncmp(dots, "..", 2) ? strtoll(dots + 2, &end, 10) : 0;
  if (!eq || eq == spec || (size_t)(eq - spec) >= cap || !end || end == dots + 2 || *end || errno)
    return ut_fail(e, HARP_E_USAGE, NULL, "%s '%s': expected NAME=LO..HI (integers)", option, spec ? spec : "(null)");
  snprintf(name, cap, "%.*s", (int)(eq - spec), spec);
  *y = (rt_sgen_sym){name, lo, hi};
  return HARP_OK;
}

/* s's weights whose shape moves with the box declared at the corner hi
 * (their shapes there: the model prepared at hi) and read through a SHRINK:
 * s->text rewritten, s->moved. */
static harp_status move_weights(harp_error *e, rt_sgen *s, const int64_t *hi) {
  if (!sgw_any(s->text, s->syms, s->nsyms)) return HARP_OK;
  tiny_graph *ghi = NULL;
  tiny_symtab t;
  char *text = NULL;
  harp_status st = prepare_at(e, s, hi, &ghi, &t);
  if (!st) st = sgw_move(e, s->text, ghi, s->syms, s->nsyms, &text, &s->moved);
  tiny_graph_free(ghi);
  tiny_symtab_free(&t);
  if (st) return st;
  free(s->text);
  s->text = text;
  return HARP_OK;
}

/* s->text with the symbols its ops tie to the box's others made derived
 * (tiny_ties_text: G := 2*H, said in s->ties), and s->follows: per box
 * symbol, whether the model defines it (a tie, or a derived symbol it
 * declares): its value follows the others', checked where an input gives it.
 * The box narrowed to the bindings an exact tie accepts (tiny_dsym_snap). */
static harp_status learn_ties(harp_error *e, rt_sgen *s) {
  const char *names[64 + 1];
  int64_t lo[64 + 1], hi[64 + 1];
  char *tied = NULL;
  if (s->nsyms > 64) return HARP_OK; /* box_setup refuses it */
  for (int i = 0; i < s->nsyms; i++) names[i] = s->syms[i].name, lo[i] = s->syms[i].lo, hi[i] = s->syms[i].hi;
  if (tiny_ties_text(e, s->text, names, lo, hi, s->nsyms, &tied, s->ties, sizeof s->ties)) return e->code;
  if (tied) free(s->text), s->text = tied;
  tiny_graph *g = NULL;
  tiny_symtab box, own;
  tiny_symtab_init(&box);
  if (tiny_load_json(e, s->text, strlen(s->text), NULL, &g)) return e->code;
  harp_status st = HARP_OK;
  int64_t v;
  for (int i = 0; !st && i < s->nsyms; i++) /* a name given twice: box_setup says so */
    if (!tiny_symtab_get(&box, s->syms[i].name, &v)) st = tiny_symtab_set(e, &box, s->syms[i].name, lo[i]);
  if (!st) st = tiny_ties_drop(e, g, &box, &own); /* what g does not define is the box's own */
  for (int i = 0; !st && i < s->nsyms; i++) s->follows[i] = !tiny_symtab_get(&own, s->syms[i].name, &v);
  if (!st) tiny_symtab_free(&own);
  if (!st && tiny_dsym_snap(g, names, lo, hi, s->nsyms)) /* an exact tie's (2 G = 3 H): H's corners even */
    for (int i = 0; i < s->nsyms; i++) s->syms[i].lo = lo[i], s->syms[i].hi = hi[i];
  tiny_symtab_free(&box);
  tiny_graph_free(g);
  return st;
}

harp_status rt_sgen_compile(harp_error *e, const tiny_graph *g, const rt_sgen_sym *syms, int nsyms,
                            const rt_sgen_opts *o, rt_sgen **out) {
  *out = NULL;
  rt_sgen *s = ut_xcalloc(1, sizeof *s);
  if (!s) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  pthread_mutex_init(&s->mu, NULL);
  tiny_symtab_init(&s->symhi);
  if (o) s->o = *o;
  if (s->o.cpu) s->cpu = *s->o.cpu;
  s->nsyms = nsyms;
  s->syms = ut_xcalloc((size_t)nsyms + 1, sizeof *s->syms);
  s->follows = ut_xcalloc((size_t)nsyms + 1, sizeof *s->follows);
  int64_t *lo = ut_xcalloc((size_t)nsyms + 1, sizeof *lo), *hi = ut_xcalloc((size_t)nsyms + 1, sizeof *hi);
  s->text = tiny_write_json(g);
  harp_status st = !s->syms || !s->follows || !lo || !hi || !s->text ? ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory") : HARP_OK;
  for (int i = 0; !st && i < nsyms; i++) {
    s->syms[i] = syms[i];
    if (!(s->syms[i].name = sg_strdup(syms[i].name ? syms[i].name : ""))) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  if (!st) st = learn_ties(e, s);
  if (!st) st = box_setup(e, s, lo, hi);
  if (!st) st = move_weights(e, s, hi);
  if (!st && s->o.per_binding) s->fallback = sg_strdup("per-binding compiles were asked for");
  else if (!st) st = decide_box(e, s, lo, hi);
  free(lo);
  free(hi);
  if (st) {
    rt_sgen_free(s);
    return st;
  }
  *out = s;
  return HARP_OK;
}

/* The binding the inputs give, per symbol, into vals; every symbol must be
 * fixed by some input's shape (an input the model declares with it). */
static harp_status binding_of(harp_error *e, const rt_sgen *s, const tiny_graph *g, const ut_tensor *inputs, int ninputs,
                              int64_t *vals) {
  int *in = NULL;
  int nin = tiny_inputs(g, &in);
  tiny_symtab t;
  tiny_symtab_init(&t);
  harp_status st = nin != ninputs ? ut_fail(e, HARP_E_INPUT_MISMATCH, NULL, "%d inputs given, the model has %d", ninputs, nin)
                                  : HARP_OK;
  for (int i = 0; !st && i < nin; i++) {
    if (inputs[i].dtype != g->nodes[in[i]].dtype)
      st = ut_fail(e, HARP_E_INPUT_MISMATCH, g->nodes[in[i]].id, "input %s has the wrong dtype", g->nodes[in[i]].id);
    else if (sgw_is_moved(&s->moved, i)) /* a weight at hi, or at the binding's shape */
      st = sgw_bind_input(e, &s->moved, i, &inputs[i], &t);
    else
      st = tiny_bind_input(e, g, in[i], inputs[i].rank, inputs[i].shape, &t);
  }
  if (!st) st = tiny_dsym_bind(e, g, &t); /* an input declared at a derived size must agree with its definition */
  for (int i = 0; !st && i < s->nsyms; i++)
    if (!tiny_symtab_get(&t, s->syms[i].name, &vals[i]))
      vals[i] = s->syms[i].lo == s->syms[i].hi ? s->syms[i].lo : -1;
  for (int i = 0; !st && i < s->nsyms; i++)
    if (vals[i] < 0) st = ut_fail(e, HARP_E_UNBOUND_SYMBOL, NULL, "no input fixes the shape symbol %s", s->syms[i].name);
  tiny_symtab_free(&t);
  free(in);
  return st;
}

/* Whether vals lies in the box; else *what names the first symbol outside. */
static bool in_box(const rt_sgen *s, const int64_t *vals, char *what, size_t cap) {
  for (int i = 0; i < s->nsyms; i++)
    if (vals[i] < s->syms[i].lo || vals[i] > s->syms[i].hi) {
      snprintf(what, cap, "%s = %" PRId64 " is outside the compiled ShapeSet (%s in %" PRId64 "..%" PRId64 ")",
               s->syms[i].name, vals[i], s->syms[i].name, s->syms[i].lo, s->syms[i].hi);
      return false;
    }
  return true;
}

/* The variant compiled for vals (made now when new). */
static harp_status variant_at(harp_error *e, rt_sgen *s, const int64_t *vals, sgen_variant **out) {
  for (int i = 0; i < s->nvar; i++)
    if (!memcmp(s->var[i].vals, vals, (size_t)s->nsyms * sizeof *vals)) return *out = &s->var[i], HARP_OK;
  if (s->nvar == SGEN_MAX_VARIANTS)
    return ut_fail(e, HARP_E_LIMIT, NULL, "%d bindings compiled already: the most a ShapeSet model keeps", SGEN_MAX_VARIANTS);
  sgen_variant *v = &s->var[s->nvar];
  memset(v, 0, sizeof *v);
  v->vals = ut_xmalloc((size_t)s->nsyms * sizeof *vals + 1);
  if (!v->vals) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  memcpy(v->vals, vals, (size_t)s->nsyms * sizeof *vals);
  harp_status st = prepare_at(e, s, vals, &v->g, &v->syms);
  if (!st) st = rt_cpu_compile(e, v->g, &v->syms, &s->cpu, &v->m);
  if (st) {
    tiny_graph_free(v->g);
    tiny_symtab_free(&v->syms);
    free(v->vals);
    return st;
  }
  s->nvar++, s->objects++, s->cc_runs += !rt_cpu_cache_hit(v->m);
  *out = v;
  return HARP_OK;
}

/* Whether binding vals puts a symbol below the corner the object was
 * compared from (1, where the corners were compared from 2: raise_ones). */
static bool below_corner(const rt_sgen *s, const int64_t *vals) {
  for (int i = 0; i < s->nsyms; i++)
    if (vals[i] < s->glo[i]) return true;
  return false;
}

/* The graph of binding vals checked against the object's (kept for the next
 * run at the same binding); a binding that breaks the model fails here. */
static harp_status bound_graph(harp_error *e, rt_sgen *s, const int64_t *vals, const tiny_graph **gb) {
  if (s->gb && !memcmp(s->last, vals, (size_t)s->nsyms * sizeof *vals)) return *gb = s->gb, HARP_OK;
  tiny_graph_free(s->glast);
  s->glast = NULL, s->gb = NULL;
  if (s->quick && !below_corner(s, vals)) { /* the graph the object runs, its sizes at vals */
    if (quick_at(e, s, vals)) return e->code;
    memcpy(s->last, vals, (size_t)s->nsyms * sizeof *vals);
    return *gb = s->gb = s->gfast, HARP_OK;
  }
  tiny_graph *g;
  tiny_symtab t;
  harp_status st = prepare_at(e, s, vals, &g, &t);
  tiny_symtab_free(&t);
  if (st) st = restate(e, HARP_E_INPUT_MISMATCH, SGEN_BREAKS);
  bool bigger = false;
  if (!st && !sgq_same_graph(g, s->ghi, &bigger))
    st = ut_fail(e, HARP_E_INPUT_MISMATCH, NULL, "this binding changes the model's graph (a broadcast or fold): outside the compiled ShapeSet");
  if (!st && bigger) st = ut_fail(e, HARP_E_INPUT_MISMATCH, NULL, SGEN_LARGER);
  if (st) {
    tiny_graph_free(g);
    return st;
  }
  memcpy(s->last, vals, (size_t)s->nsyms * sizeof *vals);
  *gb = s->gb = s->glast = g;
  return HARP_OK;
}

/* The binding of inputs into vals (nsyms <= 64: box_setup), refused when
 * outside the box unless recompile_outside; *on_object: the one object
 * serves it (else a compile of its own). */
static harp_status binding_checked(harp_error *e, rt_sgen *s, const ut_tensor *inputs, int ninputs, int64_t *vals,
                                   bool *on_object) {
  const tiny_graph *g0 = s->ghi; /* the inputs read against a prepared copy: the upper corner's */
  tiny_graph *gl = NULL;
  harp_status st = HARP_OK;
  if (!g0) { /* per_binding or fallback: no corner kept */
    tiny_symtab t;
    int64_t hi[64];
    for (int i = 0; i < s->nsyms; i++) hi[i] = s->syms[i].hi;
    st = prepare_at(e, s, hi, &gl, &t);
    tiny_symtab_free(&t);
    g0 = gl;
  }
  if (!st) st = binding_of(e, s, g0, inputs, ninputs, vals);
  tiny_graph_free(gl);
  if (st) return st;
  char what[256];
  bool inside = in_box(s, vals, what, sizeof what);
  if (!inside && !s->o.recompile_outside) return ut_fail(e, HARP_E_INPUT_MISMATCH, NULL, "%s", what);
  *on_object = s->m && inside;
  if (*on_object && below_corner(s, vals)) { /* a symbol at 1: the object's when the graph is, else a compile of its own */
    const tiny_graph *gb;
    harp_error pe = {0};
    *on_object = !bound_graph(&pe, s, vals, &gb);
    harp_error_clear(&pe);
  }
  return HARP_OK;
}

harp_status rt_sgen_output_shapes(harp_error *e, rt_sgen *s, const ut_tensor *inputs, int ninputs, tiny_shape *shapes) {
  int64_t vals[64];
  bool on_object = false;
  const tiny_graph *g = NULL;
  tiny_graph *own = NULL;
  pthread_mutex_lock(&s->mu);
  harp_status st = binding_checked(e, s, inputs, ninputs, vals, &on_object);
  if (!st && on_object) st = bound_graph(e, s, vals, &g);
  else if (!st) { /* a compile of its own (not made here): the graph prepared at vals says */
    tiny_symtab t;
    st = prepare_at(e, s, vals, &own, &t);
    tiny_symtab_free(&t);
    if (st) st = restate(e, HARP_E_INPUT_MISMATCH, SGEN_BREAKS);
    g = own;
  }
  for (int k = 0; !st && k < g->noutputs; k++) shapes[k] = g->nodes[g->outputs[k]].shape;
  tiny_graph_free(own);
  pthread_mutex_unlock(&s->mu);
  return st;
}

/* One run at the binding of inputs (each weight that moved at hi). */
static harp_status run_at(harp_error *e, rt_sgen *s, const ut_tensor *inputs, int ninputs, ut_tensor *outputs,
                          const int64_t *vals, bool on_object) {
  if (on_object) {
    const tiny_graph *gb;
    if (bound_graph(e, s, vals, &gb)) return e->code;
    long long sv[RT_SGEN_MAX_GEN];
    if (gen_values(e, s, vals, sv)) return e->code;
    return rt_cpu_run_bound(e, s->m, gb, sv, inputs, ninputs, outputs);
  }
  sgen_variant *v = NULL;
  if (variant_at(e, s, vals, &v)) return e->code;
  return rt_cpu_run(e, v->m, inputs, ninputs, outputs);
}

static harp_status run_locked(harp_error *e, rt_sgen *s, const ut_tensor *inputs, int ninputs, ut_tensor *outputs) {
  int64_t vals[64]; /* nsyms <= 64: box_setup */
  bool on_object = false;
  if (binding_checked(e, s, inputs, ninputs, vals, &on_object)) return e->code;
  ut_tensor *at = NULL; /* a weight given at this binding's shape: in a table at hi */
  if (sgw_inputs(e, &s->moved, inputs, ninputs, &at)) return e->code;
  harp_status st = run_at(e, s, at, ninputs, outputs, vals, on_object);
  sgw_inputs_free(&s->moved, inputs, at, ninputs);
  return st;
}

harp_status rt_sgen_bind(harp_error *e, rt_sgen *s, const ut_tensor *inputs, int ninputs, long long *syms) {
  if (!s->m) return ut_fail(e, HARP_E_USAGE, NULL, "no one object for this ShapeSet: %s", s->fallback);
  int64_t vals[64];
  char what[256];
  pthread_mutex_lock(&s->mu);
  const tiny_graph *gb;
  harp_status st = binding_of(e, s, s->ghi, inputs, ninputs, vals);
  if (!st && !in_box(s, vals, what, sizeof what)) st = ut_fail(e, HARP_E_INPUT_MISMATCH, NULL, "%s", what);
  bool below = !st && below_corner(s, vals);
  if (!st) st = bound_graph(e, s, vals, &gb);
  if (st && below) /* the graph at 1 is not the object's */
    st = restate(e, HARP_E_INPUT_MISMATCH, "a symbol at 1, below the corner 2 the object was compared from (compiled on its own)");
  if (!st) st = gen_values(e, s, vals, syms);
  pthread_mutex_unlock(&s->mu);
  return st;
}

rt_cpu_model *rt_sgen_object(const rt_sgen *s) { return s->m; }

harp_status rt_sgen_weights(harp_error *e, const rt_sgen *s, const ut_tensor *inputs, int ninputs, ut_tensor **out) {
  return sgw_inputs(e, &s->moved, inputs, ninputs, out);
}

void rt_sgen_weights_free(const rt_sgen *s, const ut_tensor *inputs, ut_tensor *made, int ninputs) {
  sgw_inputs_free(&s->moved, inputs, made, ninputs);
}

harp_status rt_sgen_run(harp_error *e, rt_sgen *s, const ut_tensor *inputs, int ninputs, ut_tensor *outputs) {
  pthread_mutex_lock(&s->mu);
  harp_status st = run_locked(e, s, inputs, ninputs, outputs);
  pthread_mutex_unlock(&s->mu);
  return st;
}

const char *rt_sgen_fallback(const rt_sgen *s) { return s->fallback; }
int rt_sgen_objects(const rt_sgen *s) { return s->objects; }
int rt_sgen_cc_runs(const rt_sgen *s) { return s->cc_runs; }
bool rt_sgen_from_manifest(const rt_sgen *s) { return s->from_manifest; }
bool rt_sgen_quick(const rt_sgen *s) { return s->quick; }
const char *rt_sgen_source(const rt_sgen *s) { return s->m ? rt_cpu_source(s->m) : NULL; }
const char *rt_sgen_text(const rt_sgen *s) { return s->text; }

bool rt_sgen_layout_of(const rt_sgen *s, rt_sgen_layout *l) {
  if (!s->m) return false;
  *l = (rt_sgen_layout){.g = s->ghi, .syms = &s->symhi, .gen = s->gen_names, .ngen = s->ngen, .nbase = s->nbase};
  for (int i = 0; i < s->ngen; i++)
    l->lo[i] = i < s->nbase ? s->glo[s->gen_of[i]] : 1, l->hi[i] = s->gen_hi[i];
  return true;
}

/* Whether fdiv(a * v + c, k) is x at every probe b (v = gv[b][i]). */
static bool fits(long long (*gv)[RT_SGEN_MAX_GEN], int i, const int64_t *x, int np, int64_t a, int64_t c, int64_t k) {
  for (int b = 0; b < np; b++) {
    int64_t y = a * gv[b][i] + c;
    if ((y >= 0 ? y / k : -((-y + k - 1) / k)) != x[b]) return false;
  }
  return true;
}

/* A dim from its values x[0..np) at the probes (gv: the varying symbols'
 * values there): a constant, fdiv(a * v[i] + c, k) for a varying symbol
 * (a conv's or a pool's output, a Resize's), else sym -2. */
static rt_sgen_dim dim_from_probes(const rt_sgen *s, const int64_t *x, long long (*gv)[RT_SGEN_MAX_GEN], int np) {
  bool same = true;
  for (int b = 1; b < np; b++) same &= x[b] == x[0];
  if (same) return (rt_sgen_dim){-1, 0, x[0], 1};
  for (int k = 1; k <= 8; k++)
    for (int64_t a = 1; a <= 4; a++)
      for (int64_t c = 0; c <= 32; c++)
        for (int i = 0; i < s->ngen; i++)
          for (int sg = 0; sg < 2; sg++)
            if ((c || !sg) && fits(gv, i, x, np, a, sg ? -c : c, k)) return (rt_sgen_dim){i, a, sg ? -c : c, k};
  return (rt_sgen_dim){-2, 0, 0, 1};
}

harp_status rt_sgen_dim_codes(harp_error *e, const rt_sgen *s, rt_sgen_dim (*codes)[TINY_MAX_RANK]) {
  enum { NP = 6 };
  tiny_graph *g[NP] = {0};
  long long(*gv)[RT_SGEN_MAX_GEN] = ut_xcalloc(NP, sizeof *gv);
  int64_t vals[64];
  int np = 0;
  harp_status st = gv ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int b = 0; b < NP && !st; b++) { /* an interior probe that breaks the model is left out */
    tiny_symtab t;
    bool bigger = false;
    probe_at(s, b, vals);
    harp_error pe = {0};
    harp_status ps = prepare_at(&pe, s, vals, &g[np], &t);
    tiny_symtab_free(&t);
    if (!ps && sgq_same_graph(g[np], s->ghi, &bigger) && !bigger && !gen_values(&pe, s, vals, gv[np])) np++;
    else if (b < 2) st = ut_fail(e, HARP_E_INTERNAL, NULL, "the ShapeSet's corner %d does not prepare: %s", b, pe.msg);
    else tiny_graph_free(g[np]), g[np] = NULL;
  }
  for (int i = 0; !st && i < s->ghi->n; i++)
    for (int d = 0; d < s->ghi->nodes[i].shape.rank; d++) {
      int64_t x[NP] = {0};
      for (int b = 0; b < np; b++) x[b] = g[b]->nodes[i].shape.d[d].n;
      codes[i][d] = dim_from_probes(s, x, gv, np);
    }
  for (int b = 0; b < NP; b++) tiny_graph_free(g[b]);
  free(gv);
  return st;
}

void rt_sgen_free(rt_sgen *s) {
  if (!s) return;
  rt_cpu_free(s->m); /* before the graph its compile borrows */
  tiny_graph_free(s->ghi);
  tiny_symtab_free(&s->symhi);
  tiny_graph_free(s->glast);
  tiny_graph_shadow_free(s->gfast);
  for (int i = 0; i < s->nvar; i++) {
    rt_cpu_free(s->var[i].m);
    tiny_graph_free(s->var[i].g);
    tiny_symtab_free(&s->var[i].syms);
    free(s->var[i].vals);
  }
  for (int i = 0; s->syms && i < s->nsyms; i++) free((char *)s->syms[i].name);
  free(s->syms);
  free(s->follows);
  free(s->gen_names);
  free(s->gen_hi);
  free(s->gen_of);
  free(s->glo);
  free(s->last);
  free(s->fallback);
  free(s->text);
  sgw_free(&s->moved);
  pthread_mutex_destroy(&s->mu);
  free(s);
}
