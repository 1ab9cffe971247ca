/* calib.h — the CPU calibration (docs/plan.md §19): measuring this CPU,
 * keeping the figures in the cache directory, handing them to the cost
 * model.  Internal to src/runtime and the driver.
 * Needs: harp/plan.h (plan_calib), harp/knobs.h.  Gives: the functions below. */
#ifndef HARP_RT_CALIB_H
#define HARP_RT_CALIB_H

#include <stdbool.h>
#include <stddef.h>

#include "harp/error.h"
#include "harp/plan.h"

struct rt_knobs;

/* calib_mk.c: the template's micro-kernel MR x NR over npan packed B
 * micro-panels kc deep (a: [k][MR], b: [panel][k][NR], c: npan MR x NR
 * tiles, accumulated); false when this build has no such kernel. */
bool rt_calib_mk_run(bool avx512, int mr, int nr, const float *a, const float *b, long kc, long npan, float *c);
/* fp32 lanes of the micro-kernels for this CPU's ISA; 0: none (not x86-64). */
int rt_calib_mk_lanes(bool avx512, bool avx2);

/* calib_wf.c: the Winograd filter transform (cgen_wino.c's emit_wpack,
 * F(4x4)) of a ch x ch 3x3 weight w into up (rt_calib_wf_up_floats(ch)
 * floats), on this thread; returns its multiply-adds. */
double rt_calib_wf_run(const float *w, float *up, long ch);
long rt_calib_wf_up_floats(long ch);

/* <cache dir>/calib/cpu-<hash of the machine id>.txt (malloc'd; NULL: out
 * of memory).  cache_dir NULL or "": the default cache directory. */
char *rt_calib_path(const char *cache_dir, const char *machine_id);
/* Measure m's CPU (a second or two): the micro-kernel per micro-tile, depth
 * and panel width, memory and packing bandwidth, a parallel call's cost. */
harp_status rt_calib_measure(harp_error *e, const plan_machine *m, plan_calib *out);
/* Read and check the file: *found false (HARP_OK) when it does not exist;
 * a malformed one is HARP_E_PARSE, located. */
harp_status rt_calib_load(harp_error *e, const char *path, const char *machine_id, plan_calib *out, bool *found);
/* Write it atomically (the directory made first). */
harp_status rt_calib_store(harp_error *e, const char *path, const char *machine_id, const plan_calib *c);

/* What rt_calib_ensure did. */
typedef struct rt_calib_result {
  char *path;         /* the file (malloc'd) */
  bool measured;      /* measured now (else read from the file) */
  char why[320];      /* why it was measured again: the old file's error, or "" */
  double seconds;     /* the measurement's wall time */
} rt_calib_result;
/* m's calibration (m->calib set): read from the cache directory, or, when
 * absent, malformed, of another machine or `force`, measured and stored.
 * A bad file is never fatal: its error lands in res->why and it is
 * replaced. */
harp_status rt_calib_ensure(harp_error *e, const char *cache_dir, bool force, plan_machine *m, rt_calib_result *res);
void rt_calib_result_free(rt_calib_result *r);
/* harp tune measured a conv both ways: Winograd ran `speedup` times as fast
 * as the direct kernel at px output pixels and reduction k.  Recorded in
 * m's calibration file when it has a well-formed one (else nothing). */
harp_status rt_calib_note_wino(harp_error *e, const char *cache_dir, const plan_machine *m, int64_t px, int64_t k,
                               double speedup);
/* For a compile: m->calib from the cache directory's file when the knob
 * cpu_calib is "auto" and the file is there and well formed; otherwise m
 * keeps the uncalibrated model (nothing is measured here). */
void rt_calib_apply(plan_machine *m, const struct rt_knobs *k);

#endif
