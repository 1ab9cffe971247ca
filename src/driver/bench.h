/* bench.h — what `harp bench` (cmd_bench.c) and its per-kernel profile and
 * GPU sessions (bench_profile.c) share.  Internal to src/driver. */
#ifndef HARP_BENCH_H
#define HARP_BENCH_H

#include "cli.h"
#include "harp/cpu.h"
#include "harp/gpu.h"

/* bench's own flags. */
typedef struct bench_args {
  long repeat, warmup;
  bool json, graphs, profile;
  const char *binds[CLI_MAX_LIST]; /* --bind SYM=INT[,SYM=INT...] */
  int nbinds;
  const char *fixes[CLI_MAX_LIST]; /* --fix SYM[,SYM...]: a session's symbols held fixed */
  int nfixes;
} bench_args;

/* --profile: per kernel (CPU) or launch (CUDA) its name, kind and median. */
typedef struct kprofile {
  int n;
  const char **name, **kind;
  const char **region; /* CUDA: the launch's region (a kernel may run for several); CPU: NULL each */
  double *med;
  double *inrun; /* CPU: the kernel's median in its place in whole runs (caches as a run leaves them); else NULL */
} kprofile;
void profile_free(kprofile *p);
/* CPU: each kernel in its place in `repeat` whole runs, then each alone
 * `repeat` times (instance inst, its inputs in[] and outputs outp[]; syms:
 * a ShapeSet object's binding, which the last run of inst ran, else NULL). */
harp_status profile_kernels(harp_error *e, rt_cpu_model *cm, void *inst, const long long *syms, const void **in,
                            void **outp, long repeat, kprofile *p);
/* CUDA: each launch where it stands in a run, timed with device events. */
harp_status profile_launches(harp_error *e, rt_gpu_model *gm, long warmup, long repeat, kprofile *p);
/* p's kernels slowest first (alone): their indices, malloc'd; NULL when out of memory. */
int *profile_order(const kprofile *p);
/* Slowest first with each one's share of the sum, as text or as JSON members. */
void profile_print(const kprofile *p, bool json);

/* --shapeset with --bind (cpu): one ShapeSet object against each binding's
 * specialised object (bench_shapeset.c); the exit code. */
int bench_shapeset(cli_opts *o, const bench_args *a);
/* --bind: one GPU session over the unbound model; the exit code. */
int bench_session(cli_opts *o, const bench_args *a, const cli_plans *pl);

#endif
