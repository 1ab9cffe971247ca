/* api.c — harp.h: compile a model file or graph, then harp_model_init /
 * harp_model_run / harp_model_free over the compiled Function (the CPU
 * backend's generated code, the CUDA backend's kernels, or the reference
 * interpreter).  The backend is one row of a table; each compiles through
 * the pipeline (harp/pipeline.h) with the knobs of harp_options.
 * Needs: every layer.  Gives: harp.h, harp/advanced.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_int.h"
#include "harp.h"
#include "harp/cpu.h"
#include "harp/frontend.h"
#include "harp/function.h"
#include "harp/gpu.h"
#include "harp/interp.h"
#include "harp/knobs.h"
#include "harp/onnx.h"
#include "harp/pipeline.h"
#include "harp/sgen.h"
#include "harp/tensor.h"
#include "util/util.h"

/* harp.h names the Tiny IR's dtypes and rank limit without including it */
_Static_assert((int)HARP_FP16 == (int)TINY_FP16 && (int)HARP_BF16 == (int)TINY_BF16 && (int)HARP_FP32 == (int)TINY_FP32 &&
                   (int)HARP_I32 == (int)TINY_I32 && (int)HARP_BOOL == (int)TINY_BOOL && (int)HARP_I8 == (int)TINY_I8 &&
                       (int)HARP_U8 == (int)TINY_U8 && TINY_DTYPE_COUNT == 7,
               "harp_dtype follows tiny_dtype");
_Static_assert(HARP_MAX_RANK == TINY_MAX_RANK, "HARP_MAX_RANK is TINY_MAX_RANK");

struct harp_compiled {
  harp_backend backend;
  tiny_graph *g;
  tiny_symtab syms;
  rt_cpu_model *cpu;        /* CPU backend */
  rt_gpu_model *gpu;        /* CUDA backend: built and compiled for the device once (failing early); each
                               instance loads it with its own module and memory, sharing the build */
  rt_gpu_opts gopts;        /* CUDA: the build's options */
  rt_knobs knobs;           /* CUDA: gopts' knobs */
  char *cache_dir, *target; /* CUDA: gopts' strings, owned */
  fn_function *f;           /* the layout (the backend's; interp: one region per node) */
  rt_compile *comp;         /* interp only: its compile (the layout) */
  int *inputs, ninputs;     /* INPUT nodes that are not weights */
  int *params, nparams;     /* INPUT nodes that are weights */
  int64_t *param_off;       /* offset of each weight in the parameter block */
  size_t params_bytes;
  unsigned char *embedded;  /* the parameter block filled from the file's own weights (ONNX), or NULL */
  flow_sig *flow;           /* a model with run-time control flow: the host program behind every call (flow_api.c) */
  char **in_src, **out_src; /* ONNX: the inputs' and outputs' names in the file (harp_input_source_name), or NULL */
  api_sgen *ss;             /* ShapeSets (api_sgen.c): g prepared at the box's upper corner, f the one object's or NULL */
  int64_t (*bind)[HARP_MAX_RANK]; /* a box harp chose (api_autobox.c): each input's and output's shape at the binding */
};

struct harp_model {
  const harp_compiled *c;
  void *inst;              /* CPU: the generated model's instance */
  rt_gpu_model *gpu;       /* CUDA: the instance's own device memory, module and graph */
  flow_inst *flow;         /* run-time control flow: the instance's executor */
  unsigned char *params;   /* interp, CUDA: a copy of the parameter block */
  int threads;             /* CPU: the instance's threads (0: the default) */
  api_shaped *shaped;      /* harp_model_run_shaped's state (a ShapeSet model's runs) */
  bool last_tier0;         /* CPU: the last run was on tier 0 (harp_model_last_tier0) */
  char error[1100];
};

void harp_compiled_free(harp_compiled *c) {
  if (!c) return;
  rt_cpu_free(c->cpu);
  api_sgen_free(c->ss);
  free(c->bind);
  rt_gpu_free(c->gpu);
  free(c->cache_dir);
  free(c->target);
  rt_compile_free(c->comp);
  tiny_graph_free(c->g);
  tiny_symtab_free(&c->syms);
  free(c->inputs);
  free(c->params);
  free(c->param_off);
  free(c->embedded);
  flow_sig_free(c->flow);
  for (int k = 0; c->in_src && c->in_src[k]; k++) free(c->in_src[k]);
  for (int k = 0; c->out_src && c->out_src[k]; k++) free(c->out_src[k]);
  free(c->in_src);
  free(c->out_src);
  free(c);
}

const char *harp_compiled_warning(const harp_compiled *c) { return c && c->cpu ? rt_cpu_warning(c->cpu) : NULL; }

static bool is_param(const tiny_node *n) { return n->a.input.storage && !strcmp(n->a.input.storage, "param"); }

harp_status harp_compile_graph(harp_error *e, tiny_graph *g, const harp_options *o, harp_compiled **out) {
  tiny_symtab syms;
  tiny_symtab_init(&syms);
  harp_status st = HARP_OK;
  for (int i = 0; !st && o && o->syms && o->syms[i]; i++) st = tiny_symtab_parse_assign(e, &syms, o->syms[i]);
  if (st) {
    *out = NULL;
    tiny_graph_free(g);
  } else {
    st = harp_compile_bound(e, g, &syms, o, out);
  }
  tiny_symtab_free(&syms);
  return st;
}

/* The knobs of a compile: the table's defaults, the environment (unless
 * o->no_env), o->knobs' "NAME=VALUE" settings, then o's compiler, flags and
 * cache directory. */
harp_status api_knobs(harp_error *e, const harp_options *o, rt_knobs *k) {
  rt_knobs_init(k);
  if (!(o && o->no_env) && rt_knobs_from_env(e, k)) return e->code;
  for (int i = 0; o && o->knobs && o->knobs[i]; i++)
    if (rt_knob_assign(e, k, o->knobs[i])) return e->code;
  if (o) rt_knobs_set_build(k, o->cc, o->cflags, o->cache_dir);
  return HARP_OK;
}

/* After each stage of a compile: o's progress callback, which may cancel it. */
static harp_status api_stage_hook(void *ctx, harp_error *e, const rt_compile *c, rt_stage s) {
  (void)c;
  return api_progress(e, ctx, rt_stage_name(s), (s + 1.0) / RT_NSTAGES);
}

harp_status api_progress(harp_error *e, const harp_options *o, const char *stage, double fraction) {
  if (!o || !o->progress || !o->progress(o->progress_ctx, stage, fraction)) return HARP_OK;
  return ut_fail(e, HARP_E_CANCELLED, NULL, "the compile was cancelled after its %s stage", stage);
}

static harp_status build_cpu(harp_error *e, harp_compiled *c, const harp_options *o, const rt_knobs *k) {
  if (o && o->max_memory < 0) return ut_fail(e, HARP_E_USAGE, NULL, "harp_options.max_memory is negative");
  rt_knobs kc = *k;
  if (o && o->progress && !o->progress_tier0 && kc.tier0 == RT_TIER0_AUTO) /* a followed compile runs to its build */
    kc.tier0 = RT_TIER0_OFF;
  rt_cpu_opts co = {.knobs = &kc, .precision = o ? o->precision : NULL,
                    .max_memory = o && o->max_memory > 0 ? (uint64_t)o->max_memory : 0,
                    .after_stage = o && o->progress ? api_stage_hook : NULL, .hook_ctx = (void *)o};
  if (rt_cpu_compile(e, c->g, &c->syms, &co, &c->cpu)) return e->code;
  c->f = (fn_function *)rt_cpu_function(c->cpu);
  return HARP_OK;
}

/* The build is prepared for the device now (NVRTC, the device), not at the
 * first run; each instance loads it (o != NULL: the default backend is the CPU). */
static harp_status build_cuda(harp_error *e, harp_compiled *c, const harp_options *o, const rt_knobs *k) {
  c->knobs = *k;
  c->cache_dir = o->cache_dir ? strdup(o->cache_dir) : NULL;
  c->target = o->target ? strdup(o->target) : NULL;
  if ((o->cache_dir && !c->cache_dir) || (o->target && !c->target)) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  c->gopts = (rt_gpu_opts){.knobs = &c->knobs, .target = c->target, .cache_dir = c->cache_dir, .graphs = o->graphs};
  rt_gpu_opts bo = c->gopts; /* the precision and the progress are the build's alone */
  bo.precision = o->precision;
  bo.after_stage = o->progress ? api_stage_hook : NULL;
  bo.hook_ctx = (void *)o;
  if (rt_gpu_build(e, c->g, &c->syms, &bo, &c->gpu) || rt_gpu_prepare(e, c->gpu)) return e->code;
  c->f = (fn_function *)rt_gpu_function(c->gpu);
  return HARP_OK;
}

/* The interpreter runs the graph; its compile gives the parameter block's layout. */
static harp_status build_interp(harp_error *e, harp_compiled *c, const harp_options *o, const rt_knobs *k) {
  (void)o;
  rt_compile_opts co = {.knobs = k, .after_stage = o && o->progress ? api_stage_hook : NULL, .hook_ctx = (void *)o};
  if (rt_compile_run(e, &rt_target_interp, c->g, &c->syms, &co, &c->comp)) return e->code;
  c->f = c->comp->f;
  return HARP_OK;
}

typedef harp_status (*api_build)(harp_error *e, harp_compiled *c, const harp_options *o, const rt_knobs *k);
static const struct {
  harp_backend backend;
  api_build build;
} backends[] = {{HARP_BACKEND_CPU, build_cpu}, {HARP_BACKEND_INTERP, build_interp}, {HARP_BACKEND_CUDA, build_cuda}};

static api_build backend_build(harp_backend b) {
  for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
    if (backends[i].backend == b) return backends[i].build;
  return NULL;
}

/* A ShapeSet model compiled per binding (no one Function): its inputs in
 * tiny_inputs order, each weight at a 64-byte aligned offset. */
static harp_status layout_own(harp_error *e, harp_compiled *c) {
  int *ins = NULL, n = tiny_inputs(c->g, &ins);
  if (!ins) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0; i < n; i++) {
    const tiny_node *x = &c->g->nodes[ins[i]];
    if (!is_param(x)) {
      c->inputs[c->ninputs++] = ins[i];
      continue;
    }
    c->param_off[c->nparams] = (int64_t)c->params_bytes;
    c->params[c->nparams++] = ins[i];
    c->params_bytes += ((size_t)tiny_shape_numel(&x->shape) * tiny_dtype_size(x->dtype) + 63) / 64 * 64;
  }
  free(ins);
  return HARP_OK;
}

/* Which model inputs are weights and where they go in the parameter block. */
static harp_status layout_inputs(harp_error *e, harp_compiled *c) {
  const tiny_graph *g = c->g;
  c->inputs = ut_xcalloc((size_t)g->n + 1, sizeof(int));
  c->params = ut_xcalloc((size_t)g->n + 1, sizeof(int));
  c->param_off = ut_xcalloc((size_t)g->n + 1, sizeof(int64_t));
  if (!c->inputs || !c->params || !c->param_off) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (!c->f) return layout_own(e, c);
  for (int a = 0; a < c->f->nargs; a++) {
    const fn_buffer *b = &c->f->buffers[c->f->args[a]];
    if (b->kind == FN_PARAM) {
      c->param_off[c->nparams] = (int64_t)b->offset;
      c->params[c->nparams++] = b->node;
    } else {
      c->inputs[c->ninputs++] = b->node;
    }
  }
  c->params_bytes = c->f->const_bytes;
  return HARP_OK;
}

/* opts->params: those inputs are weights. */
static harp_status mark_params(harp_error *e, tiny_graph *g, const harp_options *o) {
  for (int i = 0; o && o->params && o->params[i]; i++) {
    bool found = false;
    for (int k = 0; k < g->n; k++)
      if (g->nodes[k].op == TINY_INPUT && !strcmp(g->nodes[k].a.input.tensor_id, o->params[i])) {
        g->nodes[k].a.input.storage = "param";
        found = true;
      }
    if (!found) return ut_fail(e, HARP_E_USAGE, o->params[i], "no input of that name to make a weight");
  }
  return HARP_OK;
}

harp_status harp_compile_bound(harp_error *e, tiny_graph *g, const tiny_symtab *syms, const harp_options *o, harp_compiled **out) {
  *out = NULL;
  harp_options on;
  if (o && o->shapesets && !api_boxes(o)) on = *o, on.shapesets = NULL, o = &on; /* "auto" / "exact": no box here */
  harp_compiled *c = ut_xcalloc(1, sizeof *c);
  if (!c) {
    tiny_graph_free(g);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  c->g = g;
  c->backend = o ? o->backend : HARP_BACKEND_CPU;
  tiny_symtab_init(&c->syms);
  rt_knobs k;
  api_build build = backend_build(c->backend);
  harp_status st = g->err.code ? ut_fail(e, g->err.code, g->err.node, "%s", g->err.msg) : HARP_OK;
  for (int i = 0; !st && i < syms->n; i++) st = tiny_symtab_set(e, &c->syms, syms->names[i], syms->values[i]);
  if (!st) st = mark_params(e, g, o);
  if (!st && !build) st = ut_fail(e, HARP_E_USAGE, NULL, "unknown backend %d", (int)c->backend);
  if (!st) st = api_knobs(e, o, &k);
  if (!st && o && o->shapesets && o->shapesets[0]) { /* one object for the box (api_sgen.c) */
    tiny_graph *ghi = NULL;
    st = api_sgen_new(e, g, &c->syms, o, &k, &c->ss, &ghi);
    if (!st) tiny_graph_free(c->g), c->g = ghi, c->f = (fn_function *)api_sgen_function(c->ss);
  } else {
    if (!st) st = tiny_dsym_bind(e, g, &c->syms);
    if (!st) st = tiny_prepare(e, g, &c->syms, false);
    if (!st) st = build(e, c, o, &k);
  }
  if (!st) st = layout_inputs(e, c);
  if (st) {
    harp_compiled_free(c);
    return st;
  }
  *out = c;
  return HARP_OK;
}

/* The caller's --sym style bindings ("N=4"), for hg_lower_or_bind. */
static harp_status fill_syms(harp_error *e, tiny_symtab *bind, void *ctx) {
  const harp_options *o = ctx;
  harp_status st = HARP_OK;
  for (int i = 0; !st && o && o->syms && o->syms[i]; i++) st = tiny_symtab_parse_assign(e, bind, o->syms[i]);
  return st;
}

/* Import an ONNX file with o's shapes and symbols given at import; a
 * dynamic dim neither gives is UnboundSymbol (no default). */
static harp_status load_onnx(harp_error *e, const api_src *src, const harp_options *o, onnx_model *om) {
  int n = 0;
  for (; o && o->shapes && o->shapes[n]; n++) {}
  onnx_shape *shapes = ut_xcalloc((size_t)n + 1, sizeof *shapes);
  bool *used = ut_xcalloc((size_t)n + 1, sizeof *used);
  tiny_symtab syms;
  tiny_symtab_init(&syms);
  harp_status st = shapes && used ? fill_syms(e, &syms, (void *)o) : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int k = 0; k < n && !st; k++) st = onnx_parse_shape(e, o->shapes[k], &shapes[k]);
  int nk = 0; /* the ShapeSets' dims stay symbols (by the name before '=') */
  char(*keep)[128] = NULL;
  const char *keepp[64];
  int64_t keep_hi[64]; /* the boxes' upper corners: sizes the import proves inside an axis by them */
  for (; o && o->shapesets && o->shapesets[nk] && nk < 64; nk++) {}
  if (!st && nk && !(keep = ut_xcalloc((size_t)nk, sizeof *keep))) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int k = 0; keep && k < nk; k++) {
    const char *eq = strchr(o->shapesets[k], '=');
    snprintf(keep[k], sizeof keep[k], "%.*s", eq ? (int)(eq - o->shapesets[k]) : 0, o->shapesets[k]);
    keepp[k] = keep[k];
    harp_error pe = {0}; /* a malformed box is refused when it is compiled */
    rt_sgen_sym y;
    char name[128];
    keep_hi[k] = rt_sgen_parse_box(&pe, o->shapesets[k], "harp_options.shapesets", name, sizeof name, &y) ? 0 : y.hi;
    harp_error_clear(&pe);
  }
  rt_knobs kn;
  if (!st) st = api_knobs(e, o, &kn);
  onnx_opts oo = {.nshapes = n, .shapes = shapes, .shape_used = used, .syms = &syms, .shape_option = "harp_options.shapes",
                  .host_flow = true, .knobs = &kn, .keep_dynamic = keepp, .nkeep_dynamic = keep ? nk : 0, .keep_dynamic_hi = keep_hi};
  if (!st) st = src->data ? onnx_load_buffer_opts(e, src->data, src->len, src->path, &oo, om) : onnx_load_file_opts(e, src->path, &oo, om);
  for (int k = 0; k < n && !st; k++)
    if (!used[k]) st = ut_fail(e, HARP_E_USAGE, NULL, "harp_options.shapes \"%s\": the model has no graph input of that name", shapes[k].name);
  if (!st && !(o && o->shapesets)) st = onnx_require_shapes(e, om); /* ShapeSets: api_sgen_onnx */
  if (st) onnx_model_free(om);
  tiny_symtab_free(&syms);
  free(keep);
  free(shapes);
  free(used);
  return st;
}

/* ONNX: its initializers are weights; mark them so before compiling. */
static void mark_weights(tiny_graph *g, const onnx_model *om) {
  for (int w = 0; w < om->nweights; w++)
    for (int k = 0; k < g->n; k++)
      if (g->nodes[k].op == TINY_INPUT && !strcmp(g->nodes[k].a.input.tensor_id, om->weight_ids[w]))
        g->nodes[k].a.input.storage = "param";
}

/* The parameter block with every weight the file carried at its offset.  A
 * weight the caller named in opts->params that the file lacks stays zero. */
static harp_status fill_embedded(harp_error *e, harp_compiled *c, const onnx_model *om) {
  c->embedded = ut_xcalloc(c->params_bytes + 1, 1);
  if (!c->embedded) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int k = 0; k < c->nparams; k++) {
    const tiny_node *n = &c->g->nodes[c->params[k]];
    for (int w = 0; w < om->nweights; w++) {
      if (strcmp(om->weight_ids[w], n->a.input.tensor_id)) continue;
      const ut_tensor *t = &om->weights[w];
      size_t want = (size_t)tiny_shape_numel(&n->shape) * tiny_dtype_size(n->dtype);
      if (t->nbytes != want || (int)t->dtype != (int)n->dtype || c->param_off[k] < 0 ||
          (size_t)c->param_off[k] + want > c->params_bytes)
        return ut_fail(e, HARP_E_INTERNAL, n->a.input.tensor_id, "the file's weight does not fit its parameter slot");
      if (want) memcpy(c->embedded + c->param_off[k], t->data, want);
      break;
    }
  }
  return HARP_OK;
}

/* A model with run-time control flow: every call goes to its host program. */
static harp_status compile_flow(harp_error *e, onnx_model *om, const harp_options *o, harp_compiled **out) {
  harp_compiled *c = ut_xcalloc(1, sizeof *c);
  if (!c) {
    onnx_model_free(om);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  c->backend = o ? o->backend : HARP_BACKEND_CPU;
  tiny_symtab_init(&c->syms);
  harp_status st = flow_sig_new(e, om, o, &c->flow);
  if (st) {
    harp_compiled_free(c);
    return st;
  }
  *out = c;
  return HARP_OK;
}

/* ONNX: each input's and output's name in the file, by harp's identifier (om->names). */
static harp_status keep_source_names(harp_error *e, harp_compiled *c, const onnx_model *om) {
  int ni = harp_num_inputs(c), no = harp_num_outputs(c);
  c->in_src = ut_xcalloc((size_t)ni + 1, sizeof(char *));
  c->out_src = ut_xcalloc((size_t)no + 1, sizeof(char *));
  if (!c->in_src || !c->out_src) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int k = 0; k < ni + no; k++) {
    const char *id = k < ni ? harp_input_name(c, k) : harp_output_name(c, k - ni), *src = id;
    for (int i = 0; i < om->nnames; i++)
      if (!strcmp(om->names[i].id, id)) src = om->names[i].onnx;
    char **slot = k < ni ? &c->in_src[k] : &c->out_src[k - ni];
    if (!(*slot = strdup(src))) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  return HARP_OK;
}

const char *harp_input_source_name(const harp_compiled *c, int k) {
  return c->in_src && c->in_src[k] ? c->in_src[k] : harp_input_name(c, k);
}
const char *harp_output_source_name(const harp_compiled *c, int k) {
  return c->out_src && c->out_src[k] ? c->out_src[k] : harp_output_name(c, k);
}

/* Whether one of the n "NAME=..." assignments in a names symbol name. */
static bool names_sym(const char *const *a, int n, const char *name) {
  size_t len = strlen(name);
  for (int k = 0; k < n; k++)
    if (!strncmp(a[k], name, len) && a[k][len] == '=') return true;
  return false;
}

/* Load the model src names or holds (its format: src->format, else the
 * path's extension), then compile it as harp_compile_file does. */
static harp_status load_graph(harp_error *e, const api_src *src, const char *fmt, const harp_options *o, tiny_graph **g,
                              tiny_symtab *defaults) {
  const char *path = src->path;
  if (!strcmp(fmt, "json")) return src->data ? tiny_load_json(e, src->data, src->len, path, g) : tiny_load_file(e, path, g);
  hg_program *p = NULL;
  harp_status st = src->data ? hg_harp_load_text(e, src->data, src->len, path, &p) : hg_harp_load_file(e, path, &p);
  if (!st && o && o->shapesets && o->shapesets[0]) st = hg_lower_derive(e, p, fill_syms, (void *)o, g, defaults);
  else if (!st) st = hg_lower_or_bind(e, p, fill_syms, (void *)o, g, defaults);
  hg_program_free(p);
  return st;
}

harp_status api_compile_src(harp_error *e, const api_src *src, const harp_options *o, harp_compiled **out) {
  *out = NULL;
  harp_options on;
  bool autobox = api_autobox_wanted(o);
  if (o && o->shapesets && !api_boxes(o)) on = *o, on.shapesets = NULL, o = &on; /* "auto" / "exact" */
  const char *path = src->path;
  const char *dot = src->format ? src->format : strrchr(path, '.');
  if (dot && *dot == '.') dot++;
  tiny_graph *g = NULL;
  tiny_symtab defaults;
  tiny_symtab_init(&defaults);
  onnx_model om = {0};
  bool onnx = dot && !strcmp(dot, "onnx");
  harp_status st;
  if (dot && (!strcmp(dot, "json") || !strcmp(dot, "harp"))) {
    st = load_graph(e, src, dot, o, &g, &defaults);
  } else if (onnx) {
    st = load_onnx(e, src, o, &om);
    if (!st && om.flow) { /* run-time control flow: a host program */
      tiny_symtab_free(&defaults);
      return compile_flow(e, &om, o, out);
    }
    if (!st && autobox && om.nbound) { /* harp's box around the binding, when its tier says so (api_autobox.c) */
      bool done = false;
      if (!(st = api_autobox_compile(e, src, o, &om, out, &done)) && done) {
        onnx_model_free(&om);
        tiny_symtab_free(&defaults);
        return HARP_OK;
      }
    }
    bool boxed = o && o->shapesets && o->shapesets[0]; /* an expression of the box's symbols: a derived symbol */
    if (!st) st = (boxed ? hg_lower_derive : hg_lower_or_bind)(e, om.program, fill_syms, (void *)o, &g, &defaults);
    if (!st) mark_weights(g, &om);
  } else {
    st = ut_fail_at(e, HARP_E_USAGE, path, 0, 0, "unknown model %s (expected .json, .harp or .onnx)", src->format ? "format" : "extension");
  }
  if (!st) st = api_progress(e, o, "load", 0.05);
  if (st) {
    tiny_graph_free(g);
    tiny_symtab_free(&defaults);
    onnx_model_free(&om);
    return st;
  }
  /* the DSL's defaults come after the caller's bindings */
  const char **syms = ut_xcalloc((size_t)defaults.n + 64 + 1, sizeof(char *));
  char (*buf)[160] = ut_xcalloc((size_t)defaults.n + 1, sizeof *buf);
  int n = 0;
  if (!syms || !buf) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0; !st && o && o->syms && o->syms[i] && n < 64; i++) syms[n++] = o->syms[i];
  for (int i = 0; !st && i < defaults.n; i++) {
    /* a symbol the caller binds, or a ShapeSet's (bound per run), keeps no default */
    bool given = names_sym(syms, n, defaults.names[i]);
    for (int k = 0; o && o->shapesets && o->shapesets[k] && !given; k++) given = names_sym(&o->shapesets[k], 1, defaults.names[i]);
    if (given) continue;
    snprintf(buf[i], sizeof buf[i], "%s=%lld", defaults.names[i], (long long)defaults.values[i]);
    syms[n++] = buf[i];
  }
  harp_options oo = o ? *o : (harp_options){0};
  oo.syms = syms;
  char **sets = NULL; /* an ONNX model's ShapeSets named by their shape variables */
  if (!st && onnx && o && o->shapesets && !(st = api_sgen_onnx(e, &om, o, &sets))) oo.shapesets = (const char *const *)sets;
  if (!st) st = harp_compile_graph(e, g, &oo, out);
  else tiny_graph_free(g);
  if (!st && onnx && ((st = fill_embedded(e, *out, &om)) || (st = keep_source_names(e, *out, &om)))) {
    harp_compiled_free(*out);
    *out = NULL;
  }
  for (int i = 0; sets && sets[i]; i++) free(sets[i]);
  free(sets);
  free(syms);
  free(buf);
  tiny_symtab_free(&defaults);
  onnx_model_free(&om);
  return st;
}

harp_status harp_compile_file(harp_error *e, const char *path, const harp_options *o, harp_compiled **out) {
  return api_compile_src(e, &(api_src){.path = path}, o, out);
}

const tiny_graph *api_graph(const harp_compiled *c, const tiny_symtab **syms) {
  *syms = &c->syms;
  return c->flow ? NULL : c->g;
}

const void *harp_embedded_params(const harp_compiled *c) { return c->flow ? flow_sig_embedded(c->flow) : c->embedded; }

/* ---- metadata (a host program answers for a model with run-time control flow) ---- */
int harp_num_inputs(const harp_compiled *c) { return c->flow ? flow_sig_count(c->flow, false) : c->ninputs; }
int harp_num_outputs(const harp_compiled *c) { return c->flow ? flow_sig_count(c->flow, true) : c->g->noutputs; }
const char *harp_input_name(const harp_compiled *c, int k) {
  return c->flow ? flow_sig_name(c->flow, false, k) : c->g->nodes[c->inputs[k]].a.input.tensor_id;
}
const char *harp_output_name(const harp_compiled *c, int k) {
  return c->flow ? flow_sig_name(c->flow, true, k) : tiny_output_name(c->g, c->g->outputs[k]);
}
harp_dtype harp_input_dtype(const harp_compiled *c, int k) {
  return (harp_dtype)(c->flow ? flow_sig_dtype(c->flow, false, k) : c->g->nodes[c->inputs[k]].dtype);
}
harp_dtype harp_output_dtype(const harp_compiled *c, int k) {
  return (harp_dtype)(c->flow ? flow_sig_dtype(c->flow, true, k) : c->g->nodes[c->g->outputs[k]].dtype);
}

static int shape_of(const tiny_node *n, int64_t *shape) {
  for (int d = 0; d < n->shape.rank; d++) shape[d] = n->shape.d[d].n;
  return n->shape.rank;
}
int harp_input_shape(const harp_compiled *c, int k, int64_t *shape) {
  if (c->bind) return memcpy(shape, c->bind[k], sizeof c->bind[k]), c->g->nodes[c->inputs[k]].shape.rank;
  if (c->ss) return api_sgen_shape(c->ss, &c->g->nodes[c->inputs[k]], k, shape);
  return c->flow ? flow_sig_shape(c->flow, false, k, shape) : shape_of(&c->g->nodes[c->inputs[k]], shape);
}
int harp_output_shape(const harp_compiled *c, int k, int64_t *shape) {
  if (c->bind) return memcpy(shape, c->bind[c->ninputs + k], sizeof c->bind[0]), c->g->nodes[c->g->outputs[k]].shape.rank;
  if (c->ss) return api_sgen_shape(c->ss, &c->g->nodes[c->g->outputs[k]], k, shape);
  return c->flow ? flow_sig_shape(c->flow, true, k, shape) : shape_of(&c->g->nodes[c->g->outputs[k]], shape);
}
size_t harp_arena_bytes(const harp_compiled *c) { return c->flow || !c->f ? 0 : c->f->required_memory; }
const api_sgen *api_shapesets(const harp_compiled *c) { return c->ss; }
void api_set_bind(harp_compiled *c, int64_t (*bind)[HARP_MAX_RANK]) {
  free(c->bind);
  c->bind = bind;
}
api_shaped **api_model_shaped(harp_model *m) { return &m->shaped; }
size_t harp_params_bytes(const harp_compiled *c) { return c->flow ? flow_sig_params_bytes(c->flow) : c->params_bytes; }

int64_t harp_param_offset(const harp_compiled *c, const char *name) {
  if (c->flow) return flow_sig_param_offset(c->flow, name);
  for (int k = 0; k < c->nparams; k++)
    if (!strcmp(c->g->nodes[c->params[k]].a.input.tensor_id, name)) return c->param_off[k];
  return -1;
}

/* ---- instances ------------------------------------------------------------------- */
harp_model *harp_model_init(const harp_compiled *c, const void *params, size_t nbytes) {
  harp_error e = {0};
  return api_model_new(&e, c, params, nbytes, 0, 0);
}

const harp_compiled *api_model_compiled(const harp_model *m) { return m->c; }
bool api_model_on_device(const harp_model *m) { return m->gpu != NULL; }
harp_backend api_backend(const harp_compiled *c) { return c->backend; }

harp_model *api_model_new(harp_error *err, const harp_compiled *c, const void *params, size_t nbytes, int threads,
                          int device) {
  if (!c || nbytes != harp_params_bytes(c) || (nbytes && !params)) return NULL;
  harp_model *m = ut_xcalloc(1, sizeof *m);
  if (!m) return NULL;
  m->c = c;
  if (c->flow) { /* its own executor: segments compiled when first run */
    if (!(m->flow = flow_inst_new(c->flow, params, nbytes))) {
      free(m);
      return NULL;
    }
    return m;
  }
  harp_error e = {0};
  m->threads = threads;
  if (c->ss) { /* ShapeSets: the one object's instance, the parameter block kept (api_sgen.c) */
    if (!(m->shaped = api_shaped_new(c, params, nbytes, threads))) {
      free(m);
      return NULL;
    }
    return m;
  }
  if (c->backend == HARP_BACKEND_CPU && rt_cpu_ready(&e, c->cpu)) {
    m->inst = rt_cpu_instance_new_threads(c->cpu, params, nbytes, threads);
    if (!m->inst) {
      free(m);
      return NULL;
    }
    return m;
  }
  harp_error_clear(&e); /* a failed background build: tier 0 goes on (harp_compiled_warning says why) */
  /* the interpreter, CUDA, and a CPU model still on tier 0 (knob tier0):
   * the parameter block copied (tier 0 hands it over once the object is ready) */
  m->params = ut_xmalloc(nbytes ? nbytes : 1);
  if (!m->params) {
    free(m);
    return NULL;
  }
  if (nbytes) memcpy(m->params, params, nbytes);
  if (c->backend == HARP_BACKEND_CUDA) { /* its own context, module, device memory and graph; the build shared */
    if (rt_gpu_instance_on(err, c->gpu, device, &m->gpu)) {
      harp_model_free(m);
      return NULL;
    }
  }
  return m;
}

static ut_tensor header(const tiny_node *n, void *data) {
  ut_tensor t = {0};
  t.dtype = n->dtype;
  t.rank = shape_of(n, t.shape);
  t.data = data;
  t.nbytes = (size_t)tiny_shape_numel(&n->shape) * (size_t)tiny_dtype_size(n->dtype);
  return t;
}

/* The interpreter and the CUDA backend take every input, weights included,
 * as tensors in tiny_inputs order; the interpreter returns outputs it
 * allocates, the CUDA backend downloads into the caller's buffers. */
static int run_tensors(harp_model *m, const void *const *inputs, void *const *outputs) {
  const harp_compiled *c = m->c;
  const tiny_graph *g = c->g;
  int *ins = NULL;
  int n = tiny_inputs(g, &ins);
  ut_tensor *t = ut_xcalloc((size_t)n + 1, sizeof *t), *o = ut_xcalloc((size_t)g->noutputs + 1, sizeof *o);
  harp_error e = {0};
  int rc = 0;
  if (!ins || !t || !o) {
    snprintf(m->error, sizeof m->error, "out of memory");
    rc = 1;
    goto done;
  }
  for (int i = 0, ki = 0, kp = 0; i < n; i++) {
    const tiny_node *x = &g->nodes[ins[i]];
    t[i] = header(x, is_param(x) ? (void *)(m->params + c->param_off[kp++]) : (void *)inputs[ki++]);
  }
  harp_status st = m->gpu                          ? rt_gpu_run_into(&e, m->gpu, t, n, outputs)
                   : c->backend == HARP_BACKEND_CPU ? rt_cpu_run_tier0(&e, c->cpu, t, n, o)
                                                    : tiny_interp(&e, g, &c->syms, t, n, o);
  if (st) {
    char buf[1024];
    harp_error_format(&e, buf, sizeof buf);
    snprintf(m->error, sizeof m->error, "%s", buf);
    rc = 1;
    goto done;
  }
  for (int k = 0; !m->gpu && k < g->noutputs; k++) {
    memcpy(outputs[k], o[k].data, o[k].nbytes);
    ut_tensor_free(&o[k]);
  }
done:
  free(ins);
  free(t);
  free(o);
  return rc;
}

/* A CUDA instance's run on device memory (api_ext.c checks m): every input
 * as rt_gpu_run_device takes it, the weights from m's parameter block. */
harp_status api_run_device(harp_error *e, harp_model *m, const void *const *inputs, void *const *outputs, void *stream) {
  const harp_compiled *c = m->c;
  int *ins = NULL, n = tiny_inputs(c->g, &ins), nin = harp_num_inputs(c), nout = harp_num_outputs(c);
  ut_tensor *t = ut_xcalloc((size_t)n + 1, sizeof *t);
  uint64_t *in = ut_xcalloc((size_t)nin + 1, sizeof *in), *out = ut_xcalloc((size_t)nout + 1, sizeof *out);
  harp_status st = ins && t && in && out ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (int i = 0, kp = 0; !st && i < n; i++) { /* the inputs' data is the device's: only the headers */
    const tiny_node *x = &c->g->nodes[ins[i]];
    t[i] = header(x, is_param(x) ? (void *)(m->params + c->param_off[kp++]) : NULL);
  }
  for (int k = 0; !st && k < nin; k++) in[k] = (uint64_t)(uintptr_t)inputs[k];
  for (int k = 0; !st && k < nout; k++) out[k] = (uint64_t)(uintptr_t)outputs[k];
  if (!st) st = rt_gpu_run_device(e, m->gpu, t, n, in, out, stream);
  free(ins);
  free(t);
  free(in);
  free(out);
  return st;
}

int harp_model_run(harp_model *m, const void *const *inputs, void *const *outputs) {
  if (!m) return -1;
  m->error[0] = 0;
  if (m->flow) return flow_inst_run(m->flow, inputs, outputs, m->error, sizeof m->error);
  if (m->c->bind) { /* a box harp chose: at the binding it was compiled for */
    harp_error e = {0};
    const int64_t **in_shapes = ut_xcalloc((size_t)m->c->ninputs + 1, sizeof *in_shapes);
    for (int j = 0; in_shapes && j < m->c->ninputs; j++) in_shapes[j] = m->c->bind[j];
    if (!in_shapes) ut_fail(&e, HARP_E_NO_MEMORY, NULL, "out of memory");
    int rc = !in_shapes || harp_model_run_shaped(&e, m, inputs, in_shapes, outputs) != HARP_OK;
    if (rc) harp_error_format(&e, m->error, (int)sizeof m->error);
    harp_error_clear(&e);
    free(in_shapes);
    return rc;
  }
  if (m->c->ss) {
    snprintf(m->error, sizeof m->error, "a model compiled with ShapeSets runs with each input's shape: harp_model_run_shaped");
    return 1;
  }
  m->last_tier0 = false;
  if (m->c->backend != HARP_BACKEND_CPU) return run_tensors(m, inputs, outputs);
  if (!m->inst) { /* tier 0 (knob tier0) until the object is ready, then an instance of it */
    harp_error e = {0};
    if (rt_cpu_ready(&e, m->c->cpu) && !(m->inst = rt_cpu_instance_new_threads(m->c->cpu, m->params, harp_params_bytes(m->c), m->threads))) {
      snprintf(m->error, sizeof m->error, "model_init failed");
      return 1;
    }
    harp_error_clear(&e); /* a failed background build: tier 0 goes on (harp_compiled_warning says why) */
    if (!m->inst) {
      m->last_tier0 = true;
      return run_tensors(m, inputs, outputs);
    }
    free(m->params); /* the instance copied or packed what it keeps */
    m->params = NULL;
  }
  int rc = rt_cpu_instance_run(m->c->cpu, m->inst, inputs, outputs);
  if (rc) {
    const char *k = rt_cpu_error_kernel(m->c->cpu, rc);
    snprintf(m->error, sizeof m->error, "kernel %s stopped: an index is out of range", k ? k : "?");
  }
  return rc;
}

const char *harp_model_error(const harp_model *m) { return m && m->error[0] ? m->error : NULL; }
int harp_model_last_tier0(const harp_model *m) { return m && m->last_tier0; }

harp_status harp_compiled_wait(harp_error *e, harp_compiled *c) {
  if (!c) return ut_fail(e, HARP_E_USAGE, NULL, "harp_compiled_wait: no compiled model");
  double ms;
  return c->cpu ? rt_cpu_wait_build(e, c->cpu, &ms) : HARP_OK;
}

const void *harp_model_output(const harp_model *m, int k, int64_t *shape, int *rank) {
  if (m && m->shaped) return api_shaped_output(m->shaped, k, shape, rank);
  return m && m->flow ? flow_inst_output(m->flow, k, shape, rank) : NULL;
}

void harp_model_free(harp_model *m) {
  if (!m) return;
  flow_inst_free(m->flow);
  api_shaped_free(m->c, m->shaped);
  if (m->c->backend == HARP_BACKEND_CPU && !m->flow && m->inst) rt_cpu_instance_free(m->c->cpu, m->inst);
  rt_gpu_free(m->gpu);
  free(m->params);
  free(m);
}

uint16_t harp_f32_to_f16(float f) { return ut_f32_to_f16(f); }
float harp_f16_to_f32(uint16_t h) { return ut_f16_to_f32(h); }
uint16_t harp_f32_to_bf16(float f) { return ut_f32_to_bf16(f); }
float harp_bf16_to_f32(uint16_t h) { return ut_bf16_to_f32(h); }
