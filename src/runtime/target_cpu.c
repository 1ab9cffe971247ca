/* target_cpu.c — the CPU target of the compile pipeline: regions for this
 * CPU, the Function with fp32 temps, plans (overrides, plan cache,
 * defaults), the C translation unit, and the shared object (cached).
 * Needs: pipeline.c, backend/c (cgen_emit_model), compile.c (rt_cc_build),
 * calibrate.c (the CPU's measured figures).
 * Gives: rt_target_cpu, rt_cpu_algo_mask, rt_cpu_object_cached,
 * rt_cpu_code_stage, rt_cpu_code_unrecorded, rt_cpu_build_stage, rt_cpu_build_unrecorded,
 * rt_cpu_exact_stages (tier 0: the exact regions, the C and the build run after
 * the rest, perhaps on another thread). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/c/emit_model.h"
#include "compile.h"
#include "memlimit.h"
#include "harp/cpu.h"
#include "harp/pipeline.h"
#include "harp/region.h"
#include "calib.h"
#include "tier0.h"
#include "util/util.h"

unsigned rt_cpu_algo_mask(void) {
  return 1u << PLAN_ALGO_IMPLICIT_GEMM | 1u << PLAN_ALGO_ONLINE_SOFTMAX | 1u << PLAN_ALGO_WINOGRAD_3X3 |
         1u << PLAN_ALGO_WINOGRAD_2X2_3X3 | 1u << PLAN_ALGO_WINOGRAD_4X4_3X3 | 1u << PLAN_ALGO_SPLITK_REDUCE;
}

static harp_status cpu_precision(rt_compile *c, bool *bf16);

/* Region formation on this CPU's description (the knobs cpu_ghz and
 * cpu_bw_gbs when given).  CASTs of outside tensors inside row and epilogue
 * regions get regions of their own: the C generator converts only
 * contraction operands on load. */
static harp_status cpu_regions(rt_compile *c) {
  plan_machine_detect_cpu_at(&c->machine, c->knobs.cpu_ghz, c->knobs.cpu_bw_gbs);
  rt_calib_apply(&c->machine, &c->knobs); /* the measured figures, when this machine has them */
  rg_options ro = {.no_operand_casts = true, .exact_add_steps = c->knobs.int8 != RT_INT8_OFF, .replay = c->opts.replay_regions ? c->opts.replay_regions->formed : NULL,
                   .window = c->opts.greedy_regions ? -1 : 0};
  /* hardswish-like gates and / c fuse into the producing contraction, in
   * fp32 and bf16 alike (the knob no_gate_epilogues, an A/B switch, keeps
   * them maps) */
  bool bf16;
  harp_status st = cpu_precision(c, &bf16);
  ro.gate_epilogues = !c->knobs.no_gate_epilogues;
  return st ? st : rt_form_regions(c, &ro);
}

/* fp16/bf16 intermediates that are not CAST results keep fp32 storage: the
 * reference semantics round only where the program casts.  With precision
 * bf16, the fp32 temps the contractions read are stored in bf16 (unless the
 * knob bf16_fp32_temps, an A/B switch). */
static harp_status cpu_function(rt_compile *c) {
  fn_options fo = {.widen_half_temps = true};
  harp_status st = cpu_precision(c, &fo.bf16_operand_temps);
  fo.bf16_operand_temps = fo.bf16_operand_temps && !c->knobs.bf16_fp32_temps;
  if (!st) st = rt_build_function(c, &fo);
  if (!st) st = rt_check_memory(c->e, c->f, c->opts.max_memory); /* before the code, the compiler, an instance */
  if (!st) st = rt_check_source(c->e, 0, c->f->nkernels);
  return st;
}

/* Whether this machine multiplies bf16 pairs (vdpbf16ps). */
static bool host_bf16(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

/* c's precision (harp_options.precision): NULL or "fp32", or "bf16" (the
 * contractions in bf16), which host-only code needs AVX512_BF16 for (a
 * portable package's dispatch runs its fp32 AVX2 variant on CPUs without). */
static harp_status cpu_precision(rt_compile *c, bool *bf16) {
  const char *p = c->opts.precision;
  *bf16 = p && !strcmp(p, "bf16");
  if (p && !*bf16 && strcmp(p, "fp32"))
    return ut_fail(c->e, HARP_E_USAGE, NULL, "precision '%s': the CPU computes fp32 (the default) or bf16", p);
  if (*bf16 && !c->opts.portable && !host_bf16())
    return ut_fail(c->e, HARP_E_UNSUPPORTED, NULL,
                   "precision bf16 needs a CPU with AVX512_BF16 (vdpbf16ps), which this one lacks: use fp32");
  return HARP_OK;
}

static harp_status cpu_plans(rt_compile *c) { return rt_choose_plans(c, rt_cpu_algo_mask(), 0, c->opts.no_plan_cache); }

/* The translation unit; then the analysis goes (the C is all the rest
 * needs: the compiler, the weights and the model's own memory come next). */
static harp_status cpu_code(rt_compile *c) {
  ut_str src;
  ut_str_init(&src);
  rc_ctx rc = {c->e, c->g, c->pv, c->f, c->syms, c->arena, 1 << 20, !c->opts.portable, c->plans.choice, false, NULL,
               &c->knobs, false, c->opts.portable || host_bf16(), c->opts.gen_syms, c->opts.gen_hi,
               c->opts.ngen_syms, NULL};
  harp_status st = cpu_precision(c, &rc.bf16);
  if (!st) st = cgen_emit_model(&rc, "model", &src);
  if (!st && src.oom) st = ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory writing the generated C");
  if (!st) st = rt_check_source(c->e, src.len, c->f->nkernels);
  rt_compile_drop_analysis(c);
  c->plans.compiled = true;
  for (int i = 0; i < c->plans.n; i++) { /* gathers and other regions no template saw */
    rt_plan_choice *ch = &c->plans.choice[i];
    if (ch->has_plan && !ch->applied && !ch->note[0]) snprintf(ch->note, sizeof ch->note, "generic loops: the plan is not read");
  }
  c->source_bytes = src.len, c->source_kernels = c->f->nkernels;
  if (!st && !(c->source = ut_str_take(&src))) st = ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  ut_str_free(&src);
  return st;
}

/* Intel cores with the JCC erratum (Skylake, Cascade Lake and their client
 * siblings, which GCC reports as skylake). */
static bool jcc_erratum_host(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_is("skylake") || __builtin_cpu_is("skylake-avx512") || __builtin_cpu_is("cascadelake");
#else
  return false;
#endif
}

/* The compiler's options for c's object into *cc (host_flags: cap bytes
 * the flags may be written to); *jcc when they hold the JCC-erratum option.
 * Host-only code may use every instruction of this machine; 512-bit
 * vectors for the auto-vectorized loops too (GCC and clang default to 256
 * on AVX-512 parts; softmax/layernorm rows run ~20% faster). */
static rt_cc_opts cpu_cc_opts(const rt_compile *c, char *host_flags, size_t cap, bool *jcc) {
  const rt_knobs *k = &c->knobs;
  const char *flags = k->cflags[0] ? k->cflags : NULL;
  *jcc = false;
  if (!flags && !c->opts.portable) {
    /* Skylake-derived cores take a penalty on jumps that cross or end on a
     * 32-byte boundary (the JCC-erratum microcode): where a hot loop's
     * branch lands is luck, 25% on a 3x3 conv at 256 channels.  The
     * assembler can keep branches inside 32-byte blocks. */
    *jcc = jcc_erratum_host();
    snprintf(host_flags, cap, "-O%d %s %s%s", k->cc_opt, RT_CFLAGS_NATIVE, RT_CFLAGS_ANY,
             *jcc ? " -Wa,-mbranches-within-32B-boundaries" : "");
    flags = host_flags;
  } else if (!flags && k->cc_opt != 3) { /* a package's portable flags at another level (3: compile.c's own, NULL) */
    snprintf(host_flags, cap, "-O%d %s", k->cc_opt, RT_CFLAGS_ANY);
    flags = host_flags;
  }
  return (rt_cc_opts){k->cc, flags, k->cache_dir, .parallel = true, .jobs = k->cc_jobs, .tmpdir = k->tmpdir};
}

/* The shared object, from the disk cache or the C compiler. */
static harp_status cpu_build(rt_compile *c) {
  char host_flags[256];
  bool jcc;
  rt_cc_opts cc = cpu_cc_opts(c, host_flags, sizeof host_flags, &jcc);
  rt_cc_result r;
  harp_status st = rt_cc_build_ex(c->e, c->source, &cc, &r);
  if (st == HARP_E_INTERNAL && jcc) { /* the compiler ran and failed: perhaps an assembler without the option (binutils < 2.34) */
    harp_error_clear(c->e);
    *strstr(host_flags, " -Wa,") = 0;
    free(r.path);
    st = rt_cc_build_ex(c->e, c->source, &cc, &r);
  }
  c->so_path = r.path;
  c->cache_hit = r.hit;
  c->so_temp = r.temp;
  snprintf(c->cc_warning, sizeof c->cc_warning, "%s", r.warning);
  if (!c->opts.keep_source) {
    free(c->source);
    c->source = NULL;
  }
  return st;
}

bool rt_cpu_object_cached(const rt_compile *c) {
  char host_flags[256];
  bool jcc;
  rt_cc_opts cc = cpu_cc_opts(c, host_flags, sizeof host_flags, &jcc);
  return c->source && rt_cc_cached(c->source, &cc);
}

harp_status rt_cpu_exact_stages(rt_compile *c, bool record, double *ms) {
  c->opts.greedy_regions = false;
  if (record) {
    c->opts.until = RT_STAGE_PLANS; /* the compile stopped after the function */
    c->stopped = false;
    rt_stage_run(c, RT_STAGE_REGIONS, cpu_regions);
    rt_stage_run(c, RT_STAGE_FUNCTION, cpu_function);
    rt_stage_run(c, RT_STAGE_PLANS, cpu_plans);
    return c->status;
  }
  rt_stage_fn fn[3] = {cpu_regions, cpu_function, cpu_plans};
  for (int s = 0; ms && s < 3; s++) ms[s] = -1;
  for (int s = 0; s < 3; s++) {
    double t0 = ut_now_ms();
    harp_status st = fn[s](c);
    if (st) return st;
    if (ms) ms[s] = ut_now_ms() - t0;
  }
  return HARP_OK;
}

harp_status rt_cpu_build_unrecorded(rt_compile *c) { return cpu_build(c); }

harp_status rt_cpu_code_unrecorded(rt_compile *c) { return cpu_code(c); }

harp_status rt_cpu_code_stage(rt_compile *c) {
  c->opts.until = RT_STAGE_CODE; /* the compile stopped after plans */
  c->stopped = false;
  rt_stage_run(c, RT_STAGE_CODE, cpu_code);
  return c->status;
}

harp_status rt_cpu_build_stage(rt_compile *c) {
  c->opts.until = RT_STAGE_LOAD; /* every stage: the build is the one left */
  c->opts.after_stage = NULL;    /* no dump is the build's; the caller's hook is not for another thread */
  c->stopped = false;
  rt_stage_run(c, RT_STAGE_BUILD, cpu_build);
  return c->status;
}

static harp_status cpu_drive(rt_compile *c) {
  bool bf16;
  if ((c->status = cpu_precision(c, &bf16))) return c->status; /* before any work */
  rt_stages_analysis(c); /* normalize, indexbook, poly_view */
  rt_stage_run(c, RT_STAGE_REGIONS, cpu_regions);
  rt_stage_run(c, RT_STAGE_FUNCTION, cpu_function);
  rt_stage_run(c, RT_STAGE_PLANS, cpu_plans);
  rt_stage_run(c, RT_STAGE_CODE, cpu_code); /* kernels are chosen as the C is printed */
  rt_stage_run(c, RT_STAGE_BUILD, cpu_build);
  return c->status;
}

const rt_target rt_target_cpu = {
    .name = "cpu", .machines = {"cpu"}, .code_dump = "c", .regions_final = RT_STAGE_REGIONS, .drive = cpu_drive};
