/* bench_shapeset.c — `harp bench MODEL --shapeset NAME=LO..HI --bind
 * NAME=V ...` (cpu): one ShapeSet object (harp/sgen.h) against the
 * exactly-specialised object of each binding, in one process.  Each
 * binding gets random inputs (weights too).  First the new-shape cost:
 * each binding's first run on one instance of the ShapeSet object shared
 * by all (its checks included); then --repeat rounds, each running every
 * binding on an instance of each object of its own (every pool used as
 * often: a shared one would stay awake), interleaved.
 * Printed per binding: both medians, their ratio, the first run (and the
 * specialised instance's first run, a fresh instance's at every binding),
 * each also on the process's CPU clock (all threads: what other processes
 * take from this one is not counted, a loaded machine's figure), and the
 * first run's system time, page faults and the binding's check
 * (rt_sgen_bind: the model prepared at a new binding, on this thread; the
 * warm runs skip it).  With
 * --profile, then each binding's kernels on both objects (bench_profile.c,
 * the ShapeSet object's at the binding's sizes: model_run_kernel_syms),
 * matched by name, side by side.
 * Needs: cli_shapeset.c, bench_profile.c, harp/sgen.h, harp/cpu.h.
 * Gives: bench_shapeset. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench.h"
#include "harp/function.h"
#include "harp/sgen.h"
#include "util/util.h"

/* One binding: its model (inputs), its specialised object and instance,
 * the run's pointers, its times. */
typedef struct sb_bind {
  cli_model m;
  tiny_symtab syms;
  rt_cpu_model *spec;
  void *spec_inst, *gen_inst; /* the rounds' instances: one of each object per binding, pools alike */
  const void **in;
  void **outp;
  ut_tensor *outs;
  long long gsyms[RT_SGEN_MAX_GEN];
  double first_ms, first_cpu, spec_first_ms, spec_first_cpu; /* wall and process-CPU ms */
  double first_sys, first_bind;                               /* the first run's system ms, its check's ms ... */
  long first_faults;                                          /* ... and page faults (minor and major) */
  double *tg, *ts, *tgc, *tsc;                                /* the rounds' wall and CPU ms */
  kprofile pg, ps; /* --profile: the kernels of the ShapeSet object at this binding, of the specialised one */
} sb_bind;

typedef struct sb {
  rt_sgen *s;
  void *gen_inst; /* the first runs' instance of the ShapeSet object, for every binding (binding top's weights) */
  sb_bind *b;
  int n, top;     /* top: the binding of the largest symbols (a weight that moves with them is right below it) */
  double spec_compile_ms;
} sb;

static void sb_free(sb *x) {
  rt_cpu_model *gm = x->s ? rt_sgen_object(x->s) : NULL;
  if (gm) rt_cpu_instance_free(gm, x->gen_inst);
  for (int i = 0; x->b && i < x->n; i++) {
    sb_bind *b = &x->b[i];
    if (b->spec) rt_cpu_instance_free(b->spec, b->spec_inst);
    if (gm) rt_cpu_instance_free(gm, b->gen_inst);
    rt_cpu_free(b->spec);
    profile_free(&b->pg), profile_free(&b->ps);
    for (int k = 0; b->outs && k < b->m.g->noutputs; k++) ut_tensor_free(&b->outs[k]);
    free(b->outs), free(b->in), free(b->outp), free(b->tg), free(b->ts), free(b->tgc), free(b->tsc);
    cli_model_free(&b->m);
    tiny_symtab_free(&b->syms);
  }
  free(x->b);
  rt_sgen_free(x->s);
}

/* An instance of cm with b's weights (in the Function's argument order),
 * b's other inputs into b->in; s: cm is that ShapeSet's object (a weight
 * whose shape moves with the box goes in its table at the upper corner). */
static harp_status instance_of(harp_error *e, rt_cpu_model *cm, const rt_sgen *s, sb_bind *b, void **inst) {
  const fn_function *f = rt_cpu_function(cm);
  ut_tensor *params = calloc((size_t)f->nargs + 1, sizeof *params), *w = NULL;
  if (!params) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  harp_status st = s ? rt_sgen_weights(e, s, b->m.inputs, b->m.ninputs, &w) : HARP_OK;
  const ut_tensor *t = w ? w : b->m.inputs;
  int np = 0, ni = 0;
  for (int a = 0; a < f->nargs && !st; a++) {
    if (f->buffers[f->args[a]].kind == FN_PARAM) params[np++] = t[a];
    else b->in[ni++] = t[a].data;
  }
  fn_constpool cp = {0};
  if (!st) st = fn_constpool_from_tensors(e, f, params, np, &cp);
  if (s) rt_sgen_weights_free(s, b->m.inputs, w, b->m.ninputs);
  free(params);
  if (!st && !(*inst = rt_cpu_instance_new(cm, cp.data, cp.size))) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "model_init failed");
  fn_constpool_free(&cp);
  return st;
}

/* Binding i (spec "NAME=V[,NAME=V]"): its model with random inputs, and
 * its outputs. */
static harp_status bind_open(harp_error *e, cli_opts *o, const char *spec_in, sb *x, int i) {
  sb_bind *b = &x->b[i];
  harp_status st = cli_load_model_at(e, o, spec_in, &b->syms, &b->m);
  if (st) return st;
  int nout = b->m.g->noutputs;
  b->outs = calloc((size_t)nout + 1, sizeof *b->outs), b->outp = calloc((size_t)nout + 1, sizeof *b->outp);
  b->in = calloc((size_t)b->m.ninputs + 1, sizeof *b->in);
  if (!b->outs || !b->outp || !b->in) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int k = 0; k < nout && !st; k++) {
    const tiny_node *n = &b->m.g->nodes[b->m.g->outputs[k]];
    int64_t shape[TINY_MAX_RANK];
    for (int d = 0; d < n->shape.rank; d++) shape[d] = n->shape.d[d].n;
    st = ut_tensor_alloc(e, &b->outs[k], n->dtype, n->shape.rank, shape);
    if (!st) b->outp[k] = b->outs[k].data;
  }
  return st;
}

/* Binding i checked against the ShapeSet object (refused before anything
 * is compiled for it), then its specialised object and an instance. */
static harp_status bind_spec(harp_error *e, const cli_opts *o, sb *x, int i) {
  sb_bind *b = &x->b[i];
  if (rt_sgen_bind(e, x->s, b->m.inputs, b->m.ninputs, b->gsyms)) return e->code;
  rt_cpu_opts co = {.knobs = &o->knobs, .precision = o->precision};
  double t0 = ut_now_ms();
  harp_status st = rt_cpu_compile(e, b->m.g, &b->m.syms, &co, &b->spec);
  x->spec_compile_ms += ut_now_ms() - t0;
  if (!st) st = instance_of(e, rt_sgen_object(x->s), x->s, b, &b->gen_inst);
  return st ? st : instance_of(e, b->spec, NULL, b, &b->spec_inst);
}

/* The sum of b's symbols (rt_sgen_bind's values). */
static long long sum_syms(const sb_bind *b) {
  long long t = 0;
  for (int k = 0; k < RT_SGEN_MAX_GEN; k++) t += b->gsyms[k];
  return t;
}

/* Binding i's first run on the ShapeSet instance, which ran the bindings
 * before it: its checks and the run, timed, after the specialised
 * instance's first run (timed too) has touched the binding's buffers. */
static harp_status first_run(harp_error *e, sb *x, int i) {
  sb_bind *b = &x->b[i];
  rt_cpu_model *gm = rt_sgen_object(x->s);
  if (!x->gen_inst && instance_of(e, gm, x->s, &x->b[x->top], &x->gen_inst)) return e->code;
  double t0 = ut_now_ms(), c0 = ut_cpu_ms();
  int rc = rt_cpu_instance_run(b->spec, b->spec_inst, b->in, b->outp);
  b->spec_first_ms = ut_now_ms() - t0, b->spec_first_cpu = ut_cpu_ms() - c0;
  struct rusage u0, u1;
  getrusage(RUSAGE_SELF, &u0);
  t0 = ut_now_ms(), c0 = ut_cpu_ms();
  harp_status st = rc ? ut_fail(e, HARP_E_INTERNAL, NULL, "model_run returned %d", rc)
                      : rt_sgen_bind(e, x->s, b->m.inputs, b->m.ninputs, b->gsyms);
  b->first_bind = ut_now_ms() - t0;
  rc = st ? 0 : rt_cpu_instance_run_syms(gm, x->gen_inst, b->gsyms, b->in, b->outp);
  b->first_ms = ut_now_ms() - t0, b->first_cpu = ut_cpu_ms() - c0;
  getrusage(RUSAGE_SELF, &u1);
  b->first_sys = (double)(u1.ru_stime.tv_sec - u0.ru_stime.tv_sec) * 1e3 + (double)(u1.ru_stime.tv_usec - u0.ru_stime.tv_usec) / 1e3;
  b->first_faults = (u1.ru_minflt - u0.ru_minflt) + (u1.ru_majflt - u0.ru_majflt);
  return st ? st : rc ? ut_fail(e, HARP_E_INTERNAL, NULL, "model_run_syms returned %d", rc) : HARP_OK;
}

/* One timed run of binding b on the ShapeSet instance (gen) or its own:
 * its wall and process-CPU ms. */
static int timed(const sb *x, sb_bind *b, bool gen, double *ms, double *cpu) {
  double t0 = ut_now_ms(), c0 = ut_cpu_ms();
  int rc = gen ? rt_cpu_instance_run_syms(rt_sgen_object(x->s), b->gen_inst, b->gsyms, b->in, b->outp)
               : rt_cpu_instance_run(b->spec, b->spec_inst, b->in, b->outp);
  *ms = ut_now_ms() - t0, *cpu = ut_cpu_ms() - c0;
  return rc;
}

/* Every round runs every binding on both objects, which one first
 * alternating by round. */
static harp_status rounds(harp_error *e, sb *x, const bench_args *a) {
  for (long r = -a->warmup; r < a->repeat; r++)
    for (int i = 0; i < x->n; i++) {
      sb_bind *b = &x->b[i];
      double tg, ts, cg, cs;
      bool gen_first = (r & 1) == 0;
      int rc = timed(x, b, gen_first, gen_first ? &tg : &ts, gen_first ? &cg : &cs);
      rc = rc ? rc : timed(x, b, !gen_first, gen_first ? &ts : &tg, gen_first ? &cs : &cg);
      if (rc) return ut_fail(e, HARP_E_INTERNAL, NULL, "a run returned %d", rc);
      if (r >= 0) b->tg[r] = tg, b->ts[r] = ts, b->tgc[r] = cg, b->tsc[r] = cs;
    }
  return HARP_OK;
}

/* --profile: binding b's kernels on its instance of each object (each
 * instance's last run was at b, by rounds). */
static harp_status profile_bind(harp_error *e, sb *x, sb_bind *b, long repeat) {
  harp_status st = profile_kernels(e, rt_sgen_object(x->s), b->gen_inst, b->gsyms, b->in, b->outp, repeat, &b->pg);
  return st ? st : profile_kernels(e, b->spec, b->spec_inst, NULL, b->in, b->outp, repeat, &b->ps);
}

/* The kernel of p named name, or -1. */
static int kernel_named(const kprofile *p, const char *name) {
  for (int k = 0; k < p->n; k++)
    if (!strcmp(p->name[k], name)) return k;
  return -1;
}

/* The specialised kernel beside the ShapeSet object's kernel k: the one of
 * its name, else (a region named after another of its nodes) the one in
 * the same place when both objects have as many kernels and that one's
 * name is not the ShapeSet object's; -1 when none. */
static int kernel_beside(const kprofile *g, const kprofile *s, int k) {
  int j = kernel_named(s, g->name[k]);
  if (j < 0 && g->n == s->n && kernel_named(g, s->name[k]) < 0) j = k;
  return j;
}

/* Binding b's kernels, the ShapeSet object's slowest first, each beside the
 * specialised object's kernel of the same name (its region): alone and in
 * run, their ratio; JSON members ("kernels": [...]) or text lines; then the
 * specialised kernels the ShapeSet object has not. */
static void print_pair(const sb_bind *b, bool json) {
  const kprofile *g = &b->pg, *s = &b->ps;
  int *order = profile_order(g);
  if (!order) return;
  if (!json) printf("    %-28s %-12s %10s %10s %7s %10s %10s\n", "kernel", "kind", "SS ms", "spec ms", "ratio", "SS in run", "spec in run");
  for (int i = 0; i < g->n; i++) {
    int k = order[i], j = kernel_beside(g, s, k);
    double sm = j >= 0 ? s->med[j] : -1, si = j >= 0 ? s->inrun[j] : -1, r = sm > 0 ? g->med[k] / sm : 0;
    /* an object from the cache's manifest has no regions to name the kind: the specialised one's */
    const char *kind = strcmp(g->kind[k], "?") || j < 0 ? g->kind[k] : s->kind[j];
    if (json) {
      char *kn = cli_json_quote(g->name[k]), *kk = cli_json_quote(kind);
      printf("%s{\"kernel\": %s, \"kind\": %s, \"shapeset_ms\": %.6f, \"shapeset_in_run_ms\": %.6f, ", i ? ", " : ", \"kernels\": [",
             kn ? kn : "\"\"", kk ? kk : "\"\"", g->med[k], g->inrun[k]);
      char *sn = j >= 0 ? cli_json_quote(s->name[j]) : NULL;
      if (j >= 0)
        printf("\"specialised_kernel\": %s, \"specialised_ms\": %.6f, \"specialised_in_run_ms\": %.6f, \"ratio\": %.4f}",
               sn ? sn : "\"\"", sm, si, r);
      else printf("\"specialised_kernel\": null, \"specialised_ms\": null, \"specialised_in_run_ms\": null, \"ratio\": null}");
      free(kn), free(kk), free(sn);
    } else if (j >= 0) {
      char nm[80];
      if (strcmp(g->name[k], s->name[j])) snprintf(nm, sizeof nm, "%s|%s", g->name[k], s->name[j]);
      else snprintf(nm, sizeof nm, "%s", g->name[k]);
      printf("    %-28.28s %-12.12s %10.4f %10.4f %7.3f %10.4f %10.4f\n", nm, kind, g->med[k], sm, r, g->inrun[k], si);
    } else {
      printf("    %-28.28s %-12.12s %10.4f %10s %7s %10.4f %10s\n", g->name[k], kind, g->med[k], "-", "-", g->inrun[k], "-");
    }
  }
  if (json && g->n) printf("]");
  for (int j = 0; j < s->n && !json; j++)
    if (kernel_named(g, s->name[j]) < 0 && !(g->n == s->n && kernel_named(s, g->name[j]) < 0))
      printf("    %-28.28s %-12.12s %10s %10.4f %7s %10s %10.4f\n", s->name[j], s->kind[j], "-", s->med[j], "-", "-", s->inrun[j]);
  double gs = 0, ss = 0, gi = 0, si = 0;
  for (int k = 0; k < g->n; k++) gs += g->med[k], gi += g->inrun[k];
  for (int k = 0; k < s->n; k++) ss += s->med[k], si += s->inrun[k];
  if (json) printf(", \"kernels_sum_ms\": {\"shapeset\": %.6f, \"specialised\": %.6f, \"shapeset_in_run\": %.6f, "
                   "\"specialised_in_run\": %.6f}", gs, ss, gi, si);
  else printf("    %-41s %10.4f %10.4f %7.3f %10.4f %10.4f (%d / %d kernels)\n", "sum", gs, ss, ss > 0 ? gs / ss : 0, gi, si, g->n, s->n);
  free(order);
}

static void print_result(const cli_opts *o, const bench_args *a, sb *x, double sgen_ms) {
  printf("%s [cpu, ShapeSet object: %d object(s), %d built by the C compiler, %.1f ms; specialised: %d objects, %.1f ms]\n",
         o->model, rt_sgen_objects(x->s), rt_sgen_cc_runs(x->s), sgen_ms, x->n, x->spec_compile_ms);
  for (int i = 0; i < x->n; i++) {
    sb_bind *b = &x->b[i];
    double g = cli_sorted_median(b->tg, a->repeat), s = cli_sorted_median(b->ts, a->repeat);
    double gc = cli_sorted_median(b->tgc, a->repeat), sc = cli_sorted_median(b->tsc, a->repeat);
    if (a->json)
      printf("{\"model\": \"%s\", \"bind\": \"%s\", \"shapeset_ms\": %.6f, \"specialised_ms\": %.6f, \"ratio\": %.4f, "
             "\"first_run_ms\": %.6f, \"shapeset_cpu_ms\": %.6f, \"specialised_cpu_ms\": %.6f, \"first_run_cpu_ms\": %.6f, "
             "\"specialised_first_run_ms\": %.6f, \"specialised_first_run_cpu_ms\": %.6f, \"first_run_sys_ms\": %.3f, "
             "\"first_run_faults\": %ld, \"first_run_bind_ms\": %.3f",
             o->model, a->binds[i], g, s, s > 0 ? g / s : 0, b->first_ms, gc, sc, b->first_cpu, b->spec_first_ms,
             b->spec_first_cpu, b->first_sys, b->first_faults, b->first_bind);
    else
      printf("  %-16s ShapeSet %.4f ms, specialised %.4f ms (x%.3f); first run at this shape %.4f ms (+%.4f; cpu +%.4f, "
             "sys %.2f, %ld faults, check %.2f), specialised instance's first %.4f ms\n",
             a->binds[i], g, s, s > 0 ? g / s : 0, b->first_ms, b->first_ms - g, b->first_cpu - gc, b->first_sys,
             b->first_faults, b->first_bind, b->spec_first_ms);
    if (a->profile) print_pair(b, a->json);
    if (a->json) printf("}\n");
  }
}

int bench_shapeset(cli_opts *o, const bench_args *a) {
  harp_error e = {0};
  sb x = {0};
  o->random_inputs = true;
  if (a->nbinds < 1 || a->nbinds > 64) return cli_usage_error("bench", "--shapeset needs 1 to 64 --bind bindings");
  x.n = a->nbinds;
  x.b = calloc((size_t)x.n, sizeof *x.b);
  harp_status st = x.b ? HARP_OK : ut_fail(&e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0; i < x.n && !st; i++) {
    sb_bind *b = &x.b[i];
    b->tg = calloc((size_t)a->repeat, sizeof(double)), b->ts = calloc((size_t)a->repeat, sizeof(double));
    b->tgc = calloc((size_t)a->repeat, sizeof(double)), b->tsc = calloc((size_t)a->repeat, sizeof(double));
    if (!b->tg || !b->ts || !b->tgc || !b->tsc) st = ut_fail(&e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  for (int i = 0; i < x.n && !st; i++) st = bind_open(&e, o, a->binds[i], &x, i);
  double t0 = ut_now_ms();
  if (!st) st = cli_shapeset_compile(&e, o, &x.b[0].m, &x.s);
  double sgen_ms = ut_now_ms() - t0;
  if (!st && !rt_sgen_object(x.s))
    st = ut_fail(&e, HARP_E_UNSUPPORTED, NULL, "no one object for this ShapeSet: %s", rt_sgen_fallback(x.s));
  for (int i = 0; i < x.n && !st; i++) st = bind_spec(&e, o, &x, i);
  for (int i = 0; i < x.n && !st; i++) x.top = sum_syms(&x.b[i]) > sum_syms(&x.b[x.top]) ? i : x.top;
  for (int i = 0; i < x.n && !st; i++) st = first_run(&e, &x, i);
  if (!st) st = rounds(&e, &x, a);
  for (int i = 0; i < x.n && !st && a->profile; i++) st = profile_bind(&e, &x, &x.b[i], a->repeat);
  if (!st) print_result(o, a, &x, sgen_ms);
  sb_free(&x);
  return st ? cli_report(&e) : 0;
}
