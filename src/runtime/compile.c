/* compile.c — compile generated C into a shared object, cached on disk by
 * content hash (the entries and their directory: cache.c).  Needs: a C
 * compiler.  Gives: rt_cc_build, rt_cc_build_ex, rt_cc_cached.
 *
 * The compiler runs through ut_run_cc (util/spawn.c: no shell; nothing from
 * a model ever reaches a command line, the only arguments are the cache
 * paths harp makes and the configured flags, split on blanks). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
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

/* The entry's key: the source, the compiler, its flags and the CPU. */
static uint64_t cache_key(const char *src, const char *cc, const char *flags, const rt_cc_opts *o) {
  char cpu[512];
  if (o && o->cpu_id) snprintf(cpu, sizeof cpu, "%s", o->cpu_id);
  else rt_cache_cpu_id(cpu, sizeof cpu);
  uint64_t h = ut_hash64(src, strlen(src), 0x6861727032ull);
  h = ut_hash64(cc, strlen(cc), h);
  h = ut_hash64(flags, strlen(flags), h);
  return ut_hash64(cpu, strlen(cpu), h);
}

/* Run the compiler on `c` into `so` (-flto=N first for a large source with
 * o->parallel; the plain command if that fails); the error quotes its log. */
static harp_status run_compiler(harp_error *e, const char *cc, const char *flags, const rt_cc_opts *o, size_t srclen,
                                const char *so, const char *c, const char *log, bool *keep) {
  /* -flto=N: GCC's partitions are optimised and assembled in N processes */
  long nj = o && o->jobs > 0 ? o->jobs : sysconf(_SC_NPROCESSORS_ONLN);
  char lto[32] = "";
  if (o && o->parallel && nj > 1 && srclen >= RT_CC_PARALLEL_MIN) snprintf(lto, sizeof lto, "-flto=%ld", nj < 16 ? nj : 16);
  int rc;
  while ((rc = ut_run_cc(cc, flags, lto, so, c, log)) != 0 && rc != 127 && lto[0])
    lto[0] = 0; /* a compiler (or linker) without LTO: the plain command */
  if (rc == -2) return ut_fail(e, HARP_E_LIMIT, NULL, "too many compiler flags in \"%.200s\"", flags);
  if (rc == 0) return HARP_OK;
  char *msg = NULL;
  size_t len;
  harp_error le = {0};
  ut_read_file(&le, log, 1 << 16, &msg, &len);
  harp_error_clear(&le);
  *keep = rc != 127; /* the compiler ran: keep the .c and .log for the bug report */
  harp_status st = ut_fail(e, rc == 127 ? HARP_E_IO : HARP_E_INTERNAL, NULL, "the C compiler (%s) failed with status %d on %s: %.600s",
                           cc, rc, c, msg ? msg : "");
  free(msg);
  return st;
}

/* In build directory b: the source, the compiler, the seal.  p[] receives
 * the paths of the .c, the object and the log (cap bytes each); *disk is set
 * when writing a file failed (not the compiler). */
static harp_status build_in(harp_error *e, const rt_cache_build *b, uint64_t h, const char *src, const char *cc,
                            const char *flags, const rt_cc_opts *o, char *p[3], size_t cap, bool *keep, bool *disk) {
  snprintf(p[0], cap, "%s/%016llx.c", b->work, (unsigned long long)h);
  snprintf(p[1], cap, "%s/%016llx.so", b->work, (unsigned long long)h);
  snprintf(p[2], cap, "%s/%016llx.log", b->work, (unsigned long long)h);
  harp_status st = ut_write_file_atomic(e, p[0], src, strlen(src));
  if (!st) st = run_compiler(e, cc, flags, o, strlen(src), p[1], p[0], p[2], keep);
  else *disk = st == HARP_E_IO;
  if (!st) *disk = (st = rt_cache_seal(e, p[1])) == HARP_E_IO;
  return st;
}

harp_status rt_cc_build_ex(harp_error *e, const char *src, const rt_cc_opts *o, rt_cc_result *r) {
  memset(r, 0, sizeof *r);
  const char *cc = o && o->cc && *o->cc ? o->cc : "cc";
  const char *flags = o && o->cflags ? o->cflags : RT_CFLAGS_PORTABLE;
  char *dir = rt_cc_cache_dir(o);
  if (!dir) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  uint64_t h = cache_key(src, cc, flags, o);
  size_t pl = strlen(dir) + sizeof(((rt_cache_build *)0)->work) + 64;
  char *so = ut_xmalloc(pl), *c = ut_xmalloc(pl), *built = ut_xmalloc(pl), *log = ut_xmalloc(pl);
  rt_cache_build b = {0};
  bool keep = false;
  harp_status st = HARP_OK;
  if (!so || !c || !built || !log) {
    st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    goto done;
  }
  snprintf(so, pl, "%s/%016llx.so", dir, (unsigned long long)h);
  if (rt_cache_verify(so)) { /* cache hit: no compiler (what killed compiles left is removed) */
    rt_cache_sweep(dir);
    r->hit = true;
    r->path = so;
    so = NULL;
    goto done;
  }
  if ((st = rt_cache_begin(e, dir, o ? o->tmpdir : NULL, &b))) goto done;
  bool disk = false;
  st = build_in(e, &b, h, src, cc, flags, o, (char *[]){c, built, log}, pl, &keep, &disk);
  if (st && disk && !b.temp) { /* the cache refused a file (full, read-only): a temporary directory */
    char why[600];
    snprintf(why, sizeof why, "%.500s", e->msg);
    harp_error_clear(e);
    rt_cache_end(&b, false);
    if (!(st = rt_cache_begin_temp(e, dir, o ? o->tmpdir : NULL, why, &b)))
      st = build_in(e, &b, h, src, cc, flags, o, (char *[]){c, built, log}, pl, &keep, &disk);
  }
  if (!st && b.temp) { /* the object stays in the temporary directory until loaded */
    unlink(c);
    unlink(log);
    r->temp = true;
    snprintf(r->warning, sizeof r->warning, "%s", b.warning);
    r->path = built;
    built = NULL;
    b.work[0] = 0;
  } else if (!st && !(st = rt_cache_install(e, built, so))) {
    r->path = so;
    so = NULL;
  }
done:
  rt_cache_end(&b, keep);
  free(dir);
  free(so);
  free(c);
  free(built);
  free(log);
  return st;
}

bool rt_cc_cached(const char *src, const rt_cc_opts *o) {
  const char *cc = o && o->cc && *o->cc ? o->cc : "cc";
  const char *flags = o && o->cflags ? o->cflags : RT_CFLAGS_PORTABLE;
  char *dir = rt_cc_cache_dir(o);
  if (!dir) return false;
  char so[4200];
  snprintf(so, sizeof so, "%s/%016llx.so", dir, (unsigned long long)cache_key(src, cc, flags, o));
  free(dir);
  return rt_cache_verify(so);
}

harp_status rt_cc_build(harp_error *e, const char *src, const rt_cc_opts *o, char **path, bool *hit) {
  rt_cc_result r;
  harp_status st = rt_cc_build_ex(e, src, o, &r);
  *path = r.path;
  *hit = r.hit;
  return st;
}
