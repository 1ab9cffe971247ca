/* compile.c — compile generated C into a shared object, cached on disk by
 * content hash.  Needs: a C compiler.  Gives: rt_cc_build.
 *
 * The compiler runs through ut_run_cc (util/spawn.c: no shell; nothing from
 * a model ever reaches a command line, the only arguments are the cache
 * paths harp makes and the configured flags, split on blanks). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compile.h"
#include "util/util.h"

char *rt_cc_cache_dir(const rt_cc_opts *o) {
  const char *d = o ? o->cache_dir : NULL;
  char buf[4096];
  if (d && *d) snprintf(buf, sizeof buf, "%s", d);
  else snprintf(buf, sizeof buf, "/tmp/harp-cache-%ld", (long)getuid());
  char *r = ut_xmalloc(strlen(buf) + 1);
  if (r) strcpy(r, buf);
  return r;
}

harp_status rt_cc_build(harp_error *e, const char *src, const rt_cc_opts *o, char **path, bool *hit) {
  *path = NULL;
  *hit = false;
  const char *cc = o && o->cc && *o->cc ? o->cc : "cc";
  const char *flags = o && o->cflags ? o->cflags : RT_CFLAGS_PORTABLE;
  char *dir = rt_cc_cache_dir(o);
  if (!dir) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  harp_status st = ut_mkdirs(e, dir);
  if (st) {
    free(dir);
    return st;
  }
  uint64_t h = ut_hash64(src, strlen(src), 0x6861727031ull);
  h = ut_hash64(cc, strlen(cc), h);
  h = ut_hash64(flags, strlen(flags), h);
  size_t pl = strlen(dir) + 64;
  char *so = ut_xmalloc(pl), *c_tmp = ut_xmalloc(pl), *so_tmp = ut_xmalloc(pl), *log = ut_xmalloc(pl);
  if (!so || !c_tmp || !so_tmp || !log) {
    st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    goto done;
  }
  snprintf(so, pl, "%s/%016llx.so", dir, (unsigned long long)h);
  struct stat sb;
  if (stat(so, &sb) == 0 && sb.st_size > 0) { /* cache hit: no compiler */
    *hit = true;
    *path = so;
    so = NULL;
    goto done;
  }
  long pid = (long)getpid();
  snprintf(c_tmp, pl, "%s/%016llx.%ld.c", dir, (unsigned long long)h, pid);
  snprintf(so_tmp, pl, "%s/%016llx.%ld.so.tmp", dir, (unsigned long long)h, pid);
  snprintf(log, pl, "%s/%016llx.%ld.log", dir, (unsigned long long)h, pid);
  if ((st = ut_write_file_atomic(e, c_tmp, src, strlen(src)))) goto done;
  /* -flto=N: GCC's partitions are optimised and assembled in N processes */
  long nj = o && o->jobs > 0 ? o->jobs : sysconf(_SC_NPROCESSORS_ONLN);
  char lto[32] = "";
  if (o && o->parallel && nj > 1 && strlen(src) >= RT_CC_PARALLEL_MIN)
    snprintf(lto, sizeof lto, "-flto=%ld", nj < 16 ? nj : 16);
  int rc;
  while ((rc = ut_run_cc(cc, flags, lto, so_tmp, c_tmp, log)) != 0 && lto[0])
    lto[0] = 0; /* a compiler (or linker) without LTO: the plain command */
  if (rc == -2) {
    unlink(c_tmp);
    st = ut_fail(e, HARP_E_LIMIT, NULL, "too many compiler flags in \"%.200s\"", flags);
    goto done;
  }
  if (rc != 0) {
    char *msg = NULL;
    size_t len;
    harp_error le = {0};
    ut_read_file(&le, log, 1 << 16, &msg, &len);
    st = ut_fail(e, rc == 127 ? HARP_E_IO : HARP_E_INTERNAL, NULL, "the C compiler (%s) failed with status %d on %s: %.600s", cc, rc,
                 c_tmp, msg ? msg : "");
    free(msg);
    unlink(so_tmp);
    goto done; /* keep the .c and .log for the bug report */
  }
  if (rename(so_tmp, so) != 0) {
    st = ut_fail_at(e, HARP_E_IO, so, 0, 0, "cannot install the compiled object: %s", strerror(errno));
    unlink(so_tmp);
    goto done;
  }
  unlink(c_tmp);
  unlink(log);
  *path = so;
  so = NULL;
done:
  free(dir);
  free(so);
  free(c_tmp);
  free(so_tmp);
  free(log);
  return st;
}
