/* sgen_manifest.h — what a ShapeSet box's corner analysis decided, kept in
 * the compile cache so that a new process with the same model, box, options
 * and harp build finds the one object without compiling the corners
 * (sgen_manifest.c; docs/architecture.md, "One object per ShapeSet"). */
#ifndef HARP_SGEN_MANIFEST_H
#define HARP_SGEN_MANIFEST_H

#include <stdbool.h>
#include <stdint.h>

#include "harp/cpu.h"
#include "harp/function.h"
#include "harp/sgen.h"

/* One box's decision: the object (its cache entry's file name and the
 * Function a run needs: buffers, arguments, kernels' names) or why each
 * binding compiles; per symbol, the lower corner the object serves from. */
typedef struct rt_ssm {
  char so[64];      /* "<16 hex>.so" in the cache directory; "" in fallback */
  char *fallback;   /* malloc'd; NULL when one object serves the box */
  int64_t glo[64];
  int nsyms;
  bool quick;       /* the quick check of a new binding serves the box (sgen.c quick_setup) */
  fn_function *f;   /* the object's Function without its partition (f->part NULL) */
} rt_ssm;

/* The manifest's path for the model text (canonical JSON as loaded), the
 * box syms[0..nsyms) and the CPU options o into path[cap]: a hash of them,
 * of every knob, this CPU, harp's version and build (the library file's
 * identity), the plan cache's and the calibration's state.  False when
 * this compile cannot use one (a kept source or analysis, --plan, a stage
 * hook, no usable cache directory). */
bool rt_ssm_path(const char *text, const rt_sgen_sym *syms, int nsyms, const rt_cpu_opts *o, char *path, size_t cap);
/* The manifest at path into *m for a model of nnodes nodes and nsyms
 * symbols; false (a miss, *m empty) when absent, truncated, corrupt or not
 * this one's. */
bool rt_ssm_load(const char *path, int nnodes, int nsyms, rt_ssm *m);
/* Write *m to path atomically (a temporary file, then rename); an error
 * only for the caller to drop (a manifest that cannot be written is a miss
 * next time). */
harp_status rt_ssm_store(harp_error *e, const char *path, const rt_ssm *m, int nnodes);
void rt_ssm_free(rt_ssm *m);

#endif
