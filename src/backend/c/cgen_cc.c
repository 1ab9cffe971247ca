/* cgen_cc.c — compile generated C into a shared object and dlopen it.
 * Needs: cgen.h, util (files).  Gives: cgen_compile_so.
 *
 * The compiler runs through posix_spawnp (no shell: flags are split on
 * blanks), with its output sent to a log file that becomes the error message
 * on failure.  The .c/.so/.log live in a fresh mkdtemp directory removed
 * before returning; the loaded object stays mapped after unlink. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/c/cgen.h"

extern char **environ;

#define CC_MAX_ARGS 64

static int split_flags(char *buf, char **argv, int at, int max) {
  for (char *p = buf; *p;) {
    while (*p == ' ' || *p == '\t' || *p == '\n') *p++ = 0;
    if (!*p) break;
    if (at >= max) return -1;
    argv[at++] = p;
    while (*p && *p != ' ' && *p != '\t' && *p != '\n') p++;
  }
  return at;
}

hp_status cgen_compile_so(hp_error *e, const char *src, const cgen_cc_opts *opts, void **handle) {
  *handle = NULL;
  if (!src) return hp_fail(e, HP_E_INVALID_ARG, NULL, "cgen_compile_so: no source");
  const char *cc = opts && opts->cc ? opts->cc : getenv("CC");
  if (!cc || !*cc) cc = "cc";
  const char *flags = opts && opts->flags ? opts->flags : "-O3";
  const char *tmp = opts && opts->workdir ? opts->workdir : getenv("TMPDIR");
  if (!tmp || !*tmp) tmp = "/tmp";
  char dir[512], cpath[600], sopath[600], logpath[600];
  if (snprintf(dir, sizeof dir, "%s/harp-cc-XXXXXX", tmp) >= (int)sizeof dir)
    return hp_fail(e, HP_E_IO, NULL, "cgen_compile_so: work directory path too long");
  if (!mkdtemp(dir)) return hp_fail(e, HP_E_IO, NULL, "cgen_compile_so: cannot create a directory in %s", tmp);
  snprintf(cpath, sizeof cpath, "%s/k.c", dir);
  snprintf(sopath, sizeof sopath, "%s/k.so", dir);
  snprintf(logpath, sizeof logpath, "%s/cc.log", dir);
  hp_status st = HP_OK;
  char *fl = NULL;
  FILE *f = fopen(cpath, "w");
  if (!f || fputs(src, f) < 0 || fclose(f) != 0) {
    if (f) fclose(f);
    st = hp_fail(e, HP_E_IO, NULL, "cgen_compile_so: cannot write %s", cpath);
    goto out;
  }
  fl = strdup(flags);
  if (!fl) {
    st = hp_fail(e, HP_E_NO_MEMORY, NULL, "cgen_compile_so: out of memory");
    goto out;
  }
  char *argv[CC_MAX_ARGS];
  int n = 0;
  argv[n++] = (char *)cc;
  n = split_flags(fl, argv, n, CC_MAX_ARGS - 10);
  if (n < 0) {
    st = hp_fail(e, HP_E_LIMIT, NULL, "cgen_compile_so: too many compiler flags");
    goto out;
  }
  argv[n++] = "-fPIC";
  argv[n++] = "-shared";
  argv[n++] = "-o";
  argv[n++] = sopath;
  argv[n++] = cpath;
  argv[n++] = "-lm";
  argv[n++] = "-lpthread";
  argv[n] = NULL;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, logpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid;
  int rc = posix_spawnp(&pid, cc, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    st = hp_fail(e, HP_E_IO, NULL, "cgen_compile_so: cannot run compiler '%s'", cc);
    goto out;
  }
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0) {
  }
  if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
    char log[700] = {0};
    FILE *lf = fopen(logpath, "r");
    if (lf) {
      size_t got = fread(log, 1, sizeof log - 1, lf);
      log[got] = 0;
      fclose(lf);
    }
    st = hp_fail(e, HP_E_INTERNAL, NULL, "cgen_compile_so: %s failed: %s", cc, log);
    goto out;
  }
  *handle = dlopen(sopath, RTLD_NOW | RTLD_LOCAL);
  if (!*handle) {
    const char *de = dlerror();
    st = hp_fail(e, HP_E_IO, NULL, "cgen_compile_so: dlopen: %s", de ? de : "?");
  }
out:
  free(fl);
  unlink(cpath);
  unlink(sopath);
  unlink(logpath);
  rmdir(dir);
  return st;
}
