/* bench_profile.c — `harp bench --profile` (each kernel or launch timed and
 * listed, slowest first) and `harp bench --bind` (one GPU session over many
 * shape bindings).
 * Needs: cli.c, harp/cpu.h, harp/gpu.h.  Gives: bench.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "harp/function.h"
#include "harp/region.h"

void profile_free(kprofile *p) {
  free(p->name), free(p->kind), free(p->region), free(p->med), free(p->inrun);
  memset(p, 0, sizeof *p);
}

static harp_status profile_alloc(harp_error *e, kprofile *p, int n) {
  p->n = n;
  p->name = calloc((size_t)n + 1, sizeof *p->name);
  p->kind = calloc((size_t)n + 1, sizeof *p->kind);
  p->region = calloc((size_t)n + 1, sizeof *p->region);
  p->med = calloc((size_t)n + 1, sizeof *p->med);
  if (p->name && p->kind && p->region && p->med) return HARP_OK;
  profile_free(p);
  return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
}

/* Kernel k of cm once into *ms (at the binding syms of a ShapeSet object,
 * NULL: the object's own sizes); its failure as an error naming it. */
static harp_status time_kernel(harp_error *e, rt_cpu_model *cm, void *inst, const long long *syms, const void **in,
                               void **outp, int k, double *ms) {
  double t0 = cli_now_ms();
  int code = syms ? rt_cpu_instance_run_kernel_syms(cm, inst, syms, k, in, outp)
                  : rt_cpu_instance_run_kernel(cm, inst, k, in, outp);
  *ms = cli_now_ms() - t0;
  if (!code) return HARP_OK;
  const char *name = rt_cpu_function(cm)->kernels[k].name;
  return ut_fail(e, HARP_E_INVALID_ARG, name, "kernel %s failed with %d", name, code);
}

/* Each kernel in its place in `repeat` whole runs (the kernels one after
 * the other, as model_run calls them: its inputs and weights where the run
 * left them in the caches): p->inrun. */
static harp_status kernels_in_run(harp_error *e, rt_cpu_model *cm, void *inst, const long long *syms, const void **in,
                                  void **outp, long repeat, kprofile *p) {
  int nk = p->n;
  double *run = calloc((size_t)repeat * (size_t)nk + 1, sizeof *run);
  if (!run || !(p->inrun = calloc((size_t)nk + 1, sizeof *p->inrun))) {
    free(run);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  harp_status st = HARP_OK;
  for (long r = 0; r < repeat && !st; r++)
    for (int k = 0; k < nk && !st; k++) st = time_kernel(e, cm, inst, syms, in, outp, k, &run[(size_t)k * (size_t)repeat + (size_t)r]);
  for (int k = 0; k < nk && !st; k++) p->inrun[k] = cli_sorted_median(run + (size_t)k * (size_t)repeat, repeat);
  free(run);
  return st;
}

/* CPU: each kernel in its place in repeat whole runs, then each kernel
 * alone, repeat times on end (warm caches).  The two differ where a run
 * streams more than the caches hold. */
harp_status profile_kernels(harp_error *e, rt_cpu_model *cm, void *inst, const long long *syms, const void **in,
                            void **outp, long repeat, kprofile *p) {
  const fn_function *f = rt_cpu_function(cm);
  const rg_partition *part = f->part;
  double *t = calloc((size_t)repeat, sizeof *t);
  if (!t || profile_alloc(e, p, f->nkernels)) {
    free(t);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  harp_status st = kernels_in_run(e, cm, inst, syms, in, outp, repeat, p);
  for (int k = 0; k < p->n && !st; k++) {
    for (long r = 0; r < repeat && !st; r++) st = time_kernel(e, cm, inst, syms, in, outp, k, &t[r]);
    const fn_kernel *K = &f->kernels[k];
    const rg_region *R = part && K->region >= 0 && K->region < part->n ? &part->regions[K->region] : NULL;
    p->name[k] = K->name;
    p->kind[k] = !R ? "?" : R->pattern ? R->pattern : R->kind ? R->kind : "?";
    p->med[k] = st ? 0 : cli_sorted_median(t, repeat);
  }
  free(t);
  return st;
}

harp_status profile_launches(harp_error *e, rt_gpu_model *gm, long warmup, long repeat, kprofile *p) {
  if (profile_alloc(e, p, rt_gpu_nlaunches(gm))) return e->code;
  for (int i = 0; i < p->n; i++) {
    rt_gpu_launch_info(gm, i, &p->name[i], &p->kind[i]);
    p->region[i] = rt_gpu_launch_region(gm, i);
  }
  return rt_gpu_profile(e, gm, (int)warmup, (int)repeat, p->med);
}

/* Row i (kernel k, share in %) as a JSON object of the "kernels" array. */
static void json_row(const kprofile *p, int i, int k, double share) {
  char *kn = cli_json_quote(p->name[k]), *rn = cli_json_quote(p->kind[k]);
  char *gn = p->region[k] ? cli_json_quote(p->region[k]) : NULL;
  printf("%s{\"kernel\": %s, ", i ? ", " : "\"kernels\": [", kn ? kn : "\"\"");
  if (gn) printf("\"region\": %s, ", gn);
  printf("\"kind\": %s, \"median_ms\": %.6f, ", rn ? rn : "\"\"", p->med[k]);
  if (p->inrun) printf("\"in_run_ms\": %.6f, ", p->inrun[k]);
  printf("\"share\": %.4f}", share / 100);
  free(kn), free(rn), free(gn);
}

/* Row i (kernel k) as a line of the table, the header first. */
static void text_row(const kprofile *p, int i, int k, double share) {
  char nm[160];
  if (p->region[k]) snprintf(nm, sizeof nm, "%s (%s)", p->name[k], p->region[k]);
  else snprintf(nm, sizeof nm, "%s", p->name[k]);
  if (i == 0 && p->inrun) printf("%-32s %-12s %10s %10s %7s\n", "kernel (region)", "kind", "alone ms", "in run ms", "share");
  else if (i == 0) printf("%-32s %-12s %10s %7s\n", "kernel (region)", "kind", "median ms", "share");
  if (p->inrun) printf("%-32.32s %-12.12s %10.4f %10.4f %6.1f%%\n", nm, p->kind[k], p->med[k], p->inrun[k], share);
  else printf("%-32.32s %-12.12s %10.4f %6.1f%%\n", nm, p->kind[k], p->med[k], share);
}

static void print_sums(const kprofile *p, bool json, double sum, double runsum) {
  if (json) {
    printf("%s\"kernels_sum_ms\": %.6f", p->n ? "], " : "", sum);
    if (p->inrun) printf(", \"kernels_in_run_sum_ms\": %.6f", runsum);
  } else if (p->inrun) {
    printf("%-45s %10.4f %10.4f (%d kernels)\n", "sum", sum, runsum, p->n);
  } else {
    printf("%-45s %10.4f (%d kernels)\n", "sum", sum, p->n);
  }
}

int *profile_order(const kprofile *p) {
  int *order = calloc((size_t)p->n + 1, sizeof *order);
  if (!order) return NULL;
  for (int i = 0; i < p->n; i++) order[i] = i;
  for (int i = 1; i < p->n; i++) /* insertion sort: a model has few kernels */
    for (int j = i; j > 0 && p->med[order[j]] > p->med[order[j - 1]]; j--) {
      int x = order[j];
      order[j] = order[j - 1], order[j - 1] = x;
    }
  return order;
}

void profile_print(const kprofile *p, bool json) {
  int *order = profile_order(p);
  double sum = 0, runsum = 0;
  if (!order) return;
  for (int i = 0; i < p->n; i++) sum += p->med[i], runsum += p->inrun ? p->inrun[i] : 0;
  for (int i = 0; i < p->n; i++) {
    double share = sum > 0 ? 100.0 * p->med[order[i]] / sum : 0;
    (json ? json_row : text_row)(p, i, order[i], share);
  }
  print_sums(p, json, sum, runsum);
  free(order);
}

/* ---- --bind: one GPU session, many bindings ------------------------------------------ */
typedef struct session {
  cli_model base, *ms;
  tiny_symtab *bs;
  int n;
  rt_gpu_session *s;
  double *times;
  char *fixbuf;       /* --fix's lists, copied and cut at the commas */
  char *hibuf;        /* the bindings, copied and cut: the names of cli_opts.bind_names */
  const char **fixed; /* the names in fixbuf */
  int nfixed;
} session;

static void session_free(session *x) {
  rt_gpu_session_free(x->s);
  for (int i = 0; x->ms && x->bs && i < x->n; i++) {
    cli_model_free(&x->ms[i]);
    tiny_symtab_free(&x->bs[i]);
  }
  free(x->ms);
  free(x->bs);
  free(x->times);
  free(x->fixbuf);
  free(x->hibuf);
  free(x->fixed);
  cli_model_free(&x->base);
}

/* --fix's lists (a->fixes, each SYM[,SYM...]) cut into x->fixed. */
static harp_status session_fixed(harp_error *e, const bench_args *a, session *x) {
  size_t len = 1;
  for (int i = 0; i < a->nfixes; i++) len += strlen(a->fixes[i]) + 1;
  if (!(x->fixbuf = calloc(len, 1)) || !(x->fixed = calloc(len, sizeof *x->fixed))) /* a name per 2 bytes at most */
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  char *p = x->fixbuf;
  for (int i = 0; i < a->nfixes; i++) {
    strcpy(p, a->fixes[i]);
    for (char *tok = p, *end;; tok = end + 1) { /* each name up to the next comma */
      end = tok + strcspn(tok, ",");
      bool last = !*end;
      *end = '\0';
      if (!*tok) return ut_fail(e, HARP_E_USAGE, NULL, "--fix %s: an empty symbol name", a->fixes[i]);
      x->fixed[x->nfixed++] = tok;
      if (last) break;
    }
    p += strlen(a->fixes[i]) + 1;
  }
  return HARP_OK;
}

/* The bindings' symbols and each one's largest value among them into
 * o->bind_names / bind_hi (the names in x->hibuf), for the import of the
 * session's unbound model (an ONNX table sliced by S). */
static harp_status session_his(harp_error *e, cli_opts *o, const bench_args *a, session *x) {
  size_t len = 1;
  for (int i = 0; i < a->nbinds; i++) len += strlen(a->binds[i]) + 1;
  if (!(x->hibuf = calloc(len, 1))) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  char *p = x->hibuf;
  o->nbind_hi = 0;
  for (int i = 0; i < a->nbinds; i++) {
    strcpy(p, a->binds[i]);
    char *save = NULL;
    for (char *tok = strtok_r(p, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
      char *eq = strchr(tok, '='), *end = NULL;
      long long v = eq ? strtoll(eq + 1, &end, 10) : -1;
      if (!eq || end == eq + 1 || v <= 0) continue; /* session_bind says what is wrong with it */
      *eq = '\0';
      int k = 0;
      while (k < o->nbind_hi && strcmp(o->bind_names[k], tok)) k++;
      if (k == o->nbind_hi && k < CLI_MAX_LIST) o->bind_names[o->nbind_hi] = tok, o->bind_hi[o->nbind_hi++] = v;
      else if (k < o->nbind_hi && v > o->bind_hi[k]) o->bind_hi[k] = v;
    }
    p += strlen(a->binds[i]) + 1;
  }
  return HARP_OK;
}

/* Binding i: --sym, then its own symbols, then the model's defaults; the
 * model loaded for it (random inputs) and run once (its inputs uploaded). */
static harp_status session_bind(harp_error *e, cli_opts *o, const char *spec_in, session *x, int i) {
  harp_status st = cli_load_model_at(e, o, spec_in, &x->bs[i], &x->ms[i]);
  if (st) return st;
  ut_tensor *outs = calloc((size_t)x->ms[i].g->noutputs + 1, sizeof *outs);
  if (!outs) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  st = rt_gpu_session_run(e, x->s, &x->ms[i].syms, x->ms[i].inputs, x->ms[i].ninputs, outs);
  for (int k = 0; k < x->ms[i].g->noutputs; k++) ut_tensor_free(&outs[k]);
  free(outs);
  return st;
}

/* The session over the unbound model, every binding run once. */
static harp_status session_open(harp_error *e, cli_opts *o, const bench_args *a, const cli_plans *pl, session *x) {
  x->n = a->nbinds;
  x->ms = calloc((size_t)x->n, sizeof *x->ms);
  x->bs = calloc((size_t)x->n, sizeof *x->bs);
  x->times = calloc((size_t)a->repeat, sizeof *x->times);
  tiny_symtab_init(&x->base.syms);
  tiny_symtab_init(&x->base.defaults);
  if (!x->ms || !x->bs || !x->times) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  const char *target;
  if (cli_gpu_target(e, o, NULL, &target)) return e->code;
  /* a size that is an expression of the bindings' symbols (H / 2) lowers as a derived symbol, not as its value at
   * the defaults, which the other bindings' sizes would contradict.  A model whose sizes do not lower so (a derived
   * size meeting a fixed one) has no one session for its bindings: an error, located by the lowering. */
  o->derive = true;
  harp_error de = {0};
  harp_status st = session_his(&de, o, a, x);
  if (!st) st = cli_load_graph(&de, o, &x->base, &x->base.defaults);
  o->derive = false;
  o->nbind_hi = 0; /* each binding's own import: its sizes as given */
  if (st) {
    *e = de;
    if (st != HARP_E_NO_MEMORY)
      snprintf(e->msg, sizeof e->msg, "%.900s (harp bench --bind: the model lowered once for all its bindings)", de.msg);
    return st;
  }
  if (session_fixed(e, a, x)) return e->code;
  rt_gpu_opts go = {.knobs = &o->knobs, .target = target, .graphs = a->graphs, .plan_overrides = pl->ov,
                    .nplan_overrides = pl->n, .precision = o->precision, .fixed = x->fixed, .nfixed = x->nfixed};
  if (rt_gpu_session_new(e, x->base.g, &go, &x->s)) return e->code;
  for (int i = 0; i < x->n; i++)
    if (session_bind(e, o, a->binds[i], x, i)) return e->code;
  return HARP_OK;
}

static void session_print(const cli_opts *o, const bench_args *a, const session *x) {
  double median = cli_sorted_median(x->times, a->repeat), *t = x->times;
  long repeat = a->repeat;
  rt_gpu_session_stats st;
  rt_gpu_session_stats_get(x->s, &st);
  if (a->json)
    printf("{\"model\": \"%s\", \"backend\": \"cuda\", \"bindings\": %d, \"graphs\": %s, \"repeat\": %ld, "
           "\"warmup\": %ld, \"median_ms\": %.6f, \"min_ms\": %.6f, \"max_ms\": %.6f, \"session\": {\"clusters\": %d, "
           "\"builds\": %d, \"captures\": %d, \"instantiations\": %d, \"updates\": %d, \"replays\": %d, "
           "\"evictions\": %d, \"box_builds\": %d, \"box_fallbacks\": %d, \"box_learned\": %d}}\n",
           o->model, x->n, a->graphs ? "true" : "false", repeat, a->warmup, median, t[0], t[repeat - 1], st.clusters,
           st.builds, st.captures, st.instantiations, st.updates, st.replays, st.evictions, st.box_builds, st.box_fallbacks, st.box_learned);
  else
    printf("%s [cuda, %d bindings in turn%s]: median %.3f ms per run over %ld rounds (min %.3f, max %.3f); "
           "%d ShapeSets (%d served by one build), %d models built, graphs: %d captured, %d instantiated, %d updated, %d replays\n",
           o->model, x->n, a->graphs ? ", graphs" : "", median, repeat, t[0], t[repeat - 1], st.clusters, st.box_builds,
           st.builds, st.captures, st.instantiations, st.updates, st.replays);
  for (int i = 0; i < x->n; i++) { /* a ShapeSet built per binding: why, once (its first binding) */
    const char *why = NULL, *other = NULL;
    if (!rt_gpu_session_model(x->s, &x->ms[i].syms) || rt_gpu_session_box(x->s, &x->ms[i].syms, &why) || !why || !why[0])
      continue; /* evicted (no record), or one build */
    bool seen = false; /* the same box (its reason, the same string) at an earlier binding */
    for (int k = 0; k < i && !seen; k++) seen = !rt_gpu_session_box(x->s, &x->ms[k].syms, &other) && other == why;
    if (!seen) fprintf(stderr, "harp: the ShapeSet of --bind %s builds per binding: %s\n", a->binds[i], why);
  }
}

/* Every binding runs once (uploads its inputs), then each round launches
 * every binding in turn, waiting for each, so host overhead (graph updates
 * included) is in the time. */
int bench_session(cli_opts *o, const bench_args *a, const cli_plans *pl) {
  harp_error e = {0};
  session x;
  memset(&x, 0, sizeof x);
  harp_status st = session_open(&e, o, a, pl, &x);
  for (long r = -a->warmup; r < a->repeat && !st; r++) {
    double t0 = cli_now_ms();
    for (int i = 0; i < x.n && !st; i++) st = rt_gpu_session_launch(&e, x.s, &x.ms[i].syms, true);
    if (r >= 0) x.times[r] = (cli_now_ms() - t0) / x.n;
  }
  if (!st) session_print(o, a, &x);
  session_free(&x);
  return st ? cli_report(&e) : 0;
}
