/* cmd_compile.c — `harp compile MODEL --target cpu|sm80|sm90 -o DIR`: a
 * standalone package that builds and runs with a plain C compiler, without
 * harp (GPU packages: the CUDA C, its PTX when NVRTC is there, and a host
 * loader over the CUDA driver API).  With --shapeset (cpu): one package for
 * every binding of a box of shape symbols (standalone_ss.c).  With
 * --sources-only (cpu): the same sources, no C compiler, no expected/. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/c/standalone.h"
#include "backend/cuda/standalone_cuda.h"
#include "cli.h"
#include "harp/cpu.h"
#include "harp/function.h"
#include "harp/gpu.h"
#include "harp/interp.h"
#include "harp/sgen.h"
#include "util/util.h"

static const char compile_help[] =
    "usage: harp compile MODEL --target cpu|sm80|sm90 -o DIR [options]\n\n"
    "MODEL is chosen by extension: .json, .harp, .onnx (its initializers go to\n"
    "weights.bin).\n"
    "Write a standalone package to DIR:\n"
    "  model.c      cpu: the generated C (kernels, thread pool, the model_* ABI)\n"
    "  model.cu     sm80/sm90: the CUDA C of every kernel (inline PTX)\n"
    "  model.ptx    sm80/sm90: its PTX (sm_80 / sm_90a), when NVRTC is available;\n"
    "               model_ptx.c holds it as a C string (else make runs nvcc)\n"
    "  model_host.c sm80/sm90: model_init / model_run / model_free over the CUDA\n"
    "               driver API (libcuda loaded with dlopen), gpu.json the launches\n"
    "  model.h      the ABI: model_init / model_run / model_free and metadata\n"
    "  weights.bin  the weights (--param), contiguous and aligned\n"
    "  Makefile     `make` builds model_main and runs it\n"
    "  main.c       reads inputs/<name>.npy, writes outputs/<name>.npy\n"
    "  inputs/      example inputs (from --input, else random with --seed)\n"
    "  expected/    what `harp run` computes for those inputs (sm80/sm90: the\n"
    "               reference interpreter, or the CPU backend for a model too\n"
    "               large for it; no GPU is needed to compile)\n"
    "  README.md    sm80/sm90: what is where, how to build and run\n\n"
    "options:\n"
    "  --target T             cpu, sm80 (any sm_80+ GPU) or sm90 (Hopper: TMA + wgmma)\n"
    "  --precision P          sm80/sm90: how fp32 contractions compute: tf32 (default),\n"
    "                         fp32 (strict, no tensor cores), fp16, bf16; cpu: fp32\n"
    "                         (default) or bf16 (matmuls and convs in bf16, fp32\n"
    "                         accumulation; the package runs them in bf16 where the\n"
    "                         CPU has AVX512_BF16, else in fp32)\n"
    "  --param NAME=FILE.npy  a weight: baked into weights.bin (repeatable)\n"
    "  --input NAME=FILE.npy  an example input (binds its shape symbols)\n"
    "  --sym NAME=INT         bind a shape symbol (repeatable)\n"
    "  --shape NAME=DIMS      an ONNX graph input's shape (x=1x3x640x640; repeatable):\n"
    "                         a dynamic dim needs it, an --input file or --sym\n"
    "  --seed N               seed of the random example inputs (default 1)\n"
    "  --knob NAME=VALUE      set a knob of the library (harp --help-options; repeatable)\n"
    "  --shapeset NAME=LO..HI cpu: one package for every binding of the symbol NAME\n"
    "                         in LO..HI (repeatable; an ONNX dim_param, \"x_d2\" or\n"
    "                         \"x:2\"): model_shapes.c checks a binding and gives the\n"
    "                         shapes at it, model.h's last section declares\n"
    "                         model_bind_inputs / model_output_shape_at /\n"
    "                         model_run_shape, main.c reads inputs of any shape in the\n"
    "                         box; one outside it (or breaking the model) is refused\n"
    "                         before anything runs, no output written.  The example\n"
    "                         inputs are at the box's upper corner unless --input or\n"
    "                         --sym say otherwise; an instance's arena is the upper\n"
    "                         corner's bytes, all touched at its first run (a\n"
    "                         binding: model_required_memory_at).  A model\n"
    "                         whose kernels cannot all take their sizes at run time\n"
    "                         is refused with the reason (docs/c-api.md, \"ShapeSet\n"
    "                         packages\")\n"
    "  --time-stages          print each compile stage's time to stderr\n"
    "  --sources-only         cpu: write the package's sources (model.c, model.h, main.c,\n"
    "                         Makefile, weights.bin, inputs/) without running the C\n"
    "                         compiler: no expected/ (the same model.c as without it;\n"
    "                         not with --shapeset)\n";

/* Write into DIR/.harp-tmp-PID first, then rename each file into place. */
typedef struct pkg {
  char dir[2048], tmp[2100];
  const char *names[256];
  int n;
} pkg;

/* p for a package into dir, written first into dir/.harp-tmp-PID. */
static void pkg_open(pkg *p, const char *dir) {
  memset(p, 0, sizeof *p);
  snprintf(p->dir, sizeof p->dir, "%s", dir);
  snprintf(p->tmp, sizeof p->tmp, "%s/.harp-tmp-%ld", dir, (long)getpid());
}

static harp_status pkg_add(harp_error *e, pkg *p, const char *rel, const void *data, size_t len) {
  char path[4300];
  if (p->n >= (int)(sizeof p->names / sizeof p->names[0]))
    return ut_fail(e, HARP_E_LIMIT, rel, "a package holds at most %d files", (int)(sizeof p->names / sizeof p->names[0]));
  snprintf(path, sizeof path, "%s/%s", p->tmp, rel);
  char *slash = strrchr(path, '/');
  *slash = 0;
  if (ut_mkdirs(e, path)) return e->code;
  *slash = '/';
  if (ut_write_file_atomic(e, path, data, len)) return e->code;
  p->names[p->n++] = rel;
  return HARP_OK;
}

static harp_status pkg_add_tensor(harp_error *e, pkg *p, const char *rel, const ut_tensor *t) {
  char path[4300];
  if (p->n >= (int)(sizeof p->names / sizeof p->names[0]))
    return ut_fail(e, HARP_E_LIMIT, rel, "a package holds at most %d files", (int)(sizeof p->names / sizeof p->names[0]));
  snprintf(path, sizeof path, "%s/%s", p->tmp, rel);
  char *slash = strrchr(path, '/');
  *slash = 0;
  if (ut_mkdirs(e, path)) return e->code;
  *slash = '/';
  if (ut_npy_write(e, path, t)) return e->code;
  p->names[p->n++] = rel;
  return HARP_OK;
}

static void pkg_cleanup(pkg *p) {
  for (int k = 0; k < p->n; k++) {
    char path[4300];
    snprintf(path, sizeof path, "%s/%s", p->tmp, p->names[k]);
    unlink(path);
  }
  char sub[2200];
  snprintf(sub, sizeof sub, "%s/inputs", p->tmp);
  rmdir(sub);
  snprintf(sub, sizeof sub, "%s/expected", p->tmp);
  rmdir(sub);
  rmdir(p->tmp);
}

static harp_status pkg_commit(harp_error *e, pkg *p) {
  for (int k = 0; k < p->n; k++) {
    char from[4300], to[4300];
    snprintf(from, sizeof from, "%s/%s", p->tmp, p->names[k]);
    snprintf(to, sizeof to, "%s/%s", p->dir, p->names[k]);
    char *slash = strrchr(to, '/');
    *slash = 0;
    if (ut_mkdirs(e, to)) return e->code;
    *slash = '/';
    if (rename(from, to) != 0) return ut_fail_at(e, HARP_E_IO, to, 0, 0, "cannot write: %s", strerror(errno));
  }
  return HARP_OK;
}

static char *names_buf(const char *dir, const char *name) {
  char safe[160];
  ut_sanitize_name(name, safe, sizeof safe);
  char *s = malloc(strlen(dir) + strlen(safe) + 8);
  if (s) sprintf(s, "%s/%s.npy", dir, safe);
  return s;
}

/* The example inputs and what the model computes for them. */
/* weights.bin: the ConstPool of the weights (--param, ONNX initializers),
 * as many as the model has. */
static harp_status constpool_of(harp_error *e, const fn_function *f, const cli_model *m, fn_constpool *cp, int *np) {
  ut_tensor *params = calloc((size_t)f->nargs + 1, sizeof *params);
  if (!params) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  *np = 0;
  for (int a = 0; a < f->nargs; a++)
    if (f->buffers[f->args[a]].kind == FN_PARAM) params[(*np)++] = m->inputs[a];
  harp_status st = fn_constpool_from_tensors(e, f, params, *np, cp);
  free(params);
  return st;
}

static harp_status add_examples(harp_error *e, pkg *p, const cli_model *m, const fn_function *f, const ut_tensor *outs,
                              char **freeable, int *nfree) {
  for (int a = 0; a < f->nargs; a++) {
    const fn_buffer *b = &f->buffers[f->args[a]];
    if (b->kind != FN_INPUT) continue;
    char *rel = freeable[(*nfree)++] = names_buf("inputs", tiny_output_name(m->g, b->node));
    if (!rel) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    if (pkg_add_tensor(e, p, rel, &m->inputs[a])) return e->code;
  }
  for (int k = 0; outs && k < m->g->noutputs; k++) { /* outs NULL (--sources-only): no expected/ */
    char *rel = freeable[(*nfree)++] = names_buf("expected", tiny_output_name(m->g, m->g->outputs[k]));
    if (!rel) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    if (pkg_add_tensor(e, p, rel, &outs[k])) return e->code;
  }
  return HARP_OK;
}

/* expected/ of a GPU package: the reference interpreter's outputs; where it
 * cannot hold the model's intermediates (a 4096^3 GEMM's broadcast product),
 * the CPU backend's, which computes the same values without materialising them. */
static harp_status expected_outputs(harp_error *e, const cli_opts *o, const cli_model *m, ut_tensor *outs) {
  /* a value over 2^28 elements (1 GiB in fp32) is not tried: calloc may
   * overcommit, and touching it would swap or be killed */
  int64_t big = 0;
  for (int i = 0; i < m->g->n; i++) {
    int64_t n = tiny_shape_numel(&m->g->nodes[i].shape);
    if (n > big) big = n;
  }
  if (big <= ((int64_t)1 << 28)) {
    if (!tiny_interp(e, m->g, &m->syms, m->inputs, m->ninputs, outs)) return HARP_OK;
    if (e->code != HARP_E_NO_MEMORY) return e->code;
    *e = (harp_error){0};
  }
  fprintf(stderr, "harp: note: the interpreter would hold %lld elements at once; expected/ comes from the CPU backend\n",
          (long long)big);
  rt_cpu_model *cm = NULL;
  rt_knobs k = o->knobs;
  k.tier0 = RT_TIER0_OFF; /* the object, not tier 0's interpreter, computes what the interpreter cannot hold */
  rt_cpu_opts co = {.knobs = &k};
  harp_status st = rt_cpu_compile(e, m->g, &m->syms, &co, &cm);
  if (!st) st = rt_cpu_run(e, cm, m->inputs, m->ninputs, outs);
  rt_cpu_free(cm);
  return st;
}

static harp_status add_text(harp_error *e, pkg *p, const char *rel, ut_str *text) {
  if (text->oom) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  harp_status st = pkg_add(e, p, rel, text->buf ? text->buf : "", text->len);
  ut_str_free(text);
  return st;
}

/* sm80 / sm90: model.cu (+ its PTX), the host loader, and what the CPU
 * package has besides model.c.  Needs no GPU; NVRTC is optional. */
static int compile_gpu(cli_opts *o, const char *target) {
  harp_error e = {0};
  o->random_inputs = true;
  cli_model m;
  rt_gpu_model *gm = NULL;
  ut_tensor *outs = NULL;
  fn_constpool cp = {0};
  pkg p;
  pkg_open(&p, o->out_dir);
  ut_str text;
  ut_str_init(&text);
  char **freeable = NULL, *json = NULL;
  int nfree = 0, rc;
  rt_gpu_opts go = {.knobs = &o->knobs, .target = target, .precision = o->precision};
  if (cli_load_model(&e, o, true, &m) || rt_gpu_build(&e, m.g, &m.syms, &go, &gm)) goto fail;
  cli_print_stage_times(o, &m, rt_gpu_stages(gm));
  const fn_function *f = rt_gpu_function(gm);
  const cuda_model_tu *tu = rt_gpu_tu(gm);
  outs = calloc((size_t)m.g->noutputs + 1, sizeof *outs);
  if (!outs) {
    ut_fail(&e, HARP_E_NO_MEMORY, NULL, "out of memory");
    goto fail;
  }
  if (expected_outputs(&e, o, &m, outs)) goto fail;
  int np = 0;
  if (constpool_of(&e, f, &m, &cp, &np)) goto fail;
  /* the PTX when NVRTC is there (a missing NVRTC is said, not an error) */
  const char *ptx = NULL;
  harp_error pe = {0};
  if (rt_gpu_ptx(&pe, gm, &ptx) != HARP_OK && pe.code != HARP_E_UNSUPPORTED) {
    e = pe;
    goto fail;
  }
  if (ut_mkdirs(&e, p.tmp)) goto fail;
  const char *src = rt_gpu_source(gm);
  if (pkg_add(&e, &p, "model.cu", src, strlen(src))) goto fail;
  if (ptx) {
    if (pkg_add(&e, &p, "model.ptx", ptx, strlen(ptx))) goto fail;
    cuda_standalone_ptx_c(&text, ptx);
    if (add_text(&e, &p, "model_ptx.c", &text)) goto fail;
  }
  cuda_standalone_host(&text, tu);
  if (add_text(&e, &p, "model_host.c", &text)) goto fail;
  cgen_standalone_header(&text);
  if (add_text(&e, &p, "model.h", &text)) goto fail;
  cgen_standalone_main(&text);
  if (add_text(&e, &p, "main.c", &text)) goto fail;
  cuda_standalone_makefile(&text, tu);
  if (add_text(&e, &p, "Makefile", &text)) goto fail;
  cuda_standalone_readme(&text, tu, ptx != NULL);
  if (add_text(&e, &p, "README.md", &text)) goto fail;
  if (rt_gpu_dump_json(&e, gm, &json) || pkg_add(&e, &p, "gpu.json", json, strlen(json))) goto fail;
  if (pkg_add(&e, &p, "weights.bin", cp.data, cp.size)) goto fail;
  if (!(freeable = calloc((size_t)f->nargs + (size_t)m.g->noutputs + 1, sizeof *freeable))) {
    ut_fail(&e, HARP_E_NO_MEMORY, NULL, "out of memory");
    goto fail;
  }
  if (add_examples(&e, &p, &m, f, outs, freeable, &nfree)) goto fail;
  if (pkg_commit(&e, &p)) goto fail;
  pkg_cleanup(&p);
  int t, sk, gk;
  rt_gpu_counts(gm, &t, &sk, &gk);
  printf("wrote %s: model.cu%s model_host.c model.h main.c Makefile README.md gpu.json weights.bin (%zu bytes); "
         "%s, %d launches (%d template, %d simple, %d generic); build: make -C %s\n",
         p.dir, ptx ? " model.ptx model_ptx.c" : "", cp.size, rt_gpu_nvrtc_arch(gm), t + sk + gk, t, sk, gk, p.dir);
  if (!ptx) printf("no PTX: %s (make builds it with nvcc)\n", pe.msg);
  rc = 0;
  goto done;
fail:
  if (p.tmp[0]) pkg_cleanup(&p);
  rc = cli_report(&e);
done:
  for (int k = 0; k < nfree; k++) free(freeable[k]);
  free(freeable);
  if (outs && m.g)
    for (int k = 0; k < m.g->noutputs; k++) ut_tensor_free(&outs[k]);
  free(outs);
  free(json);
  fn_constpool_free(&cp);
  ut_str_free(&text);
  rt_gpu_free(gm);
  cli_model_free(&m);
  return rc;
}

/* A CPU package's last files into p, then p committed: weights.bin (cp),
 * the example inputs and expected/ (outs; none when NULL); *freeable gets the names
 * (free_tail frees them). */
static harp_status add_tail(harp_error *e, pkg *p, const cli_model *m, const fn_function *f, const ut_tensor *outs,
                            const fn_constpool *cp, char ***freeable, int *nfree) {
  if (pkg_add(e, p, "weights.bin", cp->data, cp->size)) return e->code;
  if (!(*freeable = calloc((size_t)f->nargs + (size_t)m->g->noutputs + 1, sizeof **freeable)))
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (add_examples(e, p, m, f, outs, *freeable, nfree) || pkg_commit(e, p)) return e->code;
  pkg_cleanup(p);
  return HARP_OK;
}

/* What add_tail's caller holds: the names, m's outputs. */
static void free_tail(char **freeable, int nfree, ut_tensor *outs, const cli_model *m) {
  for (int k = 0; k < nfree; k++) free(freeable[k]);
  free(freeable);
  if (outs && m->g)
    for (int k = 0; k < m->g->noutputs; k++) ut_tensor_free(&outs[k]);
  free(outs);
}

/* A ShapeSet package's example binding: each --shapeset symbol that no
 * --sym binds at its box's upper corner, when no --input file gives the
 * shapes (a name that is not the symbol's, "x:2", needs --sym). */
static harp_status example_binding(harp_error *e, cli_opts *o) {
  if (o->ninputs) return HARP_OK;
  for (int k = 0; k < o->nshapesets; k++) {
    char name[64];
    rt_sgen_sym y;
    int64_t v;
    if (rt_sgen_parse_box(e, o->shapesets[k], "--shapeset", name, sizeof name, &y)) return e->code;
    if (!tiny_symtab_get(&o->syms, name, &v) && strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") ==
                                                    strlen(name) &&
        tiny_symtab_set(e, &o->syms, name, y.hi))
      return e->code;
  }
  return HARP_OK;
}

/* The package's shapes at the example binding against what harp computed
 * there (outs): an output size the package cannot compute from the box's
 * symbols is refused here, not found wrong later. */
static harp_status check_example(harp_error *e, rt_sgen *s, const cli_model *m, const cgen_ss *ss, const ut_tensor *outs) {
  long long v[RT_SGEN_MAX_GEN];
  if (rt_sgen_bind(e, s, m->inputs, m->ninputs, v))
    return ut_fail(e, e->code, NULL, "the example inputs are not a binding the package serves: %s", e->msg);
  tiny_symtab t;
  tiny_symtab_init(&t);
  harp_status st = HARP_OK;
  for (int i = 0; i < ss->ngen && !st; i++) st = tiny_symtab_set(e, &t, ss->gen[i], v[i]);
  for (int k = 0; k < m->g->noutputs && !st; k++) {
    int64_t dims[TINY_MAX_RANK];
    bool ok = cgen_ss_output_dims(ss, &t, k, dims);
    for (int d = 0; ok && d < outs[k].rank; d++) ok = dims[d] == outs[k].shape[d];
    if (!ok)
      st = ut_fail(e, HARP_E_UNSUPPORTED, tiny_output_name(m->g, m->g->outputs[k]),
                   "output %d's shape is not one the package can compute from the ShapeSet's symbols", k);
  }
  tiny_symtab_free(&t);
  return st;
}

/* The text files of a ShapeSet package into p: model.c, model_shapes.c,
 * model.h, main.c, Makefile, README.md. */
static harp_status add_shapeset_text(harp_error *e, pkg *p, rt_sgen *s, const cgen_ss *ss) {
  ut_str text;
  ut_str_init(&text);
  const char *src = rt_sgen_source(s);
  if (!src) return ut_fail(e, HARP_E_INTERNAL, NULL, "the ShapeSet object kept no source");
  if (pkg_add(e, p, "model.c", src, strlen(src))) return e->code;
  if (!cgen_ss_shapes(ss, &text)) {
    ut_str_free(&text);
    return ut_fail(e, HARP_E_UNSUPPORTED, NULL, "an input's or output's size, or a derived size, is not one the package can "
                   "compute from the ShapeSet's symbols");
  }
  if (add_text(e, p, "model_shapes.c", &text)) return e->code;
  cgen_standalone_header(&text);
  cgen_ss_header(&text);
  if (add_text(e, p, "model.h", &text)) return e->code;
  cgen_ss_main(&text);
  if (add_text(e, p, "main.c", &text)) return e->code;
  cgen_standalone_makefile(&text, "model_shapes.c");
  if (add_text(e, p, "Makefile", &text)) return e->code;
  cgen_ss_readme(ss, &text);
  return add_text(e, p, "README.md", &text);
}

/* --shapeset: one package for every binding of the box (harp/sgen.h's one
 * object, its source portable), refused with the reason when no one object
 * serves the box. */
static int compile_shapeset(cli_opts *o) {
  harp_error e = {0};
  o->random_inputs = true;
  o->knobs.tier0 = RT_TIER0_OFF;
  cli_model m;
  memset(&m, 0, sizeof m);
  rt_sgen *s = NULL;
  ut_tensor *outs = NULL;
  fn_constpool cp = {0};
  pkg p;
  pkg_open(&p, o->out_dir);
  char **freeable = NULL;
  int nfree = 0, rc, np = 0;
  rt_sgen_layout l;
  rt_sgen_dim(*codes)[TINY_MAX_RANK] = NULL;
  rt_cpu_opts co = {.knobs = &o->knobs, .keep_source = true, .portable = true, .precision = o->precision,
                    .max_memory = o->max_memory};
  if (example_binding(&e, o) || cli_load_model(&e, o, true, &m) || cli_shapeset_compile_with(&e, o, &m, &co, &s)) goto fail;
  if (!rt_sgen_layout_of(s, &l)) { /* the portable code's other ISA variants may print sizes: this machine's alone */
    fprintf(stderr, "harp: note: the portable code does not serve the ShapeSet (%s); the package's code is for this "
            "machine's ISA only\n", rt_sgen_fallback(s));
    rt_sgen_free(s);
    s = NULL;
    co.portable = false;
    if (cli_shapeset_compile_with(&e, o, &m, &co, &s)) goto fail;
  }
  if (!rt_sgen_layout_of(s, &l)) {
    ut_fail(&e, HARP_E_UNSUPPORTED, NULL, "no one object serves the ShapeSet, so no one package can: %s; compile one package "
            "per binding (--sym / --shape)", rt_sgen_fallback(s));
    goto fail;
  }
  const fn_function *f = rt_cpu_function(rt_sgen_object(s));
  if (!(codes = calloc((size_t)l.g->n + 1, sizeof *codes)) || rt_sgen_dim_codes(&e, s, codes)) {
    if (!e.code) ut_fail(&e, HARP_E_NO_MEMORY, NULL, "out of memory");
    goto fail;
  }
  cgen_ss ss = {.g = l.g, .syms = l.syms, .f = f, .gen = l.gen, .ngen = l.ngen, .nbase = l.nbase, .lo = l.lo, .hi = l.hi,
                .codes = (const rt_sgen_dim(*)[TINY_MAX_RANK])codes};
  if (!(outs = calloc((size_t)m.g->noutputs + 1, sizeof *outs))) {
    ut_fail(&e, HARP_E_NO_MEMORY, NULL, "out of memory");
    goto fail;
  }
  if (rt_sgen_run(&e, s, m.inputs, m.ninputs, outs) || check_example(&e, s, &m, &ss, outs)) goto fail;
  if (constpool_of(&e, f, &m, &cp, &np) || ut_mkdirs(&e, p.tmp) || add_shapeset_text(&e, &p, s, &ss)) goto fail;
  if (add_tail(&e, &p, &m, f, outs, &cp, &freeable, &nfree)) goto fail;
  printf("wrote %s: model.c model_shapes.c model.h main.c Makefile README.md weights.bin (%zu bytes), %d inputs, %d outputs, "
         "one object for %d symbol(s) of the box; run: make -C %s\n",
         p.dir, cp.size, f->nargs - np, m.g->noutputs, l.nbase, p.dir);
  rc = 0;
  goto done;
fail:
  if (p.tmp[0]) pkg_cleanup(&p);
  rc = cli_report(&e);
done:
  free_tail(freeable, nfree, outs, &m);
  fn_constpool_free(&cp);
  free(codes);
  rt_sgen_free(s);
  cli_model_free(&m);
  return rc;
}

/* --target cpu: the package of o's model, its code portable (every ISA
 * variant); expected/ from the package's own object's run, or with
 * o->sources_only the code alone (no C compiler, no run, no expected/). */
static int compile_cpu(cli_opts *o) {
  harp_error e = {0};
  o->random_inputs = true; /* example inputs for what --input does not give */
  cli_model m;
  rt_cpu_model *cm = NULL;
  rt_compile *c = NULL;
  ut_tensor *outs = NULL;
  pkg p;
  pkg_open(&p, o->out_dir);
  ut_str text;
  ut_str_init(&text);
  fn_constpool cp = {0};
  char **freeable = NULL;
  int nfree = 0, rc, np = 0;
  /* expected/ is the package's own object's outputs, never tier 0's (on a
   * busy machine its first result could be, with other summation orders) */
  o->knobs.tier0 = RT_TIER0_OFF;
  rt_cpu_opts co = {.knobs = &o->knobs, .keep_source = true, .portable = true, .precision = o->precision};
  if (cli_load_model(&e, o, true, &m)) goto fail;
  if (o->sources_only ? rt_cpu_compile_code(&e, m.g, &m.syms, &co, NULL, NULL, 0, NULL, NULL, &c)
                      : rt_cpu_compile(&e, m.g, &m.syms, &co, &cm))
    goto fail;
  const rt_compile *stages = c ? c : rt_cpu_stages(cm);
  cli_print_stage_times(o, &m, stages);
  const fn_function *f = c ? c->f : rt_cpu_function(cm);
  if (!o->sources_only) {
    if (!(outs = calloc((size_t)m.g->noutputs + 1, sizeof *outs))) {
      ut_fail(&e, HARP_E_NO_MEMORY, NULL, "out of memory");
      goto fail;
    }
    if (rt_cpu_run(&e, cm, m.inputs, m.ninputs, outs)) goto fail;
  }
  /* weights.bin: the ConstPool of the --param tensors */
  if (constpool_of(&e, f, &m, &cp, &np) || ut_mkdirs(&e, p.tmp)) goto fail;
  const char *src = c ? c->source : rt_cpu_source(cm);
  if (!src) {
    ut_fail(&e, HARP_E_INTERNAL, NULL, "the compile kept no source");
    goto fail;
  }
  if (pkg_add(&e, &p, "model.c", src, strlen(src))) goto fail;
  cgen_standalone_header(&text);
  if (add_text(&e, &p, "model.h", &text)) goto fail;
  cgen_standalone_main(&text);
  if (add_text(&e, &p, "main.c", &text)) goto fail;
  cgen_standalone_makefile(&text, NULL);
  if (add_text(&e, &p, "Makefile", &text)) goto fail;
  if (add_tail(&e, &p, &m, f, outs, &cp, &freeable, &nfree)) goto fail;
  printf("wrote %s: model.c model.h main.c Makefile weights.bin (%zu bytes), %d inputs, %d outputs%s; run: make -C %s\n",
         p.dir, cp.size, f->nargs - np, m.g->noutputs, o->sources_only ? " (sources only: no expected/)" : "", p.dir);
  rc = 0;
  goto done;
fail:
  if (p.tmp[0]) pkg_cleanup(&p);
  rc = cli_report(&e);
done:
  free_tail(freeable, nfree, outs, &m);
  fn_constpool_free(&cp);
  ut_str_free(&text);
  rt_cpu_free(cm);
  rt_compile_free(c);
  cli_model_free(&m);
  return rc;
}

int cmd_compile(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(compile_help, stdout);
      return 0;
    }
  harp_error e = {0};
  cli_opts o;
  int rc = cli_parse(argc, argv, "compile", "target precision out sym shape input param seed knob time-stages shapeset sources-only",
                  &o, &e);
  if (!rc && o.nshapesets && o.target && strcmp(o.target, "cpu"))
    rc = cli_usage_error("compile", "--shapeset: a ShapeSet package is made for --target cpu only");
  /* a GPU package builds no object, and a ShapeSet package's sources come from checking its object */
  if (!rc && o.sources_only && o.target && strcmp(o.target, "cpu"))
    rc = cli_usage_error("compile", "--sources-only: for --target cpu only (a GPU package runs no C compiler)");
  if (!rc && o.sources_only && o.nshapesets)
    rc = cli_usage_error("compile", "--sources-only and --shapeset: a ShapeSet package is checked by running its object");
  if (rc) {
    cli_opts_free(&o);
    return rc;
  }
  if (!o.model || !strcmp(o.out_dir, ".")) {
    cli_opts_free(&o);
    return cli_usage_error("compile", "usage: harp compile MODEL --target cpu|sm80|sm90 -o DIR");
  }
  const char *arch = NULL;
  const rt_target *target = o.target ? rt_target_of_machine(o.target, &arch) : &rt_target_cpu;
  if (!target) {
    int r = cli_usage_error("compile", "unknown target '%s' (available: cpu, sm80, sm90)", o.target);
    cli_opts_free(&o);
    return r;
  }
  if (target == &rt_target_cuda || o.nshapesets) {
    rc = o.nshapesets ? compile_shapeset(&o) : compile_gpu(&o, arch);
    cli_opts_free(&o);
    return rc;
  }
  rc = compile_cpu(&o);
  cli_opts_free(&o);
  return rc;
}
