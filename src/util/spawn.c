/* spawn.c — run the system C compiler on one file, without a shell.
 * Needs: posix_spawn.  Gives: ut_run_cc (util.h).
 *
 * The compile cache (runtime/compile.c) and the template API's
 * cgen_compile_so (backend/c/cgen_cc.c) both build shared objects this
 * way.  posix_spawn rather than fork: the caller may have threads (a model's
 * pool).  Nothing from a model reaches the command line; flags are split on
 * blanks. */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "util/util.h"

extern char **environ;

#define CC_MAX_ARGS 64

int ut_run_cc(const char *cc, const char *flags, const char *extra, const char *so, const char *c, const char *log) {
  if (ut_fault_hit(UT_FAULT_SPAWN)) return 127; /* injected: as if the compiler could not start */
  char *fl = strdup(flags ? flags : "");
  if (!fl) return -1;
  char *argv[CC_MAX_ARGS];
  int n = 0;
  argv[n++] = (char *)cc;
  for (char *t = strtok(fl, " \t\n"); t; t = strtok(NULL, " \t\n")) {
    if (n >= CC_MAX_ARGS - 10) {
      free(fl);
      return -2;
    }
    argv[n++] = t;
  }
  if (extra && *extra) argv[n++] = (char *)extra;
  char *tail[] = {"-fPIC", "-shared", "-o", (char *)so, (char *)c, "-lm", "-lpthread"};
  for (size_t i = 0; i < sizeof tail / sizeof *tail; i++) argv[n++] = tail[i];
  argv[n] = NULL;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid;
  int sr = posix_spawnp(&pid, cc, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  free(fl);
  if (sr != 0) return 127;
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
