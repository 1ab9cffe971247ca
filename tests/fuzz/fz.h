/* fz.h — the input fuzzers' harness: one entry per input format, shared by
 * the libFuzzer targets (tests/fuzz/fz_main.c, built by `make fuzz` with
 * clang) and the regression test (tests/unit/test_fuzz_regress.c, every
 * build), which replays the seeds and the saved findings through the same
 * code.
 * Needs: harp_lib.  Gives: fz_targets, fz_form, fz_check, fz_setup. */
#ifndef HARP_FZ_H
#define HARP_FZ_H

#include <stddef.h>
#include <stdint.h>

#include "harp/tiny.h"

/* What a harness lowers through region formation: a prepared graph of at
 * most FZ_MAX_NODES nodes whose every value has at most FZ_MAX_NUMEL
 * elements (and inputs of at most that many), so one input cannot spend
 * minutes or gigabytes in the polyhedral layers.  Loading and verifying are
 * not capped: their own limits are what is under test. */
#define FZ_MAX_NODES 48
#define FZ_MAX_NUMEL 4096
/* The value every still-unbound shape symbol of an input gets. */
#define FZ_SYM_VALUE 3

typedef int (*fz_fn)(const uint8_t *data, size_t size);
typedef struct fz_target {
  const char *name; /* also the folder of its seeds, findings and dictionary */
  fz_fn run;
} fz_target;

extern const fz_target fz_targets[];
extern const int fz_ntargets;
const fz_target *fz_find(const char *name);

int fz_onnx(const uint8_t *data, size_t size);
int fz_tiny(const uint8_t *data, size_t size);
int fz_dsl(const uint8_t *data, size_t size);
int fz_plan_json(const uint8_t *data, size_t size);
int fz_plan_dsl(const uint8_t *data, size_t size);
int fz_calib(const uint8_t *data, size_t size);
int fz_npy(const uint8_t *data, size_t size);

/* Once per process: the ONNX target's model directory, holding the files
 * its external-data locations may name (and a link that leads out).  The
 * directory is removed at exit.  0 on success. */
int fz_setup(void);
const char *fz_model_dir(void);

/* Bind the unbound symbols of g's INPUT shapes to FZ_SYM_VALUE (after the
 * ones in syms), prepare g, and when it verifies and fits the caps above,
 * form its regions on the host CPU's description and check the partition.
 * A failing status is fine; a broken invariant aborts (fz_check). */
void fz_form(tiny_graph *g, const tiny_symtab *defaults);

/* An oracle failed: print what and abort, so libFuzzer (or ctest) reports it. */
void fz_check(int ok, const char *what);

/* A NUL-terminated copy of data (the text loaders take C strings); the
 * caller frees it. */
char *fz_text(const uint8_t *data, size_t size);

#endif
