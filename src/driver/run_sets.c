/* run_sets.c — `harp run MODEL [options] --next [--input|--shape|--sym]...
 * --next ...`: several input sets in one process.  Set 0 is the options
 * before the first --next; each --next starts another set, which takes the
 * shared options of set 0 with its own --input, --shape and --sym instead.
 * The model compiles once (--backend cpu): for the ShapeSet of --shapeset,
 * else for the box the sets span (a symbol whose value differs between
 * sets ranges over its values' min..max; an ONNX model's INPUT:AXIS whose
 * size does); every set's binding is checked before any set runs, and set
 * k's outputs go to DIR/k/.
 * Needs: cli_shapeset.c (cli_shapeset_compile), harp/sgen.h, harp/cpu.h.
 * Gives: cli_run_sets_count, cli_run_sets, cli_run_write_outputs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "harp/cpu.h"
#include "harp/onnx.h"
#include "harp/sgen.h"
#include "util/util.h"

#define RS_MAX_SETS 64

typedef struct rs_set {
  cli_opts o;
  cli_model m;
  ut_tensor *outs;
  char **argv; /* the set's own command line (set 0: the given one's head) */
  int argc;
  char out_dir[4096];
} rs_set;

typedef struct rs {
  rs_set set[RS_MAX_SETS];
  int n;
  char box[CLI_MAX_LIST][CLI_NAME_MAX + 48]; /* the derived --shapeset boxes */
  int nbox;
} rs;

/* Whether a is a set's own option (--input, --shape, --sym; "--sym=V" too);
 * *inline_v: its value is in a itself. */
static bool own_option(const char *a, bool *inline_v) {
  static const char *const own[] = {"--input", "--shape", "--sym"};
  for (int k = 0; k < 3; k++) {
    size_t n = strlen(own[k]);
    if (!strncmp(a, own[k], n) && (!a[n] || a[n] == '=')) {
      *inline_v = a[n] == '=';
      return true;
    }
  }
  return false;
}

int cli_run_sets_count(int argc, char **argv) {
  int n = 1;
  for (int i = 1; i < argc; i++) n += !strcmp(argv[i], "--next");
  return n;
}

/* Set k's command line into x->set[k]: set 0 the head of argv (up to the
 * first --next); set k >= 1 the head without its own options, then the k-th
 * segment, which may hold own options only; 0 or a usage error's code. */
static int split_sets(rs *x, int argc, char **argv) {
  int start[RS_MAX_SETS + 1], n = 0;
  start[n++] = 1;
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--next")) {
      if (n >= RS_MAX_SETS) return cli_usage_error("run", "at most %d input sets (--next)", RS_MAX_SETS);
      start[n++] = i + 1;
    }
  start[n] = argc + 1;
  x->n = n;
  for (int k = 0; k < n; k++) {
    rs_set *s = &x->set[k];
    if (!(s->argv = calloc((size_t)argc + 1, sizeof *s->argv))) return cli_usage_error("run", "out of memory");
    s->argv[s->argc++] = argv[0];
    for (int i = 1; i < start[1] - 1; i++) {
      bool inl;
      bool own = own_option(argv[i], &inl);
      if (k == 0 || !own) s->argv[s->argc++] = argv[i];
      if (own && !inl && i + 1 < start[1] - 1) {
        if (k == 0) s->argv[s->argc++] = argv[i + 1];
        i++;
      }
    }
    if (k && start[k + 1] - 1 == start[k]) return cli_usage_error("run", "--next starts input set %d with no --input, --shape or --sym", k);
    for (int i = start[k]; k && i < start[k + 1] - 1; i++) {
      bool inl;
      if (!own_option(argv[i], &inl))
        return cli_usage_error("run", "input set %d (after --next) takes only --input, --shape and --sym, not '%s'", k, argv[i]);
      s->argv[s->argc++] = argv[i];
      if (!inl && i + 1 < start[k + 1] - 1) s->argv[s->argc++] = argv[++i];
    }
  }
  return 0;
}

/* e's message as input set k's ("input set 2 (after --next): ..."). */
static harp_status name_set(harp_error *e, int k) {
  char msg[sizeof e->msg + 64];
  snprintf(msg, sizeof msg, "input set %d%s: %s", k, k ? " (after --next)" : " (before --next)", e->msg);
  memcpy(e->msg, msg, sizeof e->msg - 1);
  e->msg[sizeof e->msg - 1] = 0;
  return e->code;
}

/* Each --sym whose value differs between the sets, over its min..max,
 * appended to x's box (an ONNX model's dim_param bound by --sym). */
static harp_status box_given_syms(rs *x) {
  const tiny_symtab *t0 = &x->set[0].o.syms;
  for (int i = 0; i < t0->n && x->nbox < CLI_MAX_LIST; i++) {
    int64_t lo = t0->values[i], hi = lo, v;
    for (int k = 1; k < x->n; k++)
      if (tiny_symtab_get(&x->set[k].o.syms, t0->names[i], &v)) lo = v < lo ? v : lo, hi = v > hi ? v : hi;
    if (lo != hi) snprintf(x->box[x->nbox++], sizeof x->box[0], "%s=%lld..%lld", t0->names[i], (long long)lo, (long long)hi);
  }
  return HARP_OK;
}

/* An ONNX model's box: each INPUT:AXIS whose size (--shape, the --input
 * files) differs between the sets, over its min..max; then each --sym. */
static harp_status box_onnx(harp_error *e, rs *x) {
  onnx_shape *sh[RS_MAX_SETS] = {0};
  int ns[RS_MAX_SETS] = {0};
  harp_status st = HARP_OK;
  for (int k = 0; k < x->n && !st; k++) st = cli_given_shapes(e, &x->set[k].o, &sh[k], &ns[k]);
  for (int i = 0; !st && i < ns[0]; i++)
    for (int d = 0; d < sh[0][i].rank && x->nbox < CLI_MAX_LIST; d++) {
      int64_t lo = sh[0][i].dims[d], hi = lo;
      for (int k = 1; k < x->n; k++)
        for (int j = 0; j < ns[k]; j++)
          if (!strcmp(sh[k][j].name, sh[0][i].name) && sh[k][j].rank == sh[0][i].rank) {
            lo = sh[k][j].dims[d] < lo ? sh[k][j].dims[d] : lo;
            hi = sh[k][j].dims[d] > hi ? sh[k][j].dims[d] : hi;
            break;
          }
      bool seen = false; /* a --shape and a file of the same input: one box */
      char b[sizeof x->box[0]];
      snprintf(b, sizeof b, "%s:%d=%lld..%lld", sh[0][i].name, d, (long long)lo, (long long)hi);
      for (int q = 0; q < x->nbox; q++) seen |= !strcmp(x->box[q], b);
      if (lo != hi && !seen) memcpy(x->box[x->nbox++], b, sizeof b);
    }
  for (int k = 0; k < x->n; k++) free(sh[k]);
  return st ? st : box_given_syms(x);
}

/* A .json or .harp model's box: each symbol whose binding differs between
 * the sets (each set's model loaded at its binding), over its min..max. */
static harp_status box_syms(harp_error *e, rs *x) {
  harp_status st = HARP_OK;
  for (int k = 0; k < x->n && !st; k++)
    if (cli_load_model(e, &x->set[k].o, true, &x->set[k].m)) st = name_set(e, k);
  const tiny_symtab *t0 = st ? NULL : &x->set[0].m.syms;
  for (int i = 0; t0 && i < t0->n && x->nbox < CLI_MAX_LIST; i++) {
    int64_t lo = t0->values[i], hi = lo;
    for (int k = 1; k < x->n; k++) {
      const tiny_symtab *t = &x->set[k].m.syms;
      for (int j = 0; j < t->n; j++)
        if (!strcmp(t->names[j], t0->names[i])) {
          lo = t->values[j] < lo ? t->values[j] : lo;
          hi = t->values[j] > hi ? t->values[j] : hi;
        }
    }
    if (lo != hi)
      snprintf(x->box[x->nbox++], sizeof x->box[0], "%s=%lld..%lld", t0->names[i], (long long)lo, (long long)hi);
  }
  for (int k = 0; k < x->n; k++) cli_model_free(&x->set[k].m);
  return st;
}

/* Without --shapeset: the box the sets span, given to every set as its
 * --shapeset (none: the sets share one binding). */
static harp_status derive_box(harp_error *e, rs *x) {
  const char *dot = strrchr(x->set[0].o.model, '.');
  harp_status st = dot && !strcmp(dot, ".onnx") ? box_onnx(e, x) : box_syms(e, x);
  for (int k = 0; k < x->n && !st; k++)
    for (int q = 0; q < x->nbox; q++) x->set[k].o.shapesets[x->set[k].o.nshapesets++] = x->box[q];
  if (!st && x->nbox && x->set[0].o.time_stages) {
    fprintf(stderr, "harp: sets: the box they span:");
    for (int q = 0; q < x->nbox; q++) fprintf(stderr, " --shapeset %s", x->box[q]);
    fprintf(stderr, "\n");
  }
  return st;
}

/* Whether a and b bind the same symbols to the same values. */
static bool same_binding(const tiny_symtab *a, const tiny_symtab *b) {
  int64_t v;
  for (int i = 0; i < a->n; i++)
    if (!tiny_symtab_get(b, a->names[i], &v) || v != a->values[i]) return false;
  return a->n == b->n;
}

/* Every set's model loaded (with its ShapeSet, when one is given or
 * derived); *alone: an ONNX import needed a set's ShapeSet dims as numbers
 * (cli_opts.shapeset_why), so each set compiles at its binding. */
static harp_status load_all(harp_error *e, rs *x, bool *alone) {
  *alone = false;
  for (int k = 0; k < x->n; k++) {
    rs_set *t = &x->set[k];
    if (cli_load_model(e, &t->o, true, &t->m)) return name_set(e, k);
    if (t->m.flow)
      return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "a model with run-time control flow runs one input set per process");
    if (!(t->outs = calloc((size_t)t->m.g->noutputs + 1, sizeof *t->outs))) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    *alone |= t->o.shapeset_why[0] != 0;
  }
  return HARP_OK;
}

/* One object for every set (s: the ShapeSet's; cm: the sets share one
 * binding), each set's binding checked against it before any runs. */
static harp_status compile_checked(harp_error *e, rs *x, rt_sgen **s, rt_cpu_model **cm) {
  const cli_opts *o = &x->set[0].o;
  rt_cpu_opts co = {.knobs = &o->knobs, .precision = o->precision, .max_memory = o->max_memory};
  harp_status st = o->nshapesets ? cli_shapeset_compile(e, o, &x->set[0].m, s)
                                 : rt_cpu_compile(e, x->set[0].m.g, &x->set[0].m.syms, &co, cm);
  for (int k = 0; k < x->n && !st; k++) {
    rs_set *t = &x->set[k];
    tiny_shape *shapes = calloc((size_t)t->m.g->noutputs + 1, sizeof *shapes);
    if (!shapes) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    else if (*s && rt_sgen_output_shapes(e, *s, t->m.inputs, t->m.ninputs, shapes)) st = name_set(e, k);
    else if (!*s && !same_binding(&t->m.syms, &x->set[0].m.syms)) /* no box derived: one binding for all */
      st = (ut_fail(e, HARP_E_INPUT_MISMATCH, NULL, "its binding is not input set 0's, and no --shapeset covers both"), name_set(e, k));
    free(shapes);
  }
  return st;
}

/* Every set loaded, checked against one compiled object, then run, each
 * set's outputs written to its folder after its run. */
static harp_status run_all(harp_error *e, rs *x, rt_sgen **s, rt_cpu_model **cm) {
  bool alone;
  harp_status st = load_all(e, x, &alone);
  if (!st && !alone) st = compile_checked(e, x, s, cm);
  for (int k = 0; k < x->n && !st; k++) {
    rs_set *t = &x->set[k];
    if (alone) st = cli_shapeset_per_binding(e, &t->o, &t->m, t->outs);
    else if (*s) st = rt_sgen_run(e, *s, t->m.inputs, t->m.ninputs, t->outs);
    else st = rt_cpu_run(e, *cm, t->m.inputs, t->m.ninputs, t->outs);
    if (!st) st = cli_run_write_outputs(e, &t->o, &t->m, t->outs);
    if (st) name_set(e, k);
  }
  return st;
}

/* The sets' options, each parsed by parse (cmd_run's), with its own output folder. */
static int parse_sets(rs *x, int argc, char **argv, int (*parse)(int, char **, cli_opts *, const struct cli_backend **)) {
  int rc = split_sets(x, argc, argv);
  for (int k = 0; k < x->n && !rc; k++) {
    rs_set *s = &x->set[k];
    const cli_backend *b = NULL;
    if ((rc = parse(s->argc, s->argv, &s->o, &b))) break;
    if (b->target != &rt_target_cpu || b->playback || s->o.nplans || s->o.ndumps)
      return cli_usage_error("run", "several input sets (--next) need --backend cpu, without --plan or --dump");
    snprintf(s->out_dir, sizeof s->out_dir, "%s/%d", s->o.out_dir, k);
    s->o.out_dir = s->o.dump_dir = s->out_dir;
    s->o.fix_needed = true, s->o.host_flow = true, s->o.shape_binds = true;
  }
  return rc;
}

int cli_run_sets(int argc, char **argv, int (*parse)(int, char **, cli_opts *, const struct cli_backend **)) {
  rs *x = calloc(1, sizeof *x);
  if (!x) return cli_report(&(harp_error){.code = HARP_E_NO_MEMORY, .msg = "out of memory"});
  int rc = parse_sets(x, argc, argv, parse);
  harp_error e = {0};
  rt_sgen *s = NULL;
  rt_cpu_model *cm = NULL;
  if (!rc) {
    harp_status st = x->set[0].o.nshapesets ? HARP_OK : derive_box(&e, x);
    if (!st) st = run_all(&e, x, &s, &cm);
    if (!st && x->set[0].o.time_stages)
      fprintf(stderr, "harp: sets: %d run, %d object(s), %d built by the C compiler (the rest from the cache)\n", x->n,
              s ? rt_sgen_objects(s) : !!cm, s ? rt_sgen_cc_runs(s) : cm && !rt_cpu_cache_hit(cm));
    rc = st ? cli_report(&e) : 0;
  }
  rt_sgen_free(s);
  rt_cpu_free(cm);
  for (int k = 0; k < x->n; k++) {
    rs_set *t = &x->set[k];
    for (int j = 0; t->outs && j < t->m.g->noutputs; j++) ut_tensor_free(&t->outs[j]);
    free(t->outs);
    cli_model_free(&t->m);
    cli_opts_free(&t->o);
    free(t->argv);
  }
  free(x);
  return rc;
}

harp_status cli_run_write_outputs(harp_error *e, const cli_opts *o, const cli_model *m, ut_tensor *outs) {
  const char **names = calloc((size_t)m->g->noutputs + 1, sizeof *names);
  if (!names) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int k = 0; k < m->g->noutputs; k++) names[k] = tiny_output_name(m->g, m->g->outputs[k]);
  harp_status st = cli_write_outputs(e, o->out_dir, names, outs, m->g->noutputs);
  for (int k = 0; k < m->g->noutputs && !st; k++) {
    char shape[256];
    tiny_shape sh = m->g->nodes[m->g->outputs[k]].shape;
    for (int d = 0; d < sh.rank; d++) /* a derived size (ds_H_p1_d2) as its number: the name is the lowering's */
      if (sh.d[d].sym && tiny_dsym_find(m->g, sh.d[d].sym) >= 0) sh.d[d].sym = NULL;
    tiny_shape_format(&sh, shape, sizeof shape);
    printf("%s: %s %s -> %s/%s.npy\n", names[k], tiny_dtype_name(outs[k].dtype), shape, o->out_dir, names[k]);
  }
  free(names);
  return st;
}
