/* harp/knobs.h — the library's configuration: every knob is one row of a
 * table (name, environment variable, type, default, one-line doc), and
 * hp_knobs holds a value for each.  The knobs are passed down explicitly
 * (hp_cpu_opts.knobs, hp_gpu_opts.knobs, the compile pipeline, the backends'
 * contexts); nothing deep in the library reads the environment.  The
 * environment is read in one place, hp_knobs_from_env, which the CLI calls
 * once and harp.h's entry points call unless harp_options.no_env is set.
 * `harp --help-options` prints the table; docs/options.md describes it.
 *
 *   hp_knobs k;
 *   hp_knobs_init(&k);                       the table's defaults
 *   hp_knobs_from_env(&e, &k);               HARP_* (and CC, TMPDIR, ...) over them
 *   hp_knob_set(&e, &k, "no_dedup", "1");    one knob by name (or by its variable)
 */
#ifndef HARP_KNOBS_H
#define HARP_KNOBS_H

#include <stdbool.h>
#include <stddef.h>

#include "harp/error.h"

#define HP_KNOB_PATH 1024 /* bytes of a string knob, its NUL included */

/* HARP_CONV: how the CPU runs a convolution the direct kernel could take. */
typedef enum hp_knob_conv { HP_CONV_AUTO, HP_CONV_GEMM, HP_CONV_DIRECT } hp_knob_conv;

typedef struct hp_knobs {
  /* building generated code */
  char cc[HP_KNOB_PATH];        /* CC: the C compiler */
  char cflags[HP_KNOB_PATH];    /* HARP_CFLAGS: its flags ("": harp's own) */
  char cache_dir[HP_KNOB_PATH]; /* HARP_CACHE_DIR: compiled objects, cubins, plans ("": see knobs.c) */
  int cc_jobs;                  /* HARP_CC_JOBS: LTO partitions of a large source (0: the online CPUs) */
  char tmpdir[HP_KNOB_PATH];    /* TMPDIR: cgen_compile_so's work directories */
  /* code generation: A/B switches for benchmarks and tests */
  bool no_fusion;               /* HARP_NO_FUSION: every block its own region */
  bool no_templates;            /* HARP_NO_TEMPLATES: no kernel templates, loop nests only */
  bool no_plans;                /* HARP_NO_PLANS: templates keep their built-in tuning */
  bool no_prepack;              /* HARP_NO_PREPACK: weights packed on every run, not once */
  int conv;                     /* HARP_CONV: hp_knob_conv */
  bool no_dedup;                /* HARP_NO_DEDUP: every kernel its own code */
  bool no_coalesce;             /* HARP_NO_COALESCE: loops are not merged */
  /* the CPU's description for the cost model */
  double cpu_ghz;               /* HARP_CPU_GHZ: clock (0: detected) */
  double cpu_bw_gbs;            /* HARP_CPU_BW_GBS: memory bandwidth (0: estimated) */
  /* the CUDA runtime */
  char nvrtc[HP_KNOB_PATH];     /* HARP_NVRTC: libnvrtc to dlopen ("": the loader's search) */
  char libcuda[HP_KNOB_PATH];   /* HARP_LIBCUDA: libcuda to dlopen ("": the loader's search) */
} hp_knobs;

typedef enum hp_knob_type { HP_KNOB_BOOL, HP_KNOB_INT, HP_KNOB_DOUBLE, HP_KNOB_STRING, HP_KNOB_CHOICE } hp_knob_type;

/* One row of the table. */
typedef struct hp_knob {
  const char *name;    /* "no_dedup" */
  const char *env;     /* "HARP_NO_DEDUP" */
  hp_knob_type type;
  const char *dflt;    /* the default, as text */
  const char *choices; /* HP_KNOB_CHOICE: "auto|gemm|direct" (the value is the index); else NULL */
  double lo, hi;       /* HP_KNOB_INT / HP_KNOB_DOUBLE: the accepted range */
  size_t offset;       /* of the field in hp_knobs */
  const char *doc;     /* one line */
} hp_knob;

int hp_knob_count(void);
const hp_knob *hp_knob_at(int i);
/* The row named `name` (a knob's name or its environment variable), or NULL. */
const hp_knob *hp_knob_find(const char *name);

/* Every knob at its default. */
void hp_knobs_init(hp_knobs *k);
/* Set one knob from text ("1", "gemm", "/opt/cc").  Booleans take 1/0,
 * true/false, yes/no, on/off, and "" (off).  UsageError naming the knob on
 * an unknown name or a value out of its type or range. */
hp_status hp_knob_set(hp_error *e, hp_knobs *k, const char *name, const char *value);
/* "NAME=VALUE" (hp_knob_set). */
hp_status hp_knob_assign(hp_error *e, hp_knobs *k, const char *assignment);
/* The knob's value in k as text (what hp_knob_set reads back). */
void hp_knob_format(const hp_knobs *k, const hp_knob *row, char *buf, size_t cap);

/* THE one reader of the environment: each knob's variable that is set goes
 * over k (so call hp_knobs_init first); cache_dir without HARP_CACHE_DIR
 * is $XDG_CACHE_HOME/harp, else $HOME/.cache/harp.  A malformed value is a
 * UsageError naming the variable. */
hp_status hp_knobs_from_env(hp_error *e, hp_knobs *k);

/* The compiler, its flags and the cache directory that are not NULL, over
 * k's (the per-call fields of hp_cpu_opts, harp_options, ...). */
void hp_knobs_set_build(hp_knobs *k, const char *cc, const char *cflags, const char *cache_dir);

/* k, or the defaults when k is NULL (a static copy). */
const hp_knobs *hp_knobs_or_default(const hp_knobs *k);

#endif
