/* cmd_frontend.c — the driver's .harp pieces: loading and lowering a DSL
 * model for every command, `harp decompile` and `harp viz`.
 * Needs: the frontend (harp/frontend.h), regions for --stage region. */
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "harp/frontend.h"
#include "harp/function.h"
#include "harp/onnx.h"
#include "harp/sgen.h"
#include "util/util.h"

extern char **environ;

/* The command line's bindings for hg_lower_or_bind (a strided conv's output
 * size is an expression of shape variables): --sym, then the --input files'
 * shapes.  onnx (may be NULL) maps ONNX input names to the program's. */
typedef struct {
  const cli_opts *o;
  const hg_program *program;
  const onnx_model *onnx;
} bind_ctx;

static harp_status fill_cli(harp_error *e, tiny_symtab *bind, void *ctx) {
  const bind_ctx *c = ctx;
  const cli_opts *o = c->o;
  harp_status s = HARP_OK;
  for (int i = 0; i < o->syms.n && !s; i++) {
    bool boxed = false; /* a --shapeset symbol stays one (harp bench --bind gives it per binding) */
    for (int k = 0; k < o->nshapesets && !boxed; k++) {
      size_t n = strlen(o->syms.names[i]);
      boxed = !strncmp(o->shapesets[k], o->syms.names[i], n) && o->shapesets[k][n] == '=';
    }
    if (!boxed) s = tiny_symtab_set(e, bind, o->syms.names[i], o->syms.values[i]);
  }
  for (int k = 0; k < o->ninputs && !s && !o->nshapesets; k++) { /* --shapeset: the files' sizes vary */
    ut_tensor t;
    const char *id = c->onnx ? onnx_id_of(c->onnx, o->input_names[k]) : o->input_names[k];
    s = ut_npy_read(e, o->input_files[k], -1, &t);
    if (!s) {
      s = hg_program_bind_input(e, c->program, id ? id : o->input_names[k], t.rank, t.shape, bind);
      ut_tensor_free(&t);
    }
  }
  return s;
}

static harp_status lower_program(harp_error *e, const cli_opts *o, const hg_program *program, const onnx_model *onnx,
                               tiny_graph **g, tiny_symtab *defaults) {
  bind_ctx c = {o, program, onnx};
  if (o->nshapesets || o->derive) /* the box's symbols stay: an expression of them becomes a derived symbol */
    return hg_lower_derive(e, program, fill_cli, &c, g, defaults);
  return hg_lower_or_bind(e, program, fill_cli, &c, g, defaults);
}

harp_status cli_harp_load(harp_error *e, const cli_opts *o, tiny_graph **g, tiny_symtab *defaults, hg_program **program) {
  if (hg_harp_load_file(e, o->model, program)) return e->code;
  return lower_program(e, o, *program, NULL, g, defaults);
}

/* --param k's file, read only when the importer finds a graph input of
 * that name (an initializer's --param is read once, as a weight, later) */
harp_status cli_read_param(harp_error *e, void *ctx, int k, ut_tensor *out) {
  const cli_opts *o = ctx;
  for (int i = 0; i < o->ninputs; i++)
    if (o->input_names[i] == o->params[k]) return ut_npy_read(e, o->input_files[i], -1, out);
  return ut_fail(e, HARP_E_INTERNAL, o->params[k], "--param without its file");
}

/* The shapes known before the import: --shape, then the --input files'
 * (a --param file is data fixed at import instead; an unreadable file is
 * left to the data's reading).  shapes[0..*n). */
harp_status cli_given_shapes(harp_error *e, const cli_opts *o, onnx_shape **shapes, int *n) {
  *n = 0;
  if (!(*shapes = ut_xcalloc((size_t)(o->nshapes + o->ninputs) + 1, sizeof **shapes))) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int k = 0; k < o->nshapes; k++) (*shapes)[(*n)++] = o->shapes[k];
  for (int k = 0; k < o->ninputs; k++) {
    bool param = false;
    for (int j = 0; j < o->nparams; j++) param |= o->params[j] == o->input_names[k];
    if (param) continue;
    onnx_shape *s = &(*shapes)[*n];
    if (ut_npy_read_shape(e, o->input_files[k], &s->rank, s->dims)) { /* reported when the data is read */
      harp_error_clear(e);
      continue;
    }
    snprintf(s->name, sizeof s->name, "%s", o->input_names[k]);
    s->loose = true; /* a misfit is the data's error, found when it is bound */
    (*n)++;
  }
  return HARP_OK;
}

/* needs_data (harp run): a graph input given by --input whose values a
 * node needs at import becomes a --param, fixed at import on the retry. */
typedef struct {
  cli_opts *o;
  bool added;
} needs_ctx;

static void on_needs(void *ctx, const char *name) {
  needs_ctx *nc = ctx;
  cli_opts *o = nc->o;
  char id[128];
  onnx_ident(name, id);
  for (int k = 0; k < o->ninputs && o->nparams < CLI_MAX_LIST; k++) {
    if (strcmp(o->input_names[k], name) != 0 && strcmp(o->input_names[k], id) != 0) continue;
    bool param = false;
    for (int j = 0; j < o->nparams; j++) param |= o->params[j] == o->input_names[k];
    if (!param) o->params[o->nparams++] = o->input_names[k], nc->added = true;
  }
}

/* One import: --param NAME=FILE naming a graph input (not an initializer)
 * is fixed at import, so an integer input (a shape, axes, pads) folds as an
 * initializer would, and it leaves o's --input list, since the model no
 * longer has it; --shape, the --input files' shapes and --sym are given at
 * import too: the importer specialises on them (docs/onnx.md). */
/* The HI of --shapeset NAME=LO..HI, or 0 (a malformed one is refused when
 * the box is compiled). */
static int64_t shapeset_hi(const char *spec) {
  harp_error pe = {0};
  char name[CLI_NAME_MAX];
  rt_sgen_sym y;
  int64_t hi = rt_sgen_parse_box(&pe, spec, "--shapeset", name, sizeof name, &y) ? 0 : y.hi;
  harp_error_clear(&pe);
  return hi;
}

static harp_status import_once(harp_error *e, cli_opts *o, onnx_model *onnx, needs_ctx *nc) {
  int n = o->nparams, ns = 0;
  onnx_shape *shapes = NULL;
  bool *used = ut_xcalloc((size_t)n + 1, sizeof *used), *sused = ut_xcalloc((size_t)(o->nshapes + o->ninputs) + 1, sizeof *sused);
  harp_status st = used && sused ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (!st) st = cli_given_shapes(e, o, &shapes, &ns);
  int nkeep = o->nshapesets + (o->nbind_hi < CLI_MAX_LIST - o->nshapesets ? o->nbind_hi : CLI_MAX_LIST - o->nshapesets);
  char(*keep)[CLI_NAME_MAX] = ut_xcalloc((size_t)nkeep + 1, sizeof *keep); /* --shapeset's dims stay symbols */
  const char *keepp[CLI_MAX_LIST];
  int64_t keep_hi[CLI_MAX_LIST]; /* the box's upper corner: sizes the import proves inside an axis by it */
  for (int k = 0; keep && k < o->nshapesets; k++) {
    const char *eq = strchr(o->shapesets[k], '=');
    snprintf(keep[k], sizeof keep[k], "%.*s", eq ? (int)(eq - o->shapesets[k]) : 0, o->shapesets[k]);
    keepp[k] = keep[k];
    keep_hi[k] = shapeset_hi(o->shapesets[k]);
  }
  for (int k = o->nshapesets; keep && k < nkeep; k++) { /* a GPU session's bindings: their largest values */
    snprintf(keep[k], sizeof keep[k], "%s", o->bind_names[k - o->nshapesets]);
    keepp[k] = keep[k];
    keep_hi[k] = o->bind_hi[k - o->nshapesets];
  }
  if (!keep && !st) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  onnx_opts oo = {.nfixed = n, .fixed_names = o->params, .read = cli_read_param, .read_ctx = o, .used = used,
                     .nshapes = ns, .shapes = shapes, .shape_used = sused, .syms = &o->syms,
                     .needs_data = nc ? on_needs : NULL, .needs_ctx = nc, .host_flow = o->host_flow, .knobs = &o->knobs,
                     .keep_dynamic = keepp, .nkeep_dynamic = nkeep, .keep_dynamic_hi = keep_hi};
  if (!st) st = onnx_load_file_opts(e, o->model, &oo, onnx);
  for (int k = 0; k < o->nshapes && !st; k++)
    if (!sused[k]) st = ut_fail(e, HARP_E_USAGE, NULL, "--shape %s: the model has no graph input of that name", o->shapes[k].name);
  for (int k = n - 1; k >= 0 && !st; k--) {
    if (!used[k]) continue;
    for (int i = 0; i < o->ninputs; i++)
      if (o->input_names[i] == o->params[k]) {
        free((char *)o->input_names[i]);
        memmove(&o->input_names[i], &o->input_names[i + 1], sizeof *o->input_names * (size_t)(o->ninputs - i - 1));
        memmove(&o->input_files[i], &o->input_files[i + 1], sizeof *o->input_files * (size_t)(o->ninputs - i - 1));
        o->ninputs--;
        break;
      }
    memmove(&o->params[k], &o->params[k + 1], sizeof *o->params * (size_t)(o->nparams - k - 1));
    o->nparams--;
  }
  free(keep);
  free(used);
  free(sused);
  free(shapes);
  return st;
}

/* Import (harp run: again, with the --input data a node needed fixed, as
 * often as that adds an input), then lower. */
/* With --shapeset: the import or the lowering needs a ShapeSet dim as a
 * number (e says where): the reason into o->shapeset_why, the binding the
 * files give checked against the box, and the model imported again at it,
 * as without --shapeset. */
static harp_status shapeset_at_binding(harp_error *e, cli_opts *o, tiny_graph **g, tiny_symtab *defaults, onnx_model **onnx) {
  harp_error_format(e, o->shapeset_why, (int)sizeof o->shapeset_why);
  harp_error_clear(e);
  harp_status st = cli_shapeset_check_dims(e, o, *onnx); /* the binding in the box, as the one object would check it */
  onnx_model_free(*onnx);
  free(*onnx);
  *onnx = NULL;
  if (st) return st;
  int n = o->nshapesets;
  o->nshapesets = 0;
  st = cli_onnx_load(e, o, g, defaults, onnx);
  o->nshapesets = n;
  return st;
}

harp_status cli_onnx_load(harp_error *e, cli_opts *o, tiny_graph **g, tiny_symtab *defaults, onnx_model **onnx) {
  *onnx = ut_xcalloc(1, sizeof **onnx);
  if (!*onnx) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  needs_ctx nc = {o, false};
  harp_status st;
  while ((st = import_once(e, o, *onnx, o->fix_needed ? &nc : NULL)) && nc.added) {
    onnx_model_free(*onnx); /* the dims a failed import kept for a ShapeSet (onnx_model.dyn) */
    harp_error_clear(e);
    nc.added = false;
  }
  if (!st && o->need_shapes) st = o->nshapesets ? cli_shapeset_require(e, o, *onnx) : onnx_require_shapes(e, *onnx);
  if (!st && !(*onnx)->flow) st = lower_program(e, o, (*onnx)->program, *onnx, g, defaults);
  if (o->nshapesets && (st == HARP_E_UNBOUND_SYMBOL || st == HARP_E_UNSUPPORTED)) /* a ShapeSet dim needed as a number */
    return shapeset_at_binding(e, o, g, defaults, onnx);
  return st; /* a host program: its segments are compiled when run (cli_flow.c) */
}

/* ---- harp decompile ------------------------------------------------------------ */
static const char decompile_help[] =
    "usage: harp decompile MODEL.harp [-o FILE]\n\n"
    "Print the program as harp DSL text (subgraphs first, then main).  Loading\n"
    "the text again gives the same program.\n";

int cmd_decompile(int argc, char **argv) {
  const char *model = NULL, *out = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(decompile_help, stdout);
      return 0;
    }
    if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--out")) {
      if (++i >= argc) return cli_usage_error("decompile", "-o needs a file name");
      out = argv[i];
    } else if (argv[i][0] == '-') {
      return cli_usage_error("decompile", "unknown option '%s'", argv[i]);
    } else if (model) {
      return cli_usage_error("decompile", "unexpected argument '%s'", argv[i]);
    } else {
      model = argv[i];
    }
  }
  if (!model) return cli_usage_error("decompile", "no MODEL given");
  harp_error e = {0};
  hg_program *p = NULL;
  if (hg_harp_load_file(&e, model, &p)) return cli_report(&e);
  char *text = hg_decompile(p);
  hg_program_free(p);
  if (!text) return cli_report(&(harp_error){.code = HARP_E_NO_MEMORY, .msg = "out of memory"});
  int rc = 0;
  if (out) {
    if (ut_write_file_atomic(&e, out, text, strlen(text))) rc = cli_report(&e);
  } else {
    fputs(text, stdout);
  }
  free(text);
  return rc;
}

/* ---- harp viz ---------------------------------------------------------------------- */
static const char viz_help[] =
    "usage: harp viz MODEL --stage frontend|tiny|region -o FILE.{dot,svg,png} [--sym NAME=INT]... [--shape NAME=DIMS]...\n\n"
    "Draw a stage of MODEL as a Graphviz graph:\n"
    "  frontend  the high-level graph (.harp models), one cluster per graph\n"
    "  tiny      the normalized Tiny IR\n"
    "  region    the Tiny IR grouped by the regions formed for this CPU (one region\n"
    "            = one kernel; every size must be bound: graph defaults or --sym)\n"
    "A .svg or .png FILE is rendered with Graphviz's dot, which must be installed.\n";

static void dot_label(ut_str *s, const char *t) {
  for (; *t; t++) {
    unsigned char c = (unsigned char)*t;
    if (c == '"' || c == '\\') ut_str_putc(s, '\\');
    ut_str_putc(s, c < 32 || c == 127 ? '?' : (char)c);
  }
}

static char *region_dot(const rg_partition *p) {
  const tiny_graph *g = p->g;
  ut_str s;
  ut_str_init(&s);
  ut_str_puts(&s, "digraph harp_regions {\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fillcolor=white, "
                  "fontname=\"Helvetica\", fontsize=10];\n");
  for (int r = 0; r < p->n; r++) {
    const rg_region *rg = &p->regions[r];
    ut_str_printf(&s, "  subgraph cluster_r%d {\n    style=filled; fillcolor=\"#f3f3f3\"; label=\"", r);
    dot_label(&s, rg->name);
    ut_str_printf(&s, " (%s%s%s)\";\n", rg->kind ? rg->kind : "", rg->pattern ? " " : "", rg->pattern ? rg->pattern : "");
    for (int i = 0; i < rg->nnodes; i++) {
      const tiny_node *n = &g->nodes[rg->nodes[i]];
      ut_str_printf(&s, "    r%d_n%d [label=\"", r, rg->nodes[i]);
      dot_label(&s, n->id);
      ut_str_printf(&s, "\\n%s\"];\n", tiny_op_name(n->op));
    }
    ut_str_puts(&s, "  }\n");
  }
  /* edges between regions through the values they pass */
  for (int r = 0; r < p->n; r++) {
    const rg_region *rg = &p->regions[r];
    int last = rg->nnodes ? rg->nodes[rg->nnodes - 1] : -1;
    for (int i = 0; i < rg->nin && last >= 0; i++) {
      int v = rg->in_values[i], from = p->region_of[v];
      if (from >= 0) {
        const rg_region *src = &p->regions[from];
        ut_str_printf(&s, "  r%d_n%d -> r%d_n%d [label=\"", from, src->nodes[src->nnodes - 1], r, rg->nodes[0]);
      } else {
        ut_str_printf(&s, "  in%d [shape=oval, label=\"", v);
        dot_label(&s, g->nodes[v].id);
        ut_str_printf(&s, "\"];\n  in%d -> r%d_n%d [label=\"", v, r, rg->nodes[0]);
      }
      dot_label(&s, g->nodes[v].id);
      ut_str_puts(&s, "\"];\n");
    }
  }
  ut_str_puts(&s, "}\n");
  if (s.oom) {
    ut_str_free(&s);
    return NULL;
  }
  return ut_str_take(&s);
}

static const char *ext_of(const char *path) {
  const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
  return dot && (!slash || dot > slash) ? dot + 1 : "";
}

/* Render DOT text with Graphviz into out (atomically); no shell involved. */
static harp_status render(harp_error *e, const char *dot_text, const char *fmt, const char *out) {
  char tmp_dot[4200], tmp_out[4200];
  snprintf(tmp_dot, sizeof tmp_dot, "%s.%ld.dot.tmp", out, (long)getpid());
  snprintf(tmp_out, sizeof tmp_out, "%s.%ld.tmp", out, (long)getpid());
  if (ut_write_file_atomic(e, tmp_dot, dot_text, strlen(dot_text))) return e->code;
  char tflag[16];
  snprintf(tflag, sizeof tflag, "-T%s", fmt);
  char *args[] = {"dot", tflag, "-o", tmp_out, tmp_dot, NULL};
  pid_t pid;
  int rc = posix_spawnp(&pid, "dot", NULL, NULL, args, environ), status = 0;
  harp_status s = HARP_OK;
  if (rc != 0) {
    s = ut_fail(e, HARP_E_UNSUPPORTED, NULL, "cannot run Graphviz's dot (%s); install graphviz or write a .dot file", strerror(rc));
  } else if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    s = ut_fail(e, HARP_E_IO, NULL, "Graphviz's dot failed to render %s", out);
  } else if (rename(tmp_out, out) != 0) {
    s = ut_fail_at(e, HARP_E_IO, out, 0, 0, "cannot write: %s", strerror(errno));
  }
  unlink(tmp_dot);
  if (s) unlink(tmp_out);
  return s;
}

int cmd_viz(int argc, char **argv) {
  const char *stage = NULL, *out = NULL;
  harp_error e = {0};
  cli_opts o;
  memset(&o, 0, sizeof o);
  tiny_symtab_init(&o.syms);
  int rc = 0;
  for (int i = 1; i < argc && !rc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(viz_help, stdout);
      cli_opts_free(&o);
      return 0;
    }
    if (!strcmp(a, "-o") || !strcmp(a, "--out") || !strcmp(a, "--stage") || !strcmp(a, "--sym") || !strcmp(a, "--shape")) {
      if (i + 1 >= argc) {
        rc = cli_usage_error("viz", "%s needs a value", a);
        break;
      }
      const char *v = argv[++i];
      if (!strcmp(a, "--stage")) stage = v;
      else if (!strcmp(a, "--sym")) {
        if (tiny_symtab_parse_assign(&e, &o.syms, v)) rc = cli_report(&e);
      } else if (!strcmp(a, "--shape")) {
        if (cli_add_shape(&o, v, &e)) rc = cli_report(&e);
      } else out = v;
    } else if (a[0] == '-') {
      rc = cli_usage_error("viz", "unknown option '%s'", a);
    } else if (o.model) {
      rc = cli_usage_error("viz", "unexpected argument '%s'", a);
    } else {
      o.model = a;
    }
  }
  if (!rc && (!o.model || !stage || !out)) rc = cli_usage_error("viz", "usage: harp viz MODEL --stage S -o FILE");
  const char *fmt = out ? ext_of(out) : "";
  if (!rc && strcmp(fmt, "dot") && strcmp(fmt, "svg") && strcmp(fmt, "png"))
    rc = cli_usage_error("viz", "-o FILE must end in .dot, .svg or .png");
  if (!rc && strcmp(stage, "frontend") && strcmp(stage, "tiny") && strcmp(stage, "region"))
    rc = cli_usage_error("viz", "--stage must be frontend, tiny or region");
  if (!rc && cli_knobs(&e, &o)) rc = cli_report(&e);
  if (rc) {
    cli_opts_free(&o);
    return rc;
  }
  cli_model m;
  memset(&m, 0, sizeof m);
  char *text = NULL;
  rt_compile *c = NULL;
  harp_status s = cli_load_model(&e, &o, false, &m);
  if (!s && !strcmp(stage, "frontend")) {
    if (!m.program) s = ut_fail(&e, HARP_E_USAGE, NULL, "--stage frontend needs a .harp model");
    else if (!(text = hg_frontend_dot(m.program))) s = ut_fail(&e, HARP_E_NO_MEMORY, NULL, "out of memory");
  } else if (!s && !strcmp(stage, "tiny")) {
    if (!(text = hg_tiny_dot(m.g))) s = ut_fail(&e, HARP_E_NO_MEMORY, NULL, "out of memory");
  } else if (!s) {
    /* the regions `harp run` compiles: the CPU compile, up to its regions */
    s = cli_compile(&e, &o, &m, NULL, &rt_target_cpu, NULL, RT_STAGE_REGIONS, NULL, &c);
    if (!s && !(text = region_dot(c->part))) s = ut_fail(&e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  if (!s) s = !strcmp(fmt, "dot") ? ut_write_file_atomic(&e, out, text, strlen(text)) : render(&e, text, fmt, out);
  if (!s) printf("%s stage -> %s\n", stage, out);
  rc = s ? cli_report(&e) : 0;
  free(text);
  rt_compile_free(c);
  cli_model_free(&m);
  cli_opts_free(&o);
  return rc;
}
