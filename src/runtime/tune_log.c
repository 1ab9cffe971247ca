/* tune_log.c — the tuner's figures: the CSV measurement log (seed 000 §9),
 * one-line plans for it, and Spearman's rank correlation between the cost
 * model's estimates and the measured times.
 * Needs: plan_to_dsl, the cache directory.  Gives: rt_tune_csv_header,
 * rt_tune_default_log, rt_tune_log_append,
 * rt_plan_oneline, rt_spearman.
 *
 * CSV columns (RFC 4180 quoting; times in milliseconds):
 *   timestamp, machine, model, shapeset, binding, region, point, default,
 *   best, FLOPs, Bytes, occ, estimate, actual, repeat, plan
 * FLOPs and Bytes are what the cost model charged the plan, occ the achieved
 * occupancy it used, estimate its time_est, actual the measured median. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compile.h"
#include "harp/tune.h"
#include "util/util.h"

static const char HEADER[] =
    "timestamp,machine,model,shapeset,binding,region,point,default,best,FLOPs,Bytes,occ,estimate,actual,repeat,plan";

const char *rt_tune_csv_header(void) { return HEADER; }

char *rt_tune_default_log(const char *cache_dir) {
  rt_cc_opts co = {.cache_dir = cache_dir};
  char *dir = rt_cc_cache_dir(&co);
  size_t n = dir ? strlen(dir) + 16 : 0;
  char *p = dir ? ut_xmalloc(n) : NULL;
  if (p) snprintf(p, n, "%s/tune.csv", dir);
  free(dir);
  return p;
}

char *rt_plan_oneline(const plan_t *p) {
  char *dsl = NULL;
  harp_error e = {0};
  if (plan_to_dsl(p, &dsl, &e)) return NULL;
  ut_str s;
  ut_str_init(&s);
  bool sep = false;
  for (const char *c = dsl; *c; c++) {
    if (*c == '\n') {
      sep = true;
      continue;
    }
    if (sep && s.len) ut_str_putc(&s, ' ');
    sep = false;
    ut_str_putc(&s, *c);
  }
  free(dsl);
  if (s.oom) {
    ut_str_free(&s);
    return NULL;
  }
  char *r = ut_str_take(&s);
  if (r && !*r) { /* an empty plan prints nothing */
    free(r);
    r = ut_xcalloc(1, 1);
  }
  return r;
}

/* A CSV field: quoted when it holds a comma, quote or line break. */
static void field(ut_str *s, const char *v) {
  if (!v) v = "";
  if (!strpbrk(v, ",\"\n\r")) {
    ut_str_puts(s, v);
    return;
  }
  ut_str_putc(s, '"');
  for (; *v; v++) {
    if (*v == '"') ut_str_putc(s, '"');
    ut_str_putc(s, *v == '\n' || *v == '\r' ? ' ' : *v);
  }
  ut_str_putc(s, '"');
}

static void row_text(ut_str *s, const rt_tune_row *r) {
  field(s, r->timestamp), ut_str_putc(s, ',');
  field(s, r->machine), ut_str_putc(s, ',');
  field(s, r->model), ut_str_putc(s, ',');
  field(s, r->shapeset), ut_str_putc(s, ',');
  field(s, r->binding), ut_str_putc(s, ',');
  field(s, r->region), ut_str_putc(s, ',');
  ut_str_printf(s, "%d,%d,%d,%.0f,%.0f,%.4g,%.6g,%.6g,%d,", r->point, r->is_default ? 1 : 0, r->is_best ? 1 : 0,
                r->flops, r->bytes, r->occ, r->estimate_ms, r->actual_ms, r->repeat);
  char *plan = r->plan ? rt_plan_oneline(r->plan) : NULL;
  field(s, plan);
  free(plan);
  ut_str_putc(s, '\n');
}

static harp_status write_all(harp_error *e, int fd, const char *path, const char *buf, size_t len) {
  while (len > 0) {
    ssize_t w = write(fd, buf, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return ut_fail_at(e, HARP_E_IO, path, 0, 0, "cannot append to the tuning log: %s", strerror(errno));
    buf += w;
    len -= (size_t)w;
  }
  return HARP_OK;
}

harp_status rt_tune_log_append(harp_error *e, const char *path, const rt_tune_row *rows, int n) {
  /* the directory first */
  char *dir = ut_xmalloc(strlen(path) + 1);
  if (!dir) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  strcpy(dir, path);
  char *slash = strrchr(dir, '/');
  harp_status st = HARP_OK;
  if (slash && slash != dir) {
    *slash = 0;
    st = ut_mkdirs(e, dir);
  }
  free(dir);
  if (st) return st;
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) return ut_fail_at(e, HARP_E_IO, path, 0, 0, "cannot open the tuning log: %s", strerror(errno));
  struct stat sb;
  ut_str s;
  ut_str_init(&s);
  if (fstat(fd, &sb) == 0 && sb.st_size == 0) { /* a new log: the header first */
    ut_str_puts(&s, HEADER);
    ut_str_putc(&s, '\n');
    st = write_all(e, fd, path, s.buf, s.len);
    s.len = 0;
  }
  for (int i = 0; i < n && !st; i++) {
    s.len = 0;
    if (s.buf) s.buf[0] = 0;
    row_text(&s, &rows[i]);
    if (s.oom) st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    else st = write_all(e, fd, path, s.buf, s.len); /* one write per row: whole lines under O_APPEND */
  }
  ut_str_free(&s);
  if (close(fd) != 0 && !st) st = ut_fail_at(e, HARP_E_IO, path, 0, 0, "cannot close the tuning log: %s", strerror(errno));
  return st;
}

/* Average ranks (1-based) of v into r. */
static void ranks(const double *v, int n, double *r) {
  for (int i = 0; i < n; i++) {
    int less = 0, equal = 0;
    for (int j = 0; j < n; j++) {
      if (v[j] < v[i]) less++;
      else if (v[j] == v[i]) equal++;
    }
    r[i] = less + (equal + 1) / 2.0;
  }
}

double rt_spearman(const double *x, const double *y, int n) {
  if (n < 2) return NAN;
  double *rx = ut_xcalloc((size_t)n * 2, sizeof *rx);
  if (!rx) return NAN;
  double *ry = rx + n;
  ranks(x, n, rx);
  ranks(y, n, ry);
  /* Pearson's correlation of the ranks (exact with ties) */
  double mx = 0, my = 0;
  for (int i = 0; i < n; i++) mx += rx[i], my += ry[i];
  mx /= n, my /= n;
  double sxy = 0, sxx = 0, syy = 0;
  for (int i = 0; i < n; i++) {
    sxy += (rx[i] - mx) * (ry[i] - my);
    sxx += (rx[i] - mx) * (rx[i] - mx);
    syy += (ry[i] - my) * (ry[i] - my);
  }
  free(rx);
  if (sxx <= 0 || syy <= 0) return NAN;
  return sxy / sqrt(sxx * syy);
}
