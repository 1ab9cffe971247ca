/* knobs.c — the knob table (harp/knobs.h): one row per knob, the setter by
 * name, and rt_knobs_from_env, the only function of the library that reads
 * the environment.
 * Needs: nothing.  Gives: harp/knobs.h. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "harp/knobs.h"

#define ROW(name, env, type, dflt, choices, lo, hi, doc) \
  {#name, env, RT_KNOB_##type, dflt, choices, lo, hi, offsetof(rt_knobs, name), doc}

static const rt_knob table[] = {
    ROW(cc, "CC", STRING, "cc", NULL, 0, 0, "the C compiler that builds generated code"),
    ROW(cflags, "HARP_CFLAGS", STRING, "", NULL, 0, 0,
        "its flags (empty: -O3 and this CPU's ISA for run/bench, any x86-64 for packages)"),
    ROW(cc_opt, "HARP_CC_OPT", INT, "3", NULL, 0, 3,
        "the -O level of harp's own flags, when cflags is empty (tests of what kernels compute use 1: a shorter cold compile)"),
    ROW(cache_dir, "HARP_CACHE_DIR", STRING, "", NULL, 0, 0,
        "compiled objects, cubins and tuned plans (env: else $XDG_CACHE_HOME/harp, ~/.cache/harp; "
        "empty: /tmp/harp-cache-UID)"),
    ROW(cc_jobs, "HARP_CC_JOBS", INT, "0", NULL, 0, 1024,
        "processes optimising a large generated source (-flto=N; 0: the online CPUs, at most 16; 1: off)"),
    ROW(tmpdir, "TMPDIR", STRING, "/tmp", NULL, 0, 0, "work directories: cgen_compile_so's, and a build's when the cache is unusable"),
    ROW(no_fusion, "HARP_NO_FUSION", BOOL, "0", NULL, 0, 0, "every block its own region (fused vs unfused)"),
    ROW(no_poly_reuse, "HARP_NO_POLY_REUSE", BOOL, "0", NULL, 0, 0,
        "every block's access relations built afresh, none reused from a block of the same shape (compile time A/B)"),
    ROW(no_templates, "HARP_NO_TEMPLATES", BOOL, "0", NULL, 0, 0,
        "no kernel templates: regions on the generic loop nest (a recurrent cell keeps its template; CUDA: row kernels stay)"),
    ROW(no_plans, "HARP_NO_PLANS", BOOL, "0", NULL, 0, 0,
        "CPU templates keep their built-in tuning instead of the region's Schedule Plan"),
    ROW(no_prepack, "HARP_NO_PREPACK", BOOL, "0", NULL, 0, 0,
        "weights a CPU template reads packed are packed on every run, not once at model_init"),
    ROW(int8, "HARP_INT8", CHOICE, "auto", "auto|off|force", 0, 0,
        "a CPU conv / GEMM of 8-bit integers (QDQ models) also on the int8 VNNI kernel (auto: where the multiply-adds "
        "saved outweigh its conversions; off: the bf16 template only; force: wherever it fits)"),
    ROW(qdq_add, "HARP_QDQ_ADD", CHOICE, "exact", "exact|fused", 0, 0,
        "an ONNX QDQ Add of two quantized activations (exact: as onnxruntime's QLinearAdd, bit for bit, fused "
        "multiply-adds in the output pass of the int8 conv that made an operand (an elementwise kernel where none did, "
        "or int8=off); fused: a residual add in the epilogue of the int8 conv that made an "
        "operand, its roundings apart: within one step)"),
    ROW(conv, "HARP_CONV", CHOICE, "auto", "auto|gemm|direct", 0, 0,
        "a CPU convolution as implicit GEMM or the direct kernel (auto: the template decides)"),
    ROW(amx, "HARP_AMX", CHOICE, "auto", "auto|off|im2col", 0, 0,
        "--precision bf16 on the CPU: GEMMs and implicit-GEMM convs also get an Intel AMX variant (tdpbf16ps); the int8 "
        "kernels too (tdpbusd); chosen at load where the CPU has AMX-BF16 / AMX-INT8 and Linux grants the tile state "
        "(else the AVX-512 BF16 / VNNI one; off: no AMX variant; im2col: as auto, but stride-1 and stride-2 bf16 convs "
        "gather their B panels by im2col instead of reading tiles in place)"),
    ROW(int8_isa, "HARP_INT8_ISA", CHOICE, "auto", "auto|avx2|scalar", 0, 0,
        "the int8 kernels' variant (auto: by CPUID, AMX-INT8, AVX-512 VNNI, AVX2 or scalar; avx2: the AVX2 one where "
        "the CPU has AVX2, as on a CPU without AVX-512 (tests, benchmarks); scalar: the plain C one)"),
    ROW(int8_order, "HARP_INT8_ORDER", CHOICE, "auto", "auto|ws|tiles", 0, 0,
        "the int8 kernels' loop order on AVX-512 VNNI (auto: weight-stationary where the weight is large and B small, "
        "the weight then read once a call, in order; ws: weight-stationary wherever the weight is A; tiles: never, a B "
        "block per task; A/B, tests)"),
    ROW(int8_decline, "HARP_INT8_DECLINE", BOOL, "0", NULL, 0, 0,
        "CPU: every int8 conv / GEMM kernel (contract_q8.c) declines at run time as for a weight that is no int8, so "
        "that its fallback runs (the template, or with an exact QDQ Add step the template and that step's pass; tests)"),
    ROW(bf16_fp32_temps, "HARP_BF16_FP32_TEMPS", BOOL, "0", NULL, 0, 0,
        "--precision bf16 on the CPU keeps the tensors between kernels in fp32 (not the contraction operands in bf16)"),
    ROW(no_gate_epilogues, "HARP_NO_GATE_EPILOGUES", BOOL, "0", NULL, 0, 0,
        "CPU: a hardswish-like gate x*clamp(x*a + b, lo, hi) and x / c by a constant stay maps of their own, not "
        "epilogue steps of the conv / GEMM before them (A/B)"),
    ROW(no_dedup, "HARP_NO_DEDUP", BOOL, "0", NULL, 0, 0, "kernels that are the same code are not shared"),
    ROW(no_coalesce, "HARP_NO_COALESCE", BOOL, "0", NULL, 0, 0,
        "loop nests keep a loop whose body is one loop (no merging into one loop)"),
    ROW(tier0, "HARP_TIER0", CHOICE, "auto", "off|auto|force", 0, 0,
        "CPU: the first runs before the compiled object is loaded, on libharp's shape-generic kernels + the interpreter "
        "(auto: while the object's C is printed and built, or found in the cache, in the background; off: the object "
        "first; force: always, no C compiler)"),
    ROW(tier0_exact, "HARP_TIER0_EXACT", BOOL, "0", NULL, 0, 0,
        "CPU, tier0=auto: the first run waits for the exact region search and runs the object's regions (else it runs "
        "the greedy pass's while the exact search goes on in the background)"),
    ROW(cpu_ghz, "HARP_CPU_GHZ", DOUBLE, "0", NULL, 0.3, 10, "the CPU's clock for the cost model (0: detected)"),
    ROW(cpu_bw_gbs, "HARP_CPU_BW_GBS", DOUBLE, "0", NULL, 0.1, 100000,
        "the CPU's memory bandwidth in GB/s for the cost model (0: 10 per core, at most 200)"),
    ROW(cpu_calib, "HARP_CPU_CALIB", CHOICE, "auto", "auto|off", 0, 0,
        "the CPU cost model reads this machine's calibration (harp calibrate) from the cache directory when it is "
        "there (off: the uncalibrated model)"),
    ROW(nvrtc, "HARP_NVRTC", STRING, "", NULL, 0, 0, "the NVRTC library to load (empty: libnvrtc.so from the loader's path)"),
    ROW(libcuda, "HARP_LIBCUDA", STRING, "", NULL, 0, 0,
        "the CUDA driver library to load (empty: libcuda.so.1 from the loader's path)"),
};

int rt_knob_count(void) { return (int)(sizeof table / sizeof table[0]); }
const rt_knob *rt_knob_at(int i) { return i >= 0 && i < rt_knob_count() ? &table[i] : NULL; }

const rt_knob *rt_knob_find(const char *name) {
  for (int i = 0; name && i < rt_knob_count(); i++)
    if (!strcmp(table[i].name, name) || !strcmp(table[i].env, name)) return &table[i];
  return NULL;
}

/* Index of v among "a|b|c", or -1. */
static int choice_index(const char *choices, const char *v) {
  int i = 0;
  for (const char *p = choices; *p; i++) {
    size_t n = strcspn(p, "|");
    if (strlen(v) == n && !strncmp(p, v, n)) return i;
    p += n + (p[n] == '|');
  }
  return -1;
}

static bool parse_bool(const char *v, bool *out) {
  static const char *const on[] = {"1", "true", "yes", "on"}, *const off[] = {"", "0", "false", "no", "off"};
  for (size_t i = 0; i < sizeof on / sizeof on[0]; i++)
    if (!strcasecmp(v, on[i])) return *out = true, true;
  for (size_t i = 0; i < sizeof off / sizeof off[0]; i++)
    if (!strcasecmp(v, off[i])) return *out = false, true;
  return false;
}

/* Set row r of k from text; a message for e on a bad value.  `via` names
 * how it was given (the knob or its variable). */
static harp_status set_row(harp_error *e, rt_knobs *k, const rt_knob *r, const char *v, const char *via) {
  char *field = (char *)k + r->offset, *end = NULL;
  if (!*v && r->type != RT_KNOB_STRING) v = r->dflt; /* set but empty: as if not set */
  switch (r->type) {
  case RT_KNOB_BOOL:
    if (!parse_bool(v, (bool *)field)) return ut_fail(e, HARP_E_USAGE, NULL, "%s=%.100s: expected 1 or 0", via, v);
    return HARP_OK;
  case RT_KNOB_INT: {
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < r->lo || x > r->hi)
      return ut_fail(e, HARP_E_USAGE, NULL, "%s=%.100s: expected an integer from %g to %g", via, v, r->lo, r->hi);
    *(int *)field = (int)x;
    return HARP_OK;
  }
  case RT_KNOB_DOUBLE: {
    double x = strtod(v, &end);
    if (end == v || *end || !isfinite(x) || (x != 0 && (x < r->lo || x > r->hi)))
      return ut_fail(e, HARP_E_USAGE, NULL, "%s=%.100s: expected 0 or a number from %g to %g", via, v, r->lo, r->hi);
    *(double *)field = x;
    return HARP_OK;
  }
  case RT_KNOB_STRING:
    if (strlen(v) >= RT_KNOB_PATH) return ut_fail(e, HARP_E_LIMIT, NULL, "%s: the value is longer than %d bytes", via, RT_KNOB_PATH - 1);
    snprintf(field, RT_KNOB_PATH, "%s", v);
    return HARP_OK;
  case RT_KNOB_CHOICE: {
    int i = choice_index(r->choices, v);
    if (i < 0) return ut_fail(e, HARP_E_USAGE, NULL, "%s=%.100s: expected one of %s", via, v, r->choices);
    *(int *)field = i;
    return HARP_OK;
  }
  }
  return ut_fail(e, HARP_E_INTERNAL, NULL, "knob %s: unknown type", r->name);
}

void rt_knobs_init(rt_knobs *k) {
  memset(k, 0, sizeof *k);
  harp_error e = {0};
  for (int i = 0; i < rt_knob_count(); i++) set_row(&e, k, &table[i], table[i].dflt, table[i].name);
}

/* The table's defaults as a constant (test_knobs checks it equals
 * rt_knobs_init's): zero, false and "" but for these. */
static const rt_knobs defaults = {.cc = "cc", .cc_opt = 3, .tmpdir = "/tmp", .tier0 = RT_TIER0_AUTO};

const rt_knobs *rt_knobs_or_default(const rt_knobs *k) { return k ? k : &defaults; }

void rt_knobs_set_build(rt_knobs *k, const char *cc, const char *cflags, const char *cache_dir) {
  if (cc) snprintf(k->cc, sizeof k->cc, "%s", cc);
  if (cflags) snprintf(k->cflags, sizeof k->cflags, "%s", cflags);
  if (cache_dir) snprintf(k->cache_dir, sizeof k->cache_dir, "%s", cache_dir);
}

harp_status rt_knob_set(harp_error *e, rt_knobs *k, const char *name, const char *value) {
  const rt_knob *r = rt_knob_find(name);
  if (!r) return ut_fail(e, HARP_E_USAGE, NULL, "unknown knob '%.100s' (harp --help-options lists them)", name ? name : "");
  return set_row(e, k, r, value ? value : "", r->name);
}

harp_status rt_knob_assign(harp_error *e, rt_knobs *k, const char *assignment) {
  const char *eq = assignment ? strchr(assignment, '=') : NULL;
  if (!eq || eq == assignment) return ut_fail(e, HARP_E_USAGE, NULL, "knob '%.100s': expected NAME=VALUE", assignment ? assignment : "");
  char name[64];
  size_t n = (size_t)(eq - assignment);
  if (n >= sizeof name) return ut_fail(e, HARP_E_USAGE, NULL, "unknown knob '%.*s'", (int)n, assignment);
  memcpy(name, assignment, n);
  name[n] = 0;
  return rt_knob_set(e, k, name, eq + 1);
}

void rt_knob_format(const rt_knobs *k, const rt_knob *r, char *buf, size_t cap) {
  const char *field = (const char *)k + r->offset;
  switch (r->type) {
  case RT_KNOB_BOOL: snprintf(buf, cap, "%d", *(const bool *)field ? 1 : 0); break;
  case RT_KNOB_INT: snprintf(buf, cap, "%d", *(const int *)field); break;
  case RT_KNOB_DOUBLE: snprintf(buf, cap, "%g", *(const double *)field); break;
  case RT_KNOB_STRING: snprintf(buf, cap, "%s", field); break;
  case RT_KNOB_CHOICE: {
    int want = *(const int *)field, i = 0;
    const char *p = r->choices;
    for (; *p && i < want; i++) p += strcspn(p, "|") + 1;
    snprintf(buf, cap, "%.*s", (int)strcspn(p, "|"), p);
    break;
  }
  }
}

harp_status rt_knobs_from_env(harp_error *e, rt_knobs *k) {
  for (int i = 0; i < rt_knob_count(); i++) {
    const char *v = getenv(table[i].env);
    if (v && set_row(e, k, &table[i], v, table[i].env)) return e->code;
  }
  if (!k->cache_dir[0]) { /* the per-user cache */
    const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (x && *x && strlen(x) + 6 < RT_KNOB_PATH) snprintf(k->cache_dir, RT_KNOB_PATH, "%s/harp", x);
    else if (home && *home && strlen(home) + 13 < RT_KNOB_PATH) snprintf(k->cache_dir, RT_KNOB_PATH, "%s/.cache/harp", home);
  }
  return HARP_OK;
}
