/* fz_main.c — a libFuzzer target: FZ_TARGET (a name of fz_targets, given
 * when compiling) fed each input.  `make fuzz` builds one executable per
 * target, fuzz_<name>, with -fsanitize=fuzzer,address,undefined.
 * Needs: fz.h.  Gives: LLVMFuzzerInitialize, LLVMFuzzerTestOneInput. */
#include <stdio.h>
#include <stdlib.h>

#include "fz.h"

#ifndef FZ_TARGET
#error "compile with -DFZ_TARGET=\"name\""
#endif

static fz_fn target;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  const fz_target *t = fz_find(FZ_TARGET);
  if (!t || fz_setup() != 0) {
    fprintf(stderr, "fuzz_%s: cannot set up\n", FZ_TARGET);
    exit(1);
  }
  target = t->run;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return target(data, size); }
