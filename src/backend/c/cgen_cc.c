/* cgen_cc.c — compile generated C into a shared object and dlopen it.
 * Needs: cgen.h, util (files, ut_run_cc).  Gives: cgen_compile_so.
 *
 * The compiler runs through ut_run_cc (util/spawn.c: no shell, flags split
 * on blanks), with its output sent to a log file that becomes the error
 * message on failure.  The .c/.so/.log live in a fresh mkdtemp directory removed
 * before returning; the loaded object stays mapped after unlink. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/c/cgen.h"
#include "util/util.h"

harp_status cgen_compile_so(harp_error *e, const char *src, const cgen_cc_opts *opts, void **handle) {
  *handle = NULL;
  if (!src) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "cgen_compile_so: no source");
  const char *cc = opts && opts->cc && *opts->cc ? opts->cc : "cc";
  const char *flags = opts && opts->flags ? opts->flags : "-O3";
  const char *tmp = opts && opts->workdir && *opts->workdir ? opts->workdir : "/tmp";
  char dir[512], cpath[600], sopath[600], logpath[600];
  if (snprintf(dir, sizeof dir, "%s/harp-cc-XXXXXX", tmp) >= (int)sizeof dir)
    return ut_fail(e, HARP_E_IO, NULL, "cgen_compile_so: work directory path too long");
  if (!mkdtemp(dir)) return ut_fail(e, HARP_E_IO, NULL, "cgen_compile_so: cannot create a directory in %s", tmp);
  snprintf(cpath, sizeof cpath, "%s/k.c", dir);
  snprintf(sopath, sizeof sopath, "%s/k.so", dir);
  snprintf(logpath, sizeof logpath, "%s/cc.log", dir);
  harp_status st = HARP_OK;
  FILE *f = fopen(cpath, "w");
  if (!f || fputs(src, f) < 0 || fclose(f) != 0) {
    if (f) fclose(f);
    st = ut_fail(e, HARP_E_IO, NULL, "cgen_compile_so: cannot write %s", cpath);
    goto out;
  }
  int rc = ut_run_cc(cc, flags, NULL, sopath, cpath, logpath);
  if (rc == -2) {
    st = ut_fail(e, HARP_E_LIMIT, NULL, "cgen_compile_so: too many compiler flags");
    goto out;
  }
  if (rc == 127) {
    st = ut_fail(e, HARP_E_IO, NULL, "cgen_compile_so: cannot run compiler '%s'", cc);
    goto out;
  }
  if (rc != 0) {
    char log[700] = {0};
    FILE *lf = fopen(logpath, "r");
    if (lf) {
      size_t got = fread(log, 1, sizeof log - 1, lf);
      log[got] = 0;
      fclose(lf);
    }
    st = ut_fail(e, HARP_E_INTERNAL, NULL, "cgen_compile_so: %s failed: %s", cc, log);
    goto out;
  }
  *handle = dlopen(sopath, RTLD_NOW | RTLD_LOCAL);
  if (!*handle) {
    const char *de = dlerror();
    st = ut_fail(e, HARP_E_IO, NULL, "cgen_compile_so: dlopen: %s", de ? de : "?");
  }
out:
  unlink(cpath);
  unlink(sopath);
  unlink(logpath);
  rmdir(dir);
  return st;
}
