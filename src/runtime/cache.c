/* cache.c — the compile cache's directory and entries: made private (0700,
 * owned by the user, never through a symlink), each entry sealed with a
 * checksum trailer and keyed with the CPU's features, and a temporary
 * directory (with a warning) when the cache cannot be used.
 * Needs: POSIX.  Gives: rt_cache_* (cache.h), used by compile.c.
 *
 * An entry is one file, <key>.so: the shared object the compiler wrote,
 * then a trailer of RT_CACHE_TRAILER bytes ("HARPSUM1", the object's size
 * and its FNV-1a hash).  It is built in a private directory
 * (<cache>/build.XXXXXX, mkdtemp), sealed there and renamed into place, so
 * a reader sees a whole entry or none; one killed at any point leaves at
 * most a build directory that nothing loads (build.<host>.<pid>.XXXXXX: the
 * next build on that host removes those of processes that are gone).  An entry that is not a
 * regular file of ours, is truncated, or whose hash does not match is
 * removed and rebuilt.  The dynamic loader maps the object by its program
 * headers and ignores the trailer. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "util/util.h"

#define TRAILER_MAGIC "HARPSUM1"

/* The CPU's name for the cache key: code built with -march=native for one
 * CPU must not be loaded on another that shares the cache (an NFS home). */
void rt_cache_cpu_id(char *buf, size_t cap) {
  int k = 0;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  k += snprintf(buf, cap, "x86");
#define F(name)                                                                                                        \
  if (__builtin_cpu_supports(name) && k >= 0 && (size_t)k < cap) k += snprintf(buf + k, cap - (size_t)k, "," name);
  F("sse4.2") F("avx") F("avx2") F("fma") F("bmi2") F("avx512f") F("avx512bw") F("avx512vl") F("avx512dq")
  F("avx512cd") F("avx512vnni") F("avx512bf16") F("avx512ifma") F("avx512vbmi") F("avx512vbmi2") F("avx512bitalg")
  F("avx512vpopcntdq")
#undef F
  /* detection alone: a key asks Linux for no tile permission (cpu_amx.c) */
  if (ut_cpu_has_amx_bf16() && k >= 0 && (size_t)k < cap) k += snprintf(buf + k, cap - (size_t)k, ",amx-bf16");
  if (ut_cpu_has_amx_int8() && k >= 0 && (size_t)k < cap) k += snprintf(buf + k, cap - (size_t)k, ",amx-int8");
#elif defined(__aarch64__)
  k += snprintf(buf, cap, "aarch64");
#else
  k += snprintf(buf, cap, "other");
#endif
  (void)k;
}

/* Make dir (its parents 0755 as mkdir -p does, itself 0700) and check it is
 * a real directory of ours that no one else can write.  *why gets the reason
 * when it is not usable. */
static bool make_private(const char *dir, char *why, size_t cap) {
  char parent[4096];
  snprintf(parent, sizeof parent, "%s", dir);
  char *slash = strrchr(parent, '/');
  harp_error e = {0};
  if (slash && slash != parent) {
    *slash = 0;
    if (ut_mkdirs(&e, parent)) {
      snprintf(why, cap, "%.500s", e.msg);
      harp_error_clear(&e);
      return false;
    }
  }
  if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    snprintf(why, cap, "cannot create %s: %s", dir, strerror(errno));
    return false;
  }
  struct stat st;
  if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    snprintf(why, cap, "%s is not a directory (a symlink is not followed)", dir);
    return false;
  }
  if (st.st_uid != geteuid() || (st.st_mode & 022)) {
    snprintf(why, cap, "%s is not the user's own private directory (owner %ld, mode %03o)", dir, (long)st.st_uid,
             (unsigned)(st.st_mode & 0777));
    return false;
  }
  return true;
}

/* A fresh private directory under tmp (NULL or "": /tmp; the knob tmpdir)
 * for this one build. */
static bool temp_dir(const char *tmp, char *out, size_t cap) {
  snprintf(out, cap, "%s/harp-build-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  return mkdtemp(out) != NULL;
}

/* This host's name as it goes into build directory names. */
static void host_name(char *buf, size_t cap) {
  if (gethostname(buf, cap) != 0) snprintf(buf, cap, "host");
  buf[cap - 1] = 0;
  for (char *p = buf; *p; p++)
    if (*p == '.' || *p == '/') *p = '_';
}

/* Remove the build directories of processes of this host that are gone (a
 * compile killed mid-way): build.<host>.<pid>.XXXXXX with no such pid. */
void rt_cache_sweep(const char *dir) {
  char host[64], pre[80];
  host_name(host, sizeof host);
  int pl = snprintf(pre, sizeof pre, "build.%s.", host);
  DIR *d = opendir(dir);
  if (!d) return;
  for (struct dirent *de; (de = readdir(d));) {
    if (strncmp(de->d_name, pre, (size_t)pl)) continue;
    long pid = strtol(de->d_name + pl, NULL, 10);
    if (pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
    rt_cache_build old = {0};
    snprintf(old.work, sizeof old.work, "%.3000s/%.255s", dir, de->d_name);
    rt_cache_end(&old, false);
  }
  closedir(d);
}

harp_status rt_cache_begin(harp_error *e, const char *dir, const char *tmp, rt_cache_build *b) {
  memset(b, 0, sizeof *b);
  char why[600] = "", host[64];
  if (make_private(dir, why, sizeof why)) {
    rt_cache_sweep(dir);
    host_name(host, sizeof host);
    int n = snprintf(b->work, sizeof b->work, "%s/build.%s.%ld.XXXXXX", dir, host, (long)getpid());
    if (n > 0 && (size_t)n < sizeof b->work && mkdtemp(b->work)) return HARP_OK;
    snprintf(why, sizeof why, "cannot write in %s: %s", dir, strerror(errno));
  }
  return rt_cache_begin_temp(e, dir, tmp, why, b);
}

harp_status rt_cache_begin_temp(harp_error *e, const char *dir, const char *tmp, const char *why, rt_cache_build *b) {
  if (!temp_dir(tmp, b->work, sizeof b->work))
    return ut_fail_at(e, HARP_E_IO, dir, 0, 0, "the compile cache is unusable (%s) and no temporary directory can be made: %s",
                      why, strerror(errno));
  b->temp = true;
  snprintf(b->warning, sizeof b->warning, "compile cache not used: %.300s; compiling in %.100s", why, b->work);
  return HARP_OK;
}

/* Hash f's first n bytes (read from the start). */
static bool hash_fd(int fd, uint64_t n, uint64_t *h) {
  unsigned char buf[1 << 16];
  uint64_t hh = 0x6861727063616368ull, left = n;
  if (lseek(fd, 0, SEEK_SET) != 0) return false;
  while (left > 0) {
    ssize_t r = read(fd, buf, left < sizeof buf ? (size_t)left : sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    hh = ut_hash64(buf, (size_t)r, hh);
    left -= (uint64_t)r;
  }
  *h = hh;
  return true;
}

static void put64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t get64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

harp_status rt_cache_seal(harp_error *e, const char *so) {
  int fd = open(so, O_RDWR | O_NOFOLLOW);
  if (fd < 0) return ut_fail_at(e, HARP_E_IO, so, 0, 0, "cannot open the compiled object: %s", strerror(errno));
  struct stat st;
  uint64_t h = 0;
  unsigned char t[RT_CACHE_TRAILER];
  bool ok = fstat(fd, &st) == 0 && hash_fd(fd, (uint64_t)st.st_size, &h);
  memcpy(t, TRAILER_MAGIC, 8);
  put64(t + 8, (uint64_t)st.st_size);
  put64(t + 16, h);
  int er = 0;
  if (ok && ut_fault_hit(UT_FAULT_WRITE)) ok = false, er = ENOSPC;
  else if (ok && (lseek(fd, 0, SEEK_END) < 0 || write(fd, t, sizeof t) != (ssize_t)sizeof t)) ok = false, er = errno;
  if (close(fd) != 0 && ok) ok = false, er = errno;
  if (!ok) return ut_fail_at(e, HARP_E_IO, so, 0, 0, "cannot seal the compiled object: %s", strerror(er ? er : EIO));
  return HARP_OK;
}

bool rt_cache_verify(const char *so) {
  int fd = open(so, O_RDONLY | O_NOFOLLOW);
  if (fd < 0) return false;
  struct stat st;
  unsigned char t[RT_CACHE_TRAILER];
  uint64_t h = 0;
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && st.st_size > RT_CACHE_TRAILER &&
            pread(fd, t, sizeof t, st.st_size - RT_CACHE_TRAILER) == (ssize_t)sizeof t && !memcmp(t, TRAILER_MAGIC, 8) &&
            get64(t + 8) == (uint64_t)st.st_size - RT_CACHE_TRAILER && hash_fd(fd, get64(t + 8), &h) && h == get64(t + 16);
  close(fd);
  return ok;
}

harp_status rt_cache_install(harp_error *e, const char *built, const char *entry) {
  if (rename(built, entry) != 0)
    return ut_fail_at(e, HARP_E_IO, entry, 0, 0, "cannot install the compiled object: %s", strerror(errno));
  return HARP_OK;
}

/* Remove the build directory and what it holds (one level: harp puts no
 * directories there). */
void rt_cache_end(rt_cache_build *b, bool keep) {
  if (!b->work[0] || keep) return;
  DIR *d = opendir(b->work);
  if (d) {
    char p[sizeof b->work + 300];
    for (struct dirent *de; (de = readdir(d));) {
      if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
      snprintf(p, sizeof p, "%s/%s", b->work, de->d_name);
      unlink(p);
    }
    closedir(d);
  }
  rmdir(b->work);
  b->work[0] = 0;
}

void rt_cache_discard(const char *so) {
  char d[4096];
  snprintf(d, sizeof d, "%s", so);
  unlink(so);
  char *slash = strrchr(d, '/');
  if (slash) *slash = 0, rmdir(d);
}
