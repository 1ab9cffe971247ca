/* emit_model.c — the whole C translation unit of a compiled model: the
 * prelude, one function per kernel, and the model ABI.
 * Needs: a Function over a block-based partition, its Poly-View.
 * Gives: cgen_emit_model.
 *
 * The ABI (also written to model.h by `harp compile`), prefix P:
 *   typedef struct P_t P_t;
 *   P_t *P_init(const void *params, size_t nbytes);  weights block (NULL if none)
 *   P_t *P_init_threads(const void *params, size_t nbytes, int nthreads);
 *                                  the same on nthreads threads, the caller's
 *                                  included (<= 0: $HARP_NUM_THREADS, else
 *                                  every online CPU, as P_init)
 *   int  P_run(P_t *m, const void *const *inputs, void *const *outputs);
 *   void P_free(P_t *m);
 *   size_t P_required_memory(void);  P_num_inputs / P_num_outputs / P_params_bytes
 * inputs[] are the model inputs that are not weights, in graph order;
 * outputs[] follow the model's outputs.  P_run returns 0, or 100 + k when
 * kernel k reported an error (e.g. a GATHER index out of range).
 *   int P_run_kernel(P_t *m, int k, inputs, outputs);  kernel k alone, same codes
 *                                  (-1: no such kernel); its inputs are what an
 *                                  earlier P_run left in the arena (the tuner)
 *   int P_num_kernels(void);
 * A ShapeSet object (rc_ctx.gen_syms; harp/sgen.h) also has
 *   int P_run_syms(P_t *m, const long long *syms, inputs, outputs);
 *                                  one run at the binding syms[] of its varying
 *                                  symbols (the caller checked it); P_run runs at
 *                                  the values compiled for, the box's largest
 *   int P_run_kernel_syms(P_t *m, const long long *syms, int k, inputs, outputs);
 *                                  kernel k alone at that binding (its inputs: an
 *                                  earlier P_run_syms at the same binding's)
 *   int P_num_syms(void);
 *   size_t P_required_memory_syms(const long long *syms);  the arena's bytes at
 *                                  that binding; an instance's arena starts empty
 *                                  and P_run / P_run_kernel (so P_run_syms) grow it
 *                                  to the binding's bytes once per call (2 when
 *                                  they cannot)
 *
 * An instance owns its arena, a copy of the weights (consts), the thread
 * pool and, when some template kernels take a weight packed (contract_c.h:
 * a conv's weight or a GEMM's A that is a param buffer), one block of packed
 * weights.  P_init packs them once, on the pool; their sizes come from the
 * kernels' _wbytes() at run time, because the packed layout is that of the
 * ISA variant the process dispatches to.  P_run passes a kernel its packed
 * weight (m->wp[j]) after its buffers and never writes it.  A failure in
 * P_init frees everything it took and returns NULL. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/common/kdedup.h"
#include "backend/common/metadata.h"
#include "contract_c.h"
#include "harp/knobs.h"
#include "emit_model.h"
#include "kitems.h"
#include "region_c.h"

/* A region's name as a comment may hold it: every character outside
 * [A-Za-z0-9_./-] becomes '_' — with no '*' left, no comment can end or
 * start inside it, and no newline gets through (the frontends already give
 * identifiers, nested ones joined by '/'; this is the last line of
 * defence). */
static const char *comment_safe(const char *name, char out[160]) {
  size_t k = 0;
  for (const char *s = name ? name : ""; *s && k + 1 < 160; s++) {
    char c = *s;
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-' || c == '/';
    out[k++] = ok ? c : '_';
  }
  out[k] = 0;
  return out;
}

static void buffer_ptr(ut_str *o, const rc_ctx *c, int b, const int *input_pos, const int *output_pos) {
  const fn_buffer *B = &c->f->buffers[b];
  switch (B->kind) {
  case FN_INPUT: ut_str_printf(o, "(void *)inputs[%d]", input_pos[b]); break;
  case FN_OUTPUT: ut_str_printf(o, "outputs[%d]", output_pos[b]); break;
  case FN_PARAM: ut_str_printf(o, "(void *)(m->consts + %zu)", B->offset); break;
  case FN_TEMP: rc_temp_ptr(c, b, o); break;
  }
}

/* Argument i of kernel k's bufs[]: its reads, its writes, its packed
 * weights (wpj: per kernel and packed form, the m->wp[] block it reads). */
static void kernel_arg(ut_str *o, const rc_ctx *c, int k, int i, const int *wpj, const int *input_pos, const int *output_pos) {
  const fn_kernel *K = &c->f->kernels[k];
  if (i < K->nreads) buffer_ptr(o, c, K->reads[i], input_pos, output_pos);
  else if (i < K->nreads + K->nwrites) buffer_ptr(o, c, K->writes[i - K->nreads], input_pos, output_pos);
  else ut_str_printf(o, "m->wp[%d]", wpj[k * RC_MAX_PACKED + i - K->nreads - K->nwrites]);
}

static int kernel_nargs(const fn_function *f, int k, const rc_packed *pk) {
  return f->kernels[k].nreads + f->kernels[k].nwrites + pk[k].n;
}

/* The packed blocks m->wp[]: one per kernel and packed form, except that a
 * form with a key shares the block of the first kernel that packs the same
 * buffer under the same key.  wpj[k * RC_MAX_PACKED + i]: kernel k's form
 * i's block; first[j] = kernel * RC_MAX_PACKED + form that packs block j.
 * Returns the number of blocks. */
static int packed_blocks(const fn_function *f, const rc_packed *pk, int *wpj, int *first) {
  int n = 0;
  for (int k = 0; k < f->nkernels; k++)
    for (int i = 0; i < pk[k].n; i++) {
      int b = f->kernels[k].reads[pk[k].slot[i]], j = -1;
      for (int q = 0; q < n && j < 0 && pk[k].key[i][0]; q++) {
        int k2 = first[q] / RC_MAX_PACKED, i2 = first[q] % RC_MAX_PACKED;
        if (f->kernels[k2].reads[pk[k2].slot[i2]] == b && !strcmp(pk[k2].key[i2], pk[k].key[i])) j = q;
      }
      if (j < 0) first[n] = k * RC_MAX_PACKED + i, j = n++;
      wpj[k * RC_MAX_PACKED + i] = j;
    }
  return n;
}

/* The kernels' code, each once (kdedup.c): a kernel that is the same code
 * as an earlier one gets #defines of its symbols to that one's, and
 * copy_of[k] says which (-1: its own code).  Of the others, functions and
 * types an earlier kernel defines alike are #defined to that one's too
 * (kitems.c).  HARP_NO_DEDUP=1: every kernel its own code. */
static harp_status emit_kernels(rc_ctx *c, const char *P, ut_str *out, long *chunk, rc_packed *pk, int *copy_of,
                              cg_kform *forms) {
  const fn_function *f = c->f;
  bool dedup = !rt_knobs_or_default(c->knobs)->no_dedup;
  cg_kitems items;
  cg_kitems_init(&items);
  harp_status st = HARP_OK;
  for (int k = 0; k < f->nkernels && !st; k++) {
    char fn[96], to[96];
    snprintf(fn, sizeof fn, "%s_k%d", P, k);
    ut_str kt;
    ut_str_init(&kt);
    st = rc_emit_region(c, k, fn, &kt, &chunk[k], &pk[k]);
    if (!st && kt.oom) st = ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
    if (!st && dedup) st = cg_kform_make(kt.buf ? kt.buf : "", fn, NULL, 0, c->e, &forms[k]);
    copy_of[k] = -1;
    for (int j = 0; j < k && !st && dedup && copy_of[k] < 0; j++)
      if (copy_of[j] < 0 && kernel_nargs(f, j, pk) == kernel_nargs(f, k, pk) && cg_kform_same(&forms[j], &forms[k]))
        copy_of[k] = j;
    if (!st) {
      char safe[160];
      ut_str_printf(out, "/* kernel %d: region %s */\n", k, comment_safe(f->kernels[k].name, safe));
      if (copy_of[k] < 0 && dedup) {
        st = cg_kitems_emit(&items, c->e, kt.buf ? kt.buf : "", P, k, out);
      } else if (copy_of[k] < 0) {
        ut_str_puts(out, kt.buf ? kt.buf : "");
      } else {
        snprintf(to, sizeof to, "%s_k%d", P, copy_of[k]);
        ut_str_printf(out, "/* the code of kernel %d */\n", copy_of[k]);
        cg_kform_aliases(out, kt.buf ? kt.buf : "", fn, to);
        ut_str_puts(out, "\n");
        free(forms[k].norm); /* only the order is read from here on */
        forms[k].norm = NULL;
      }
    }
    ut_str_free(&kt);
  }
  cg_kitems_free(&items);
  return st;
}

/* The weights model_init packs and never keeps as stored: every kernel that
 * reads one takes it packed, and only packed (rc_ctx.packed_only), and all
 * of them share one packed block.  They are packed straight from the
 * caller's params and not copied into m->consts, whose pages for them stay
 * untouched (not resident): the instance holds such a weight once, packed,
 * not twice. */
static bool *packed_only_buffers(const fn_function *f, const rc_packed *pk, const int *wpj, const bool *wonly) {
  bool *skip = ut_xcalloc((size_t)f->nbuffers + 1, sizeof *skip);
  int *reads = ut_xcalloc((size_t)f->nbuffers + 1, sizeof *reads);
  if (!skip || !reads) {
    free(reads);
    free(skip);
    return NULL;
  }
  int *block = ut_xmalloc(sizeof(int) * ((size_t)f->nbuffers + 1)); /* the one packed block of b, or -1 */
  if (!block) {
    free(reads);
    free(skip);
    return NULL;
  }
  for (int b = 0; b < f->nbuffers; b++) block[b] = -2;
  for (int k = 0; k < f->nkernels; k++)
    for (int i = 0; i < f->kernels[k].nreads; i++) reads[f->kernels[k].reads[i]]++;
  for (int k = 0; k < f->nkernels; k++) /* reads taken packed-only count down */
    for (int i = 0; i < pk[k].n && wonly && wonly[k]; i++) {
      int b = f->kernels[k].reads[pk[k].slot[i]], j = wpj[k * RC_MAX_PACKED + i];
      reads[b]--;
      block[b] = block[b] == -2 || block[b] == j ? j : -1;
    }
  for (int b = 0; b < f->nbuffers; b++) skip[b] = f->buffers[b].kind == FN_PARAM && reads[b] == 0 && block[b] >= 0;
  free(block);
  free(reads);
  return skip;
}

/* memcpy of the weights into m->consts: all of them, or the ranges between
 * the packed-only ones (skip) */
static void emit_consts_copy(ut_str *out, const fn_function *f, const bool *skip) {
  bool any = false;
  for (int b = 0; skip && b < f->nbuffers; b++) any |= skip[b];
  if (!any) {
    ut_str_puts(out, "  if (nbytes) memcpy(m->consts, params, nbytes);\n");
    return;
  }
  ut_str_puts(out, "  /* the weights kept as stored (the packed-only ones are packed from params) */\n");
  size_t lo = 0, hi = 0; /* the range being gathered */
  for (;;) { /* params in offset order: the next one past hi */
    int next = -1;
    for (int b = 0; b < f->nbuffers; b++)
      if (f->buffers[b].kind == FN_PARAM && f->buffers[b].offset >= hi && f->buffers[b].size &&
          (next < 0 || f->buffers[b].offset < f->buffers[next].offset))
        next = b;
    if (next < 0 || skip[next]) {
      if (hi > lo) ut_str_printf(out, "  memcpy(m->consts + %zu, (const unsigned char *)params + %zu, %zu);\n", lo, lo, hi - lo);
      if (next < 0) break;
      lo = hi = f->buffers[next].offset + f->buffers[next].size;
      continue;
    }
    if (hi == lo) lo = f->buffers[next].offset;
    hi = f->buffers[next].offset + f->buffers[next].size;
  }
}

/* P_free, then P_init: the copy of the weights, the pool, then the packed
 * weights (packing runs on the pool).  Any failure frees what was taken. */
static void emit_init_free(ut_str *out, const char *P, const rc_ctx *c, const rc_packed *pk, const int *first,
                           const bool *skip, int npk, const int *input_pos, const int *output_pos) {
  const fn_function *f = c->f;
  bool gen = c->ngen_syms > 0;
  ut_str_printf(out,
                "void %s_free(%s_t *m) {\n  if (!m) return;\n  hprt_pool_destroy(m->pool);\n  free(m->arena);\n"
                "  free(m->consts);\n%s  free(m);\n}\n\n",
                P, P, npk ? "  free(m->packed);\n" : "");
  ut_str_printf(out,
                "/* P_init_threads' thread count for P_init, on the calling thread only */\n"
                "static _Thread_local int %s_nthreads_;\n\n"
                "%s_t *%s_init(const void *params, size_t nbytes) {\n"
                "  int nthreads = %s_nthreads_;\n"
                "  if (nbytes != %zuu || (nbytes && !params)) return NULL;\n"
                "  %s_t *m = calloc(1, sizeof *m);\n"
                "  if (!m) return NULL;\n"
                "  m->arena = hprt_alloc(%zuu, NULL);%s\n"
                "  m->consts = hprt_alloc(%zuu, NULL);\n"
                "  if (!m->arena || !m->consts) { %s_free(m); return NULL; }\n",
                P, P, P, P, f->const_bytes, P, gen ? 64 : (f->required_memory + 63) / 64 * 64 + 64,
                gen ? " /* a ShapeSet object's: grown per binding (P_grow_) */" : "", (f->const_bytes + 63) / 64 * 64 + 64, P);
  emit_consts_copy(out, f, skip);
  ut_str_puts(out, "  /* threads: nthreads, else $HARP_NUM_THREADS, else every online CPU; one thread is a pool\n"
                   "   * of one (no workers), so the kernels' scratch is kept, not malloc'd every call */\n"
                   "  const char *nt = nthreads > 0 ? NULL : getenv(\"HARP_NUM_THREADS\");\n"
                   "  long n = nthreads > 0 ? nthreads : nt ? strtol(nt, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);\n"
                   "  if (n > 64) n = 64;\n"
                   "  if (n >= 1) m->pool = hprt_pool_create((int)n);\n");
  if (npk) {
    /* sizes at run time: the packed layout is the dispatched variant's */
    ut_str_printf(out, "  /* weights packed once; P_run only reads them */\n  size_t at[%d], total = 0;\n", npk);
    for (int j = 0; j < npk; j++) {
      int k = first[j] / RC_MAX_PACKED, i = first[j] % RC_MAX_PACKED;
      ut_str_printf(out, "  at[%d] = total;\n  total += ((size_t)%s_k%d_wbytes%.0d() + 63) / 64 * 64;\n", j, P, k, i);
    }
    ut_str_printf(out, "  if (!(m->packed = hprt_alloc(total + 64, NULL))) { %s_free(m); return NULL; }\n", P);
    for (int j = 0; j < npk; j++) {
      int k = first[j] / RC_MAX_PACKED, i = first[j] % RC_MAX_PACKED;
      ut_str_printf(out, "  m->wp[%d] = m->packed + at[%d]; /* kernel %d: %s */\n  if (%s_k%d_wpack%.0d(m->pool, ", j, j, k,
                    f->kernels[k].name, P, k, i);
      int wb = f->kernels[k].reads[pk[k].slot[i]];
      if (skip && skip[wb]) ut_str_printf(out, "(const void *)((const unsigned char *)params + %zu)", f->buffers[wb].offset);
      else buffer_ptr(out, c, wb, input_pos, output_pos);
      ut_str_printf(out, ", m->wp[%d])) { %s_free(m); return NULL; }\n", j, P);
    }
  }
  ut_str_printf(out,
                "  return m;\n}\n\n%s_t *%s_init_threads(const void *params, size_t nbytes, int nthreads) {\n"
                "  %s_nthreads_ = nthreads;\n  %s_t *m = %s_init(params, nbytes);\n  %s_nthreads_ = 0;\n  return m;\n}\n\n",
                P, P, P, P, P, P);
}

/* emit_kernels, and where int8 kernels may hold their activations as
 * bytes between them (contract_c.h's cc_q8_plan), again holding them, and
 * once more without should a kernel not have taken its part; each run
 * from the same state (out truncated back, the per-kernel arrays reset). */
static harp_status emit_kernels_q8(rc_ctx *c, const char *P, ut_str *out, long *chunk, rc_packed *pk, int *copy_of,
                                 cg_kform *forms, bool *wonly) {
  const fn_function *f = c->f;
  cc_q8_plan *qp = rt_knobs_or_default(c->knobs)->int8 != RT_INT8_OFF && !c->q8 ? cc_q8_plan_new(f) : NULL;
  size_t mark = out->len;
  c->q8 = qp;
  harp_status st = emit_kernels(c, P, out, chunk, pk, copy_of, forms);
  for (int pass = 0; !st && qp && pass < 2; pass++) {
    if (pass == 0 && !cc_q8_plan_decide(qp, f)) break;
    if (pass == 1 && cc_q8_plan_kept(qp, f)) break;
    if (pass == 1) cc_q8_plan_clear(qp); /* a kernel did not hold its buffer: none held */
    out->len = mark;
    if (out->buf) out->buf[mark] = 0;
    for (int k = 0; k < f->nkernels; k++) {
      cg_kform_free(&forms[k]);
      memset(&forms[k], 0, sizeof forms[k]);
      chunk[k] = 0, copy_of[k] = -1, wonly[k] = false;
      memset(&pk[k], 0, sizeof pk[k]);
    }
    st = emit_kernels(c, P, out, chunk, pk, copy_of, forms);
  }
  c->q8 = NULL;
  cc_q8_plan_free(qp);
  return st;
}

/* Emits P_run_kernel (P_kernel_ in a ShapeSet object): a switch over the
 * kernels of c->f, each called with its buffers in the order its code
 * takes them (a copy copy_of[k] >= 0 in forms' order, packed weights from
 * wpj), inputs and outputs at input_pos / output_pos. */
static void emit_kernel_switch(rc_ctx *c, const char *P, ut_str *out, const rc_packed *pk, const int *copy_of,
                               const cg_kform *forms, const int *wpj, const int *input_pos, const int *output_pos) {
  const fn_function *f = c->f;
  /* one kernel alone (the tuner times kernels): its buffers hold what the
   * kernels before it wrote in an earlier P_run */
  /* a ShapeSet object's arena is grown once per call (P_grow_), before the
   * kernels: P_run_kernel and P_run wrap P_kernel_ */
  bool gen = c->ngen_syms > 0;
  ut_str_printf(out, "%sint %s_%s(%s_t *m, int k, const void *const *inputs, void *const *outputs) {\n", gen ? "static " : "",
                P, gen ? "kernel_" : "run_kernel", P);
  ut_str_puts(out, "  (void)inputs; (void)outputs;\n");
  ut_str_puts(out, "  switch (k) {\n");
  for (int k = 0; k < f->nkernels; k++) {
    const fn_kernel *K = &f->kernels[k];
    int d = copy_of[k], n = kernel_nargs(f, k, pk);
    char safe[160];
    ut_str_printf(out, "  case %d: { /* %s */\n    void *b[] = {", k, comment_safe(K->name, safe));
    for (int p = 0; p < n; p++) {
      /* the packed weight goes after the buffers (contract_c.h); a copy
       * takes them in the order of the kernel whose code it runs */
      int i = p;
      if (d >= 0) {
        i = -1;
        for (int q = 0; q < forms[d].norder && i < 0; q++)
          if (forms[d].order[q] == p) i = forms[k].order[q];
      }
      if (i < 0) ut_str_puts(out, "NULL"); /* a buffer the code never reads */
      else kernel_arg(out, c, k, i, wpj, input_pos, output_pos);
      ut_str_puts(out, ", ");
    }
    ut_str_printf(out, "NULL};\n    return %s_k%d(m->pool, b) ? %d : 0;\n  }\n", P, d >= 0 ? d : k, 100 + k);
  }
  ut_str_puts(out, "  default: return -1;\n  }\n}\n\n");
}

/* Emits P_run_kernel's wrapper in a ShapeSet object (the arena grown
 * first), P_num_kernels and P_run, then the kernel switch before them. */
static void emit_dispatch(rc_ctx *c, const char *P, ut_str *out, const rc_packed *pk, const int *copy_of,
                          const cg_kform *forms, const int *wpj, const int *input_pos, const int *output_pos) {
  const fn_function *f = c->f;
  bool gen = c->ngen_syms > 0;
  emit_kernel_switch(c, P, out, pk, copy_of, forms, wpj, input_pos, output_pos);
  if (gen)
    ut_str_printf(out,
                  "int %s_run_kernel(%s_t *m, int k, const void *const *inputs, void *const *outputs) {\n"
                  "  if (%s_grow_(m)) return 2; /* no memory for this binding's arena */\n"
                  "  return %s_kernel_(m, k, inputs, outputs);\n}\n\n",
                  P, P, P, P);
  ut_str_printf(out, "int %s_num_kernels(void) { return %d; }\n\n", P, f->nkernels);
  ut_str_printf(out, "int %s_run(%s_t *m, const void *const *inputs, void *const *outputs) {\n", P, P);
  if (gen) ut_str_printf(out, "  if (%s_grow_(m)) return 2; /* no memory for this binding's arena */\n", P);
  ut_str_printf(out,
                "  for (int k = 0; k < %d; k++) {\n"
                "    int rc = %s_%s(m, k, inputs, outputs);\n"
                "    if (rc) return rc;\n  }\n  return 0;\n}\n",
                f->nkernels, P, gen ? "kernel_" : "run_kernel");
}

harp_status cgen_emit_model(rc_ctx *c, const char *prefix, ut_str *out) {
  const fn_function *f = c->f;
  harp_error *e = c->e;
  char P[64];
  ut_sanitize_name(prefix ? prefix : "model", P, sizeof P);
  int *input_pos = ut_xcalloc((size_t)f->nbuffers + 1, sizeof(int)), *output_pos = ut_xcalloc((size_t)f->nbuffers + 1, sizeof(int));
  long *chunk = ut_xcalloc((size_t)f->nkernels + 1, sizeof(long));
  rc_packed *pk = ut_xcalloc((size_t)f->nkernels + 1, sizeof *pk); /* per kernel: the weights it takes packed */
  int *wpj = ut_xcalloc((size_t)f->nkernels * RC_MAX_PACKED + 1, sizeof(int)); /* the m->wp[] block of each */
  int *first = ut_xcalloc((size_t)f->nkernels * RC_MAX_PACKED + 1, sizeof(int)); /* the kernel and form packing block j */
  int *copy_of = ut_xcalloc((size_t)f->nkernels + 1, sizeof(int));
  cg_kform *forms = ut_xcalloc((size_t)f->nkernels + 1, sizeof *forms);
  bool *wonly = ut_xcalloc((size_t)f->nkernels + 1, sizeof *wonly); /* set by the templates */
  bool *const saved_wonly = c->packed_only;
  c->packed_only = wonly;
  harp_status st = HARP_OK;
  if (!input_pos || !output_pos || !chunk || !pk || !wpj || !first || !copy_of || !forms || !wonly) {
    st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    goto done;
  }
  int nin = 0;
  for (int a = 0; a < f->nargs; a++)
    if (f->buffers[f->args[a]].kind == FN_INPUT) input_pos[f->args[a]] = nin++;
  for (int k = 0; k < f->nret; k++) output_pos[f->ret[k]] = k;
  ut_str_printf(out, "/* generated by harp: model %s, %d kernels, arena %zu bytes, weights %zu bytes */\n", P,
                f->nkernels, f->required_memory, f->const_bytes);
  if (c->host_only) { /* compiled for this machine alone: its ISA keys the cache */
    __builtin_cpu_init();
    ut_str_printf(out, "/* host ISA: %s */\n#define HP_NO_CLONES 1\n",
                  __builtin_cpu_supports("avx512f") ? "avx512" : __builtin_cpu_supports("avx2") ? "avx2" : "baseline");
  }
  rc_emit_prelude(out);
  rc_emit_sym_block(c, out);
  st = emit_kernels_q8(c, P, out, chunk, pk, copy_of, forms, wonly);
  if (st) goto done;
  int npk = packed_blocks(f, pk, wpj, first); /* m->wp[]: the packed blocks */
  ut_str_printf(out, "typedef struct %s_t {\n  unsigned char *arena; unsigned char *consts; hprt_pool *pool;\n", P);
  if (npk) ut_str_printf(out, "  unsigned char *packed; /* the packed weights, one block */\n  void *wp[%d];\n", npk);
  rc_emit_layout_fields(c, out);
  ut_str_printf(out,
                "} %s_t;\n"
                "size_t %s_required_memory(void) { return %zuu; }\n"
                "size_t %s_params_bytes(void) { return %zuu; }\n"
                "int %s_num_inputs(void) { return %d; }\n"
                "int %s_num_outputs(void) { return %d; }\n\n",
                P, P, f->required_memory, P, f->const_bytes, P, nin, P, f->nret);
  cgen_emit_metadata(out, P, f, c->g);
  ut_str_puts(out, "\n");
  bool *skip = packed_only_buffers(f, pk, wpj, wonly);
  if (!skip) {
    st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    goto done;
  }
  emit_init_free(out, P, c, pk, first, skip, npk, input_pos, output_pos);
  rc_emit_arena_at(c, P, out);
  free(skip);
  emit_dispatch(c, P, out, pk, copy_of, forms, wpj, input_pos, output_pos);
  rc_emit_run_syms(c, P, out);
  if (out->oom) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
done:
  for (int k = 0; forms && k < f->nkernels; k++) cg_kform_free(&forms[k]);
  free(forms);
  free(copy_of);
  free(input_pos);
  free(output_pos);
  free(chunk);
  free(pk);
  free(wpj);
  free(first);
  free(wonly);
  c->packed_only = saved_wonly;
  return st;
}
