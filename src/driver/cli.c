/* cli.c — option parsing, model loading and output writing shared by the
 * harp commands.  Needs: the library.  Gives: cli.h. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cuda/cuda.h"
#include "cli.h"
#include "harp.h"
#include "harp/frontend.h"
#include "harp/interp.h"
#include "harp/onnx.h"
#include "harp/plan.h"
#include "util/util.h"

int cli_report(const harp_error *e) {
  char buf[4096];
  harp_error_format(e, buf, sizeof buf);
  fprintf(stderr, "harp: %s\n", buf);
  return e->code == HARP_E_INTERNAL ? 2 : 1;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "harp: error[UsageError]: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\nRun 'harp %s --help' for usage.\n", cmd);
  va_end(ap);
  return 1;
}

static bool allowed_opt(const char *allowed, const char *name) {
  size_t n = strlen(name);
  for (const char *p = allowed; (p = strstr(p, name)); p += n)
    if ((p == allowed || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0)) return true;
  return false;
}

/* --name value | --name=value */
static const char *opt_value(int argc, char **argv, int *i, const char *arg, const char *eq) {
  if (eq) return eq + 1;
  if (*i + 1 >= argc) return NULL;
  (void)arg;
  return argv[++*i];
}

/* A byte count with an optional K, M or G (powers of 1024) suffix into *out. */
static bool cli_parse_bytes(const char *v, unsigned long long *out) {
  char *end;
  if (!*v || *v == '-') return false;
  unsigned long long n = strtoull(v, &end, 10);
  int shift = 0;
  if (*end == 'K' || *end == 'k') shift = 10, end++;
  else if (*end == 'M' || *end == 'm') shift = 20, end++;
  else if (*end == 'G' || *end == 'g') shift = 30, end++;
  if (*end || end == v || n > (~0ull >> shift)) return false;
  *out = n << shift;
  return true;
}

/* --input / --param NAME=FILE (param: a weight too); 0 or the exit code. */
static int add_input(const char *cmd, bool param, const char *v, cli_opts *o) {
  const char *sep = strchr(v, '=');
  if (!sep || sep == v || !sep[1]) return cli_usage_error(cmd, "--input expects NAME=FILE.npy, got '%s'", v);
  if (o->ninputs >= CLI_MAX_LIST) return cli_usage_error(cmd, "too many --input options");
  char *nm = ut_xmalloc((size_t)(sep - v) + 1);
  if (!nm) return cli_report(&(harp_error){.code = HARP_E_NO_MEMORY, .msg = "out of memory"});
  memcpy(nm, v, (size_t)(sep - v));
  nm[sep - v] = 0;
  for (int k = 0; k < o->ninputs; k++)
    if (!strcmp(o->input_names[k], nm)) {
      free(nm);
      return cli_usage_error(cmd, "--input %.*s is given twice", (int)(sep - v), v);
    }
  o->input_names[o->ninputs] = nm;
  o->input_files[o->ninputs++] = sep + 1;
  if (param) o->params[o->nparams++] = nm;
  return 0;
}

/* A comma-separated list (--dump, --outputs) appended to list[*count]. */
static int add_list(const char *v, const char **list, int *count) {
  char *copy = ut_xmalloc(strlen(v) + 1);
  if (!copy) return 1;
  strcpy(copy, v);
  for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ",")) {
    if (*count >= CLI_MAX_LIST) break;
    char *t = ut_xmalloc(strlen(tok) + 1);
    if (!t) break;
    strcpy(t, tok);
    list[(*count)++] = t;
  }
  free(copy);
  return 0;
}

/* Option --name with value v; 0 or the exit code. */
static int set_option(const char *cmd, const char *name, const char *v, cli_opts *o, harp_error *e) {
  char *end;
  if (!strcmp(name, "input") || !strcmp(name, "param")) return add_input(cmd, name[0] == 'p', v, o);
  if (!strcmp(name, "sym")) return tiny_symtab_parse_assign(e, &o->syms, v) ? cli_report(e) : 0;
  if (!strcmp(name, "shape")) return cli_add_shape(o, v, e) ? cli_report(e) : 0;
  if (!strcmp(name, "dump")) return add_list(v, o->dumps, &o->ndumps);
  if (!strcmp(name, "outputs")) return add_list(v, o->outputs, &o->noutputs);
  if (!strcmp(name, "shapeset")) {
    if (!strcmp(v, "exact") || !strcmp(v, "auto")) { /* harp run's default over dynamic dims (cli_autobox.c) */
      o->shapeset_exact = v[0] == 'e';
      return 0;
    }
    if (o->nshapesets >= CLI_MAX_LIST) return cli_usage_error(cmd, "too many --shapeset options");
    o->shapesets[o->nshapesets++] = v;
    return 0;
  }
  if (!strcmp(name, "plan") || !strcmp(name, "knob")) {
    bool plan = name[0] == 'p';
    int *n = plan ? &o->nplans : &o->nknobs;
    if (*n >= CLI_MAX_LIST) return cli_usage_error(cmd, "too many --%s options", name);
    (plan ? o->plans : o->knob_args)[(*n)++] = v;
    return 0;
  }
  if (!strcmp(name, "precision")) {
    cuda_math m;
    if (!cuda_math_parse(v, &m)) return cli_usage_error(cmd, "--precision '%s': expected tf32, fp32, fp16 or bf16", v);
    o->precision = v;
    return 0;
  }
  if (!strcmp(name, "loop-limit")) {
    o->loop_limit = strtoll(v, &end, 10);
    return *end || end == v || o->loop_limit < 1 ? cli_usage_error(cmd, "--loop-limit expects a positive count") : 0;
  }
  if (!strcmp(name, "max-memory"))
    return !cli_parse_bytes(v, &o->max_memory) || !o->max_memory
               ? cli_usage_error(cmd, "--max-memory expects a size in bytes (a K, M or G suffix allowed), not '%s'", v)
               : 0;
  if (!strcmp(name, "seed")) {
    o->seed = strtoull(v, &end, 10);
    return *end || end == v ? cli_usage_error(cmd, "--seed expects an integer") : 0;
  }
  static const struct {
    const char *name;
    size_t field;
  } plain[] = {{"out", offsetof(cli_opts, out_dir)},
               {"dump-dir", offsetof(cli_opts, dump_dir)},
               {"target", offsetof(cli_opts, target)},
               {"backend", offsetof(cli_opts, backend)}};
  for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
    if (!strcmp(name, plain[i].name)) {
      *(const char **)((char *)o + plain[i].field) = v;
      return 0;
    }
  return cli_usage_error(cmd, "option --%s is not handled here", name);
}

int cli_parse(int argc, char **argv, const char *cmd, const char *allowed, cli_opts *o, harp_error *e) {
  memset(o, 0, sizeof *o);
  tiny_symtab_init(&o->syms);
  o->out_dir = ".";
  o->seed = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-o") && allowed_opt(allowed, "out")) { /* -o DIR is --out DIR */
      if (i + 1 >= argc) return cli_usage_error(cmd, "-o needs a directory");
      o->out_dir = argv[++i];
      continue;
    }
    if (a[0] != '-' || !a[1]) {
      if (o->model) return cli_usage_error(cmd, "unexpected argument '%s' (MODEL is '%s')", a, o->model);
      o->model = a;
      continue;
    }
    if (strncmp(a, "--", 2) != 0) return cli_usage_error(cmd, "unknown option '%s'", a);
    char name[64];
    const char *eq = strchr(a, '=');
    size_t nl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
    if (nl >= sizeof name) return cli_usage_error(cmd, "unknown option '%s'", a);
    memcpy(name, a + 2, nl);
    name[nl] = 0;
    if (!allowed_opt(allowed, name)) return cli_usage_error(cmd, "unknown option '--%s'", name);
    if (!strcmp(name, "random-inputs") || !strcmp(name, "time-stages") || !strcmp(name, "sources-only")) {
      *(name[0] == 'r' ? &o->random_inputs : name[0] == 't' ? &o->time_stages : &o->sources_only) = true;
      continue;
    }
    if (!strcmp(name, "shapeset-recompile")) {
      o->shapeset_recompile = true;
      continue;
    }
    const char *v = opt_value(argc, argv, &i, a, eq);
    if (!v) return cli_usage_error(cmd, "option --%s needs a value", name);
    int rc = set_option(cmd, name, v, o, e);
    if (rc) return rc;
  }
  if (!o->dump_dir) o->dump_dir = o->out_dir;
  return cli_knobs(e, o) ? cli_report(e) : 0;
}

harp_status cli_knobs(harp_error *e, cli_opts *o) {
  rt_knobs_init(&o->knobs);
  if (rt_knobs_from_env(e, &o->knobs)) return e->code;
  for (int i = 0; i < o->nknobs; i++)
    if (rt_knob_assign(e, &o->knobs, o->knob_args[i])) return e->code;
  return HARP_OK;
}

/* ---- backends ---------------------------------------------------------------- */
static const cli_backend backends[] = {
    {"cpu", &rt_target_cpu, HARP_BACKEND_CPU, false},
    {"interp", NULL, HARP_BACKEND_INTERP, false},
    {"regions", &rt_target_cpu, -1, true},
    {"cuda", &rt_target_cuda, HARP_BACKEND_CUDA, false},
};

const cli_backend *cli_backend_get(const char *cmd, const char *name, const char *allowed, int *rc) {
  if (!name) name = "cpu";
  for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
    if (!strcmp(backends[i].name, name) && allowed_opt(allowed, name)) return &backends[i];
  char list[128] = "";
  for (size_t i = 0, k = 0; i < sizeof backends / sizeof backends[0]; i++)
    if (allowed_opt(allowed, backends[i].name))
      k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", k ? ", " : "", backends[i].name);
  *rc = cli_usage_error(cmd, "unknown or unavailable backend '%s' (available: %s)", name, list);
  return NULL;
}

harp_status cli_add_shape(cli_opts *o, const char *spec, harp_error *e) {
  if (o->nshapes >= CLI_MAX_LIST) return ut_fail(e, HARP_E_USAGE, NULL, "too many --shape options");
  if (!o->shapes && !(o->shapes = ut_xcalloc(CLI_MAX_LIST, sizeof *o->shapes))) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (onnx_parse_shape(e, spec, &o->shapes[o->nshapes])) return e->code;
  for (int k = 0; k < o->nshapes; k++)
    if (!strcmp(o->shapes[k].name, o->shapes[o->nshapes].name))
      return ut_fail(e, HARP_E_USAGE, NULL, "--shape %s is given twice", o->shapes[k].name);
  o->nshapes++;
  return HARP_OK;
}

void cli_opts_free(cli_opts *o) {
  free(o->shapes);
  for (int i = 0; i < o->ninputs; i++) free((char *)o->input_names[i]);
  for (int i = 0; i < o->ndumps; i++) free((char *)o->dumps[i]);
  for (int i = 0; i < o->noutputs; i++) free((char *)o->outputs[i]);
  tiny_symtab_free(&o->syms);
  memset(o, 0, sizeof *o);
}

bool cli_wants_dump(const cli_opts *o, const char *name) {
  for (int i = 0; i < o->ndumps; i++)
    if (!strcmp(o->dumps[i], name)) return true;
  return false;
}

/* ---- models ---------------------------------------------------------------- */
static const char *ext_of(const char *path) {
  const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
  return dot && (!slash || dot > slash) ? dot : "";
}

static harp_status random_tensor(harp_error *e, const tiny_node *n, uint64_t *state, ut_tensor *t) {
  int64_t shape[TINY_MAX_RANK];
  for (int i = 0; i < n->shape.rank; i++) shape[i] = n->shape.d[i].n;
  return ut_tensor_random(e, n->dtype, n->shape.rank, shape, state, t);
}

harp_status cli_load_graph(harp_error *e, cli_opts *o, cli_model *m, tiny_symtab *defaults) {
  const char *path = o->model, *ext = ext_of(path);
  if (o->nshapes && strcmp(ext, ".onnx") != 0)
    return ut_fail(e, HARP_E_USAGE, NULL, "--shape gives an ONNX graph input's shape; a %s model binds its symbols with --sym", ext);
  if (!strcmp(ext, ".json")) return tiny_load_file(e, path, &m->g);
  if (!strcmp(ext, ".harp")) return cli_harp_load(e, o, &m->g, defaults, &m->program);
  if (!strcmp(ext, ".onnx")) {
    harp_status st = cli_onnx_load(e, o, &m->g, defaults, &m->onnx);
    if (m->onnx) m->program = m->onnx->program; /* freed as the model's */
    if (m->onnx) m->onnx->program = NULL;
    return st;
  }
  return ut_fail_at(e, HARP_E_USAGE, path, 0, 0, "unknown model extension '%s' (expected .json, .harp or .onnx)", ext);
}

static int given_index(const cli_opts *o, const char *id) {
  for (int k = 0; k < o->ninputs; k++)
    if (!strcmp(o->input_names[k], id)) return k;
  return -1;
}

static bool is_param_opt(const cli_opts *o, const char *id) {
  for (int k = 0; k < o->nparams; k++)
    if (!strcmp(o->params[k], id)) return true;
  return false;
}

/* The initializer data of an ONNX model's input id, or NULL. */
static ut_tensor *onnx_weight(const cli_model *m, const char *id) {
  for (int w = 0; m->onnx && w < m->onnx->nweights; w++)
    if (!strcmp(m->onnx->weight_ids[w], id)) return &m->onnx->weights[w];
  return NULL;
}

/* ONNX names on the command line ("input.1") become the ids they map to,
 * in --input and --param alike. */
static harp_status onnx_names_to_ids(harp_error *e, cli_opts *o, const cli_model *m) {
  for (int k = 0; m->onnx && k < o->ninputs; k++) {
    const char *id = onnx_id_of(m->onnx, o->input_names[k]);
    if (!id || !strcmp(id, o->input_names[k])) continue;
    char *copy = ut_xmalloc(strlen(id) + 1);
    if (!copy) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    strcpy(copy, id);
    for (int j = 0; j < o->nparams; j++)
      if (o->params[j] == o->input_names[k]) o->params[j] = copy;
    free((char *)o->input_names[k]);
    o->input_names[k] = copy;
  }
  return HARP_OK;
}

/* The INPUT node of tensor id in g, or -1. */
static int input_node(const tiny_graph *g, const char *id) {
  for (int i = 0; i < g->n; i++)
    if (g->nodes[i].op == TINY_INPUT && !strcmp(g->nodes[i].a.input.tensor_id, id)) return i;
  return -1;
}

/* Mark every INPUT node of tensor id a weight. */
static void mark_param(tiny_graph *g, const char *id) {
  for (int i = 0; i < g->n; i++)
    if (g->nodes[i].op == TINY_INPUT && !strcmp(g->nodes[i].a.input.tensor_id, id)) g->nodes[i].a.input.storage = "param";
}

/* What the options say of m's graph: every --input names an input; --param
 * and ONNX initializers (unless --input makes one an input) are weights;
 * --outputs replace the outputs. */
static harp_status apply_io_options(harp_error *e, const cli_opts *o, cli_model *m) {
  tiny_graph *g = m->g;
  for (int k = 0; k < o->ninputs; k++)
    if (input_node(g, o->input_names[k]) < 0)
      return ut_fail(e, HARP_E_USAGE, NULL, "--input %s: the model has no input of that name", o->input_names[k]);
  for (int k = 0; k < o->nparams; k++) mark_param(g, o->params[k]);
  for (int w = 0; m->onnx && w < m->onnx->nweights; w++)
    if (given_index(o, m->onnx->weight_ids[w]) < 0 || is_param_opt(o, m->onnx->weight_ids[w]))
      mark_param(g, m->onnx->weight_ids[w]);
  for (int k = 0; k < o->noutputs; k++) {
    int idx = tiny_find(g, o->outputs[k]);
    if (idx < 0) return ut_fail(e, HARP_E_USAGE, o->outputs[k], "--outputs: the model has no node of that id");
    if (tiny_mark_output(g, idx) < 0) return ut_fail(e, g->err.code, NULL, "%s", g->err.msg);
  }
  return HARP_OK;
}

/* harp run --shapeset: the ONNX import kept the box's dims of an input
 * symbolic, so each --shape binds them here, before the --input files do
 * (a file or --sym that disagrees is then InputMismatch, not a run at the
 * file's binding with the --shape ignored). */
static harp_status bind_shapes(harp_error *e, const cli_opts *o, cli_model *m) {
  for (int k = 0; o->shape_binds && o->nshapesets && m->onnx && k < o->nshapes; k++) {
    const char *id = onnx_id_of(m->onnx, o->shapes[k].name);
    int node = input_node(m->g, id ? id : o->shapes[k].name);
    if (node >= 0 && tiny_bind_input(e, m->g, node, o->shapes[k].rank, o->shapes[k].dims, &m->syms)) return e->code;
  }
  return HARP_OK;
}

/* files[k]: --input k's tensor, binding symbols from its shape; then every
 * input needs a tensor unless random ones were asked for; then the
 * graph's defaults bind what nothing else did (graph<B=1>). */
static harp_status read_given(harp_error *e, const cli_opts *o, bool need_inputs, cli_model *m, ut_tensor *files) {
  tiny_graph *g = m->g;
  if (need_inputs && bind_shapes(e, o, m)) return e->code;
  for (int k = 0; k < o->ninputs && need_inputs; k++) {
    int node = input_node(g, o->input_names[k]);
    if (ut_npy_read(e, o->input_files[k], (int)g->nodes[node].a.input.dtype, &files[k]) ||
        tiny_bind_input(e, g, node, files[k].rank, files[k].shape, &m->syms))
      return e->code;
  }
  for (int i = 0; i < g->n && need_inputs && !o->random_inputs; i++) {
    if (g->nodes[i].op != TINY_INPUT) continue;
    bool given = given_index(o, g->nodes[i].a.input.tensor_id) >= 0 || onnx_weight(m, g->nodes[i].a.input.tensor_id);
    if (!given)
      return ut_fail(e, HARP_E_USAGE, g->nodes[i].id, "no --input %s=FILE.npy given (or use --random-inputs)",
                     g->nodes[i].a.input.tensor_id);
  }
  for (int i = 0; i < m->defaults.n; i++) /* a tied symbol's (cli_shapeset_ties) follows its definition */
    if (!tiny_symtab_get(&m->syms, m->defaults.names[i], NULL) && tiny_dsym_find(g, m->defaults.names[i]) < 0 &&
        tiny_symtab_set(e, &m->syms, m->defaults.names[i], m->defaults.values[i]))
      return e->code;
  return HARP_OK;
}

/* m->inputs[i], the tensor of INPUT node ins[i]: its --input file (copied:
 * every INPUT node of that tensor reads it), the ONNX initializer (its last
 * reader takes the import's tensor: one copy of the weights, not two), or
 * a random one. */
static harp_status input_tensor(harp_error *e, const cli_opts *o, cli_model *m, const int *ins, int i,
                                const ut_tensor *files, uint64_t *state) {
  const tiny_graph *g = m->g;
  const tiny_node *n = &g->nodes[ins[i]];
  const ut_tensor *src = NULL;
  for (int j = 0; j < o->ninputs && !src; j++)
    if (!strcmp(o->input_names[j], n->a.input.tensor_id)) src = &files[j];
  ut_tensor *w = src ? NULL : onnx_weight(m, n->a.input.tensor_id);
  if (w) {
    bool later = false; /* another INPUT node reads it after this one */
    for (int j = i + 1; j < m->ninputs && !later; j++) later = !strcmp(g->nodes[ins[j]].a.input.tensor_id, n->a.input.tensor_id);
    if (!later) {
      m->inputs[i] = *w;
      memset(w, 0, sizeof *w);
      return HARP_OK;
    }
    src = w;
  }
  if (src) {
    if (ut_tensor_alloc(e, &m->inputs[i], src->dtype, src->rank, src->shape)) return e->code;
    if (src->nbytes) memcpy(m->inputs[i].data, src->data, src->nbytes);
    return HARP_OK;
  }
  if (o->random_inputs) return random_tensor(e, n, state, &m->inputs[i]);
  return ut_fail(e, HARP_E_USAGE, n->id, "no --input %s=FILE.npy given (or use --random-inputs)", n->a.input.tensor_id);
}

/* m->inputs: one tensor per INPUT node, graph order. */
static harp_status fill_inputs(harp_error *e, const cli_opts *o, cli_model *m, const ut_tensor *files) {
  int *ins = NULL;
  m->ninputs = tiny_inputs(m->g, &ins);
  m->inputs = ins ? ut_xcalloc((size_t)m->ninputs + 1, sizeof *m->inputs) : NULL;
  harp_status st = !ins || !m->inputs ? ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory") : HARP_OK;
  uint64_t state = o->seed;
  for (int i = 0; i < m->ninputs && !st; i++) st = input_tensor(e, o, m, ins, i, files, &state);
  free(ins);
  return st;
}

harp_status cli_load_model(harp_error *e, cli_opts *o, bool need_inputs, cli_model *m) {
  memset(m, 0, sizeof *m);
  tiny_symtab_init(&m->syms);
  if (!o->model) return ut_fail(e, HARP_E_USAGE, NULL, "no MODEL given");
  for (int i = 0; i < o->syms.n; i++)
    if (tiny_symtab_set(e, &m->syms, o->syms.names[i], o->syms.values[i])) return e->code;
  tiny_symtab_init(&m->defaults);
  o->need_shapes = need_inputs; /* run, bench, compile, tune: every dim concrete */
  double t0 = ut_now_ms();
  if (cli_load_graph(e, o, m, &m->defaults)) return e->code;
  m->flow = m->onnx ? m->onnx->flow : NULL;
  if (onnx_names_to_ids(e, o, m)) return e->code;
  if (m->flow) return cli_flow_inputs(e, o, need_inputs, m); /* run-time control flow: a host program, no graph */
  if (apply_io_options(e, o, m) || (o->nshapesets && cli_shapeset_ties(e, o, m))) return e->code;
  ut_tensor *files = ut_xcalloc((size_t)o->ninputs + 1, sizeof *files);
  if (!files) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  harp_status st = read_given(e, o, need_inputs, m, files);
  double t1 = ut_now_ms();
  if (!st && o->nshapesets && !(m->raw = tiny_write_json(m->g))) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (!st) st = tiny_dsym_bind(e, m->g, &m->syms);
  if (!st) st = tiny_prepare(e, m->g, &m->syms, !need_inputs);
  m->load_ms = t1 - t0, m->normalize_ms = ut_now_ms() - t1;
  if (!st && need_inputs) st = fill_inputs(e, o, m, files);
  for (int k = 0; k < o->ninputs; k++) ut_tensor_free(&files[k]);
  free(files);
  ut_release_free_memory(); /* the model file and its parse are gone: not into the peak */
  return st;
}

harp_status cli_load_model_at(harp_error *e, cli_opts *o, const char *spec, tiny_symtab *syms, cli_model *m) {
  tiny_symtab given = o->syms;
  tiny_symtab_init(syms);
  for (int k = 0; k < given.n; k++)
    if (tiny_symtab_set(e, syms, given.names[k], given.values[k])) return e->code;
  char buf[512], *save = NULL;
  if (snprintf(buf, sizeof buf, "%s", spec) >= (int)sizeof buf)
    return ut_fail(e, HARP_E_USAGE, NULL, "--bind %.40s...: longer than %zu characters", spec, sizeof buf - 1);
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
    if (tiny_symtab_parse_assign(e, syms, tok)) return e->code;
  o->syms = *syms;
  harp_status st = cli_load_model(e, o, true, m);
  o->syms = given;
  return st;
}

void cli_model_free(cli_model *m) {
  free(m->raw);
  hg_program_free(m->program);
  onnx_model_free(m->onnx);
  free(m->onnx);
  tiny_symtab_free(&m->defaults);
  for (int i = 0; i < m->ninputs; i++) ut_tensor_free(&m->inputs[i]);
  free(m->inputs);
  tiny_graph_free(m->g);
  tiny_symtab_free(&m->syms);
  memset(m, 0, sizeof *m);
}

/* ---- output ---------------------------------------------------------------- */
static const char *const known_dumps[] = {"frontend", "tiny", "indexbook", "poly_view", "region", "plan",
                                          "function", "gpu", "cu", "c", "flow", NULL};

harp_status cli_write_text(harp_error *e, const char *dir, const char *file, const char *text) {
  char path[4096];
  if (ut_mkdirs(e, dir)) return e->code;
  snprintf(path, sizeof path, "%s/%s", dir, file);
  return ut_write_file_atomic(e, path, text, strlen(text));
}

harp_status cli_write_dumps(harp_error *e, const cli_opts *o, const cli_model *m) {
  for (int i = 0; i < o->ndumps; i++) {
    bool known = false;
    for (int k = 0; known_dumps[k] && !known; k++) known = !strcmp(known_dumps[k], o->dumps[i]);
    if (!known)
      return ut_fail(e, HARP_E_USAGE, NULL,
                     "unknown dump '%s' (one of frontend, tiny, indexbook, poly_view, region, plan, function, gpu, cu, c, flow)",
                     o->dumps[i]);
    if (!strcmp(o->dumps[i], "frontend")) {
      if (!m->program) return ut_fail(e, HARP_E_USAGE, NULL, "dump 'frontend' needs a .harp or .onnx model");
      char *json = hg_frontend_json(m->program);
      if (!json) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
      harp_status st = cli_write_text(e, o->dump_dir, "frontend.json", json);
      free(json);
      if (st) return st;
    } else if (!strcmp(o->dumps[i], "tiny")) {
      char *json = tiny_write_json(m->g);
      if (!json) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
      harp_status st = cli_write_text(e, o->dump_dir, "tiny.json", json);
      free(json);
      if (st) return st;
    } else if (rt_stage_of_dump(o->dumps[i]) >= RT_STAGE_INDEXBOOK) {
      continue; /* the compile's stages (cli_stages.c) */
    } else if (!strcmp(o->dumps[i], "flow")) { /* a model with run-time control flow writes its host program (cli_flow.c) */
      harp_status st = cli_write_text(e, o->dump_dir, "flow.txt", "no host program: the model is one static graph\n");
      if (st) return st;
    } else {
      return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "dump '%s' is not available in this build yet", o->dumps[i]);
    }
  }
  return HARP_OK;
}

harp_status cli_write_outputs(harp_error *e, const char *dir, const char *const *names, const ut_tensor *t, int n) {
  if (ut_mkdirs(e, dir)) return e->code;
  char(*partial)[4096] = ut_xcalloc((size_t)n + 1, sizeof *partial);
  if (!partial) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  harp_status st = HARP_OK;
  int written = 0;
  /* Write every output beside its final name first, then rename them all:
   * a failure leaves no output behind. */
  for (int k = 0; k < n && !st; k++) {
    char safe[200];
    ut_sanitize_name(names[k], safe, sizeof safe);
    snprintf(partial[k], sizeof partial[k], "%s/.%s.npy.partial-%ld", dir, safe, (long)getpid());
    st = ut_npy_write(e, partial[k], &t[k]);
    if (!st) written++;
  }
  for (int k = 0; k < n && !st; k++) {
    char final[4200], safe[200];
    ut_sanitize_name(names[k], safe, sizeof safe);
    snprintf(final, sizeof final, "%s/%s.npy", dir, safe);
    if (rename(partial[k], final) != 0)
      st = ut_fail_at(e, HARP_E_IO, final, 0, 0, "cannot write: %s", strerror(errno));
  }
  if (st)
    for (int k = 0; k < written; k++) unlink(partial[k]);
  free(partial);
  return st;
}

char *cli_json_quote(const char *s) {
  json_t *j = json_string(s ? s : "");
  char *out = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
  json_decref(j);
  return out;
}
