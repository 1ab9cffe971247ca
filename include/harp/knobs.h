/* harp/knobs.h — the library's configuration: every knob is one row of a
 * table (name, environment variable, type, default, one-line doc), and
 * rt_knobs holds a value for each.  The knobs are passed down explicitly
 * (rt_cpu_opts.knobs, rt_gpu_opts.knobs, the compile pipeline, the backends'
 * contexts); nothing deep in the library reads the environment.  The
 * environment is read in one place, rt_knobs_from_env, which the CLI calls
 * once and harp.h's entry points call unless harp_options.no_env is set.
 * `harp --help-options` prints the table; docs/options.md describes it.
 *
 *   rt_knobs k;
 *   rt_knobs_init(&k);                       the table's defaults
 *   rt_knobs_from_env(&e, &k);               HARP_* (and CC, TMPDIR, ...) over them
 *   rt_knob_set(&e, &k, "no_dedup", "1");    one knob by name (or by its variable)
 */
#ifndef HARP_KNOBS_H
#define HARP_KNOBS_H

#include <stdbool.h>
#include <stddef.h>

#include "harp/error.h"

#define RT_KNOB_PATH 1024 /* bytes of a string knob, its NUL included */

/* HARP_CONV: how the CPU runs a convolution the direct kernel could take. */
typedef enum rt_knob_conv { RT_CONV_AUTO, RT_CONV_GEMM, RT_CONV_DIRECT } rt_knob_conv;
typedef enum rt_knob_int8 { RT_INT8_AUTO, RT_INT8_OFF, RT_INT8_FORCE } rt_knob_int8;
typedef enum rt_knob_qdq_add { RT_QDQ_ADD_EXACT, RT_QDQ_ADD_FUSED } rt_knob_qdq_add;
typedef enum rt_knob_amx { RT_AMX_AUTO, RT_AMX_OFF, RT_AMX_IM2COL } rt_knob_amx;
/* HARP_INT8_ISA: the variant the int8 kernels run (tests, benchmarks: the AVX2 one on an AVX-512 host). */
typedef enum rt_knob_int8_isa { RT_INT8_ISA_AUTO, RT_INT8_ISA_AVX2, RT_INT8_ISA_SCALAR } rt_knob_int8_isa;
/* HARP_INT8_ORDER: the int8 kernels' loop order on AVX-512 VNNI (cgen_qgemm.h's spec.ws; A/B, tests). */
typedef enum rt_knob_int8_order { RT_INT8_ORDER_AUTO, RT_INT8_ORDER_WS, RT_INT8_ORDER_TILES } rt_knob_int8_order;

/* HARP_TIER0: the CPU's first runs before the compiled object exists (src/runtime/tier0.h). */
typedef enum rt_knob_tier0 { RT_TIER0_OFF, RT_TIER0_AUTO, RT_TIER0_FORCE } rt_knob_tier0;

/* HARP_CPU_CALIB: whether the CPU cost model reads the calibration file (docs/plan.md §19). */
typedef enum rt_knob_cpu_calib { RT_CPU_CALIB_AUTO, RT_CPU_CALIB_OFF } rt_knob_cpu_calib;

typedef struct rt_knobs {
  /* building generated code */
  char cc[RT_KNOB_PATH];        /* CC: the C compiler */
  char cflags[RT_KNOB_PATH];    /* HARP_CFLAGS: its flags ("": harp's own) */
  char cache_dir[RT_KNOB_PATH]; /* HARP_CACHE_DIR: compiled objects, cubins, plans ("": see knobs.c) */
  int cc_opt;                   /* HARP_CC_OPT: 0-3, the -O of harp's own flags (not of cflags) */
  int cc_jobs;                  /* HARP_CC_JOBS: LTO partitions of a large source (0: the online CPUs) */
  char tmpdir[RT_KNOB_PATH];    /* TMPDIR: work directories (cgen_compile_so; builds when the cache is unusable) */
  /* code generation: A/B switches for benchmarks and tests */
  bool no_fusion;               /* HARP_NO_FUSION: every block its own region */
  bool no_poly_reuse;           /* HARP_NO_POLY_REUSE: no access relation reused across same-shaped blocks */
  bool no_templates;            /* HARP_NO_TEMPLATES: no kernel templates, loop nests only */
  bool no_plans;                /* HARP_NO_PLANS: templates keep their built-in tuning */
  bool no_prepack;              /* HARP_NO_PREPACK: weights packed on every run, not once */
  int int8;                     /* HARP_INT8: rt_knob_int8 */
  int qdq_add;                  /* HARP_QDQ_ADD: rt_knob_qdq_add */
  int conv;                     /* HARP_CONV: rt_knob_conv */
  int amx;                      /* HARP_AMX: rt_knob_amx */
  int int8_isa;                 /* HARP_INT8_ISA: rt_knob_int8_isa */
  int int8_order;               /* HARP_INT8_ORDER: rt_knob_int8_order */
  bool int8_decline;            /* HARP_INT8_DECLINE: int8 kernels decline at run time (their fallbacks tested) */
  bool bf16_fp32_temps;         /* HARP_BF16_FP32_TEMPS: --precision bf16 stores no temp in bf16 */
  bool no_gate_epilogues;       /* HARP_NO_GATE_EPILOGUES: CPU gates and / c stay maps (A/B) */
  bool no_dedup;                /* HARP_NO_DEDUP: every kernel its own code */
  bool no_coalesce;             /* HARP_NO_COALESCE: loops are not merged */
  int tier0;                    /* HARP_TIER0: rt_knob_tier0 */
  bool tier0_exact;             /* HARP_TIER0_EXACT: tier 0 (auto) waits for the exact region search */
  /* the CPU's description for the cost model */
  double cpu_ghz;               /* HARP_CPU_GHZ: clock (0: detected) */
  double cpu_bw_gbs;            /* HARP_CPU_BW_GBS: memory bandwidth (0: estimated) */
  int cpu_calib;                /* HARP_CPU_CALIB: rt_knob_cpu_calib */
  /* the CUDA runtime */
  char nvrtc[RT_KNOB_PATH];     /* HARP_NVRTC: libnvrtc to dlopen ("": the loader's search) */
  char libcuda[RT_KNOB_PATH];   /* HARP_LIBCUDA: libcuda to dlopen ("": the loader's search) */
} rt_knobs;

typedef enum rt_knob_type { RT_KNOB_BOOL, RT_KNOB_INT, RT_KNOB_DOUBLE, RT_KNOB_STRING, RT_KNOB_CHOICE } rt_knob_type;

/* One row of the table. */
typedef struct rt_knob {
  const char *name;    /* "no_dedup" */
  const char *env;     /* "HARP_NO_DEDUP" */
  rt_knob_type type;
  const char *dflt;    /* the default, as text */
  const char *choices; /* RT_KNOB_CHOICE: "auto|gemm|direct" (the value is the index); else NULL */
  double lo, hi;       /* RT_KNOB_INT / RT_KNOB_DOUBLE: the accepted range */
  size_t offset;       /* of the field in rt_knobs */
  const char *doc;     /* one line */
} rt_knob;

int rt_knob_count(void);
const rt_knob *rt_knob_at(int i);
/* The row named `name` (a knob's name or its environment variable), or NULL. */
const rt_knob *rt_knob_find(const char *name);

/* Every knob at its default. */
void rt_knobs_init(rt_knobs *k);
/* Set one knob from text ("1", "gemm", "/opt/cc").  Booleans take 1/0,
 * true/false, yes/no, on/off, and "" (off).  UsageError naming the knob on
 * an unknown name or a value out of its type or range. */
harp_status rt_knob_set(harp_error *e, rt_knobs *k, const char *name, const char *value);
/* "NAME=VALUE" (rt_knob_set). */
harp_status rt_knob_assign(harp_error *e, rt_knobs *k, const char *assignment);
/* The knob's value in k as text (what rt_knob_set reads back). */
void rt_knob_format(const rt_knobs *k, const rt_knob *row, char *buf, size_t cap);

/* THE one reader of the environment: each knob's variable that is set goes
 * over k (so call rt_knobs_init first); cache_dir without HARP_CACHE_DIR
 * is $XDG_CACHE_HOME/harp, else $HOME/.cache/harp.  A malformed value is a
 * UsageError naming the variable. */
harp_status rt_knobs_from_env(harp_error *e, rt_knobs *k);

/* The compiler, its flags and the cache directory that are not NULL, over
 * k's (the per-call fields of rt_cpu_opts, harp_options, ...). */
void rt_knobs_set_build(rt_knobs *k, const char *cc, const char *cflags, const char *cache_dir);

/* k, or the defaults when k is NULL (a static copy). */
const rt_knobs *rt_knobs_or_default(const rt_knobs *k);

#endif
