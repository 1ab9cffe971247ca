/* calib.c — the CPU calibration file (docs/plan.md §19): parse, print, and
 * the micro-kernel rate lookup the CPU cost model uses.
 * Needs: harp/plan.h.  Gives: plan_calib_parse, plan_calib_format,
 * plan_calib_rate, plan_calib_wino_speedup, plan_calib_add_wino.
 *
 * The file is text, one "key value..." line each, '#' comments:
 *
 *   harp-calibration 1
 *   machine cpu:AMD_EPYC:avx512:2c
 *   mem_gbs 21.4
 *   pack_gbs 9.8
 *   task_us 6.1
 *   mk 6 64 256 512 283.5        (MR NR KC NC GFLOP/s of one core, fp32)
 *   wino 3136 576 0.68           (optional: harp tune's measured Winograd speed-up
 *                                 over the direct kernel at PIXELS, K)
 *   #@ wfilter_ns 0.21 0.43      (optional: Winograd's filter transform, ns a
 *                                 multiply-add on one core, output in L2 / beyond)
 *
 * "#@ " lines hold the figures added after version 1: a harp from before
 * them reads a comment (and keeps the file, rather than find it malformed
 * and measure everything again), this one parses the rest of the line.
 *
 * Every key once (mk: 1 to PLAN_CALIB_MK lines), numbers finite and in a
 * sane range; anything else is a located HARP_E_PARSE (the runtime then
 * measures again). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harp/plan.h"
#include "util/util.h"

#define CALIB_VERSION 1

/* One number of a line, in [lo, hi]; false otherwise. */
static bool num(const char **s, double lo, double hi, double *out) {
  while (**s == ' ' || **s == '\t') (*s)++;
  if (!**s) return false;
  char *end;
  errno = 0;
  double v = strtod(*s, &end);
  if (end == *s || errno || !isfinite(v) || v < lo || v > hi || (*end && *end != ' ' && *end != '\t')) return false;
  *s = end;
  *out = v;
  return true;
}

static bool rest_empty(const char *s) {
  while (*s == ' ' || *s == '\t') s++;
  return !*s;
}

/* The scalar keys: name, where it goes, its range. */
typedef struct calib_key {
  const char *name;
  size_t off;
  double lo, hi;
} calib_key;
static const calib_key keys[] = {
    {"mem_gbs", offsetof(plan_calib, mem_gbs), 0.01, 1e5},
    {"pack_gbs", offsetof(plan_calib, pack_gbs), 0.01, 1e5},
    {"task_us", offsetof(plan_calib, task_us), 0, 1e6},
};

/* One line (NUL-terminated, no '\n') into *c; seen[] marks the keys found
 * (0..2 the scalars, 3 the version, 4 the machine). */
static harp_status parse_line(char *line, const char *path, int ln, const char *machine, plan_calib *c, bool *seen,
                              harp_error *e) {
  /* "#@ key ...": a figure newer than the format, a comment to older harps */
  bool ext = !strncmp(line, "#@ ", 3);
  char *hash = strchr(ext ? line + 3 : line, '#');
  if (hash) *hash = 0;
  const char *s = ext ? line + 3 : line;
  while (*s == ' ' || *s == '\t') s++;
  if (!*s) return HARP_OK;
  size_t kl = strcspn(s, " \t");
  const char *v = s + kl;
  double x = 0;
  if (kl == 16 && !strncmp(s, "harp-calibration", kl)) {
    if (!num(&v, 0, 1e9, &x) || !rest_empty(v) || x != CALIB_VERSION)
      return ut_fail_at(e, HARP_E_PARSE, path, ln, 0, "calibration version: expected %d", CALIB_VERSION);
    seen[3] = true;
    return HARP_OK;
  }
  if (kl == 7 && !strncmp(s, "machine", kl)) {
    while (*v == ' ' || *v == '\t') v++;
    size_t n = strlen(v);
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\r')) n--;
    if (machine && (strlen(machine) != n || strncmp(v, machine, n)))
      return ut_fail_at(e, HARP_E_PARSE, path, ln, 0, "calibration of another machine ('%.*s', this is '%s')",
                        (int)(n > 80 ? 80 : n), v, machine);
    seen[4] = true;
    return HARP_OK;
  }
  if (kl == 2 && !strncmp(s, "mk", 2)) {
    double mr = 0, nr = 0, kc = 0, nc = 0, g = 0;
    if (!num(&v, 1, 64, &mr) || !num(&v, 1, 256, &nr) || !num(&v, 1, 1 << 20, &kc) || !num(&v, 1, 1 << 24, &nc) ||
        !num(&v, 0.001, 1e6, &g) || !rest_empty(v) || mr != floor(mr) || nr != floor(nr) || kc != floor(kc) ||
        nc != floor(nc))
      return ut_fail_at(e, HARP_E_PARSE, path, ln, 0,
                        "mk: expected MR NR KC NC (whole numbers) and GFLOP/s, each positive and in range");
    if (c->nmk >= PLAN_CALIB_MK)
      return ut_fail_at(e, HARP_E_PARSE, path, ln, 0, "more than %d mk lines", PLAN_CALIB_MK);
    c->mk[c->nmk++] = (plan_calib_mk){(int)mr, (int)nr, (int)kc, (int)nc, g};
    return HARP_OK;
  }
  if (kl == 4 && !strncmp(s, "wino", 4)) {
    double px = 0, k = 0, sp = 0;
    if (!num(&v, 1, 1e12, &px) || !num(&v, 1, 1e12, &k) || !num(&v, 0.001, 1000, &sp) || !rest_empty(v) ||
        px != floor(px) || k != floor(k))
      return ut_fail_at(e, HARP_E_PARSE, path, ln, 0,
                        "wino: expected PIXELS K (whole numbers) and a speed-up, each positive and in range");
    if (c->nwino >= PLAN_CALIB_WINO)
      return ut_fail_at(e, HARP_E_PARSE, path, ln, 0, "more than %d wino lines", PLAN_CALIB_WINO);
    c->wino[c->nwino++] = (plan_calib_wino){(int64_t)px, (int64_t)k, sp};
    return HARP_OK;
  }
  if (ext != (kl == 10 && !strncmp(s, "wfilter_ns", kl)))
    return ut_fail_at(e, HARP_E_PARSE, path, ln, 0, ext ? "unknown '#@' key '%.*s'" : "'%.*s' is a '#@' line",
                      (int)(kl > 40 ? 40 : kl), s);
  if (ext) {
    if (c->wf_ns[0] > 0) return ut_fail_at(e, HARP_E_PARSE, path, ln, 0, "wfilter_ns given twice");
    if (!num(&v, 1e-4, 1e4, &c->wf_ns[0]) || !num(&v, 1e-4, 1e4, &c->wf_ns[1]) || !rest_empty(v))
      return ut_fail_at(e, HARP_E_PARSE, path, ln, 0, "wfilter_ns: expected two numbers in [0.0001, 10000] (ns)");
    return HARP_OK;
  }
  for (int i = 0; i < UT_ARRAY_LEN(keys); i++)
    if (strlen(keys[i].name) == kl && !strncmp(s, keys[i].name, kl)) {
      if (seen[i]) return ut_fail_at(e, HARP_E_PARSE, path, ln, 0, "%s given twice", keys[i].name);
      if (!num(&v, keys[i].lo, keys[i].hi, &x) || !rest_empty(v))
        return ut_fail_at(e, HARP_E_PARSE, path, ln, 0, "%s: expected one number in [%g, %g]", keys[i].name,
                          keys[i].lo, keys[i].hi);
      *(double *)((char *)c + keys[i].off) = x;
      seen[i] = true;
      return HARP_OK;
    }
  return ut_fail_at(e, HARP_E_PARSE, path, ln, 0, "unknown key '%.*s'", (int)(kl > 40 ? 40 : kl), s);
}

harp_status plan_calib_parse(const char *text, const char *path, const char *machine, plan_calib *out, harp_error *e) {
  memset(out, 0, sizeof *out);
  plan_calib c = {0};
  bool seen[5] = {false};
  int ln = 0;
  char line[512];
  for (const char *p = text; *p;) {
    size_t n = strcspn(p, "\n");
    ln++;
    if (n >= sizeof line) return ut_fail_at(e, HARP_E_PARSE, path, ln, 0, "line longer than %zu bytes", sizeof line - 1);
    memcpy(line, p, n);
    line[n] = 0;
    if (parse_line(line, path, ln, machine, &c, seen, e)) return e->code;
    p += n + (p[n] == '\n');
  }
  static const char *const what[5] = {"mem_gbs", "pack_gbs", "task_us", "harp-calibration", "machine"};
  for (int i = 0; i < 5; i++)
    if (!seen[i]) return ut_fail_at(e, HARP_E_PARSE, path, 0, 0, "no '%s' line", what[i]);
  if (c.nmk == 0) return ut_fail_at(e, HARP_E_PARSE, path, 0, 0, "no 'mk' line");
  c.valid = true;
  *out = c;
  return HARP_OK;
}

char *plan_calib_format(const plan_calib *c, const char *machine) {
  ut_str s;
  ut_str_init(&s);
  ut_str_printf(&s,
                "# harp CPU calibration (harp calibrate; docs/plan.md section 19).  Delete it or run\n"
                "# `harp calibrate --force` to measure again.\n"
                "harp-calibration %d\nmachine %s\nmem_gbs %.3f\npack_gbs %.3f\ntask_us %.3f\n",
                CALIB_VERSION, machine, c->mem_gbs, c->pack_gbs, c->task_us);
  ut_str_puts(&s, "# mk MR NR KC NC GFLOP/s (one core, fp32)\n");
  for (int i = 0; i < c->nmk; i++)
    ut_str_printf(&s, "mk %d %d %d %d %.3f\n", c->mk[i].mr, c->mk[i].nr, c->mk[i].kc, c->mk[i].nc, c->mk[i].gflops);
  if (c->wf_ns[0] > 0 && c->wf_ns[1] > 0)
    ut_str_printf(&s, "# Winograd filter transform: ns a multiply-add, one core, output in L2 / beyond\n"
                      "#@ wfilter_ns %.4f %.4f\n", c->wf_ns[0], c->wf_ns[1]);
  if (c->nwino) ut_str_puts(&s, "# wino PIXELS K SPEEDUP (harp tune: direct / Winograd, measured)\n");
  for (int i = 0; i < c->nwino; i++)
    ut_str_printf(&s, "wino %lld %lld %.4f\n", (long long)c->wino[i].px, (long long)c->wino[i].k, c->wino[i].speedup);
  if (s.oom) {
    ut_str_free(&s);
    return NULL;
  }
  return ut_str_take(&s);
}

double plan_calib_rate(const plan_calib *c, int mr, int nr, int64_t kc, int64_t nc) {
  double best = 0, dist = INFINITY;
  for (int i = 0; c && i < c->nmk; i++) {
    const plan_calib_mk *k = &c->mk[i];
    if (k->mr != mr || k->nr != nr) continue;
    double d = fabs(log((double)k->kc / (double)(kc > 0 ? kc : 1))) + fabs(log((double)k->nc / (double)(nc > 0 ? nc : 1)));
    if (d < dist) dist = d, best = k->gflops;
  }
  return best;
}

double plan_calib_wino_speedup(const plan_calib *c, int64_t px, int64_t k) {
  double best = 0, dist = INFINITY;
  for (int i = 0; c && i < c->nwino; i++) {
    double d = fabs(log((double)c->wino[i].px / (double)(px > 0 ? px : 1))) +
               fabs(log((double)c->wino[i].k / (double)(k > 0 ? k : 1)));
    if (d < dist) dist = d, best = c->wino[i].speedup;
  }
  return best;
}

void plan_calib_add_wino(plan_calib *c, int64_t px, int64_t k, double speedup) {
  int i = 0;
  while (i < c->nwino && (c->wino[i].px != px || c->wino[i].k != k)) i++;
  if (i == PLAN_CALIB_WINO) { /* full: the oldest goes */
    memmove(c->wino, c->wino + 1, sizeof c->wino[0] * (PLAN_CALIB_WINO - 1));
    i = PLAN_CALIB_WINO - 1;
  } else if (i == c->nwino) {
    c->nwino++;
  }
  c->wino[i] = (plan_calib_wino){px, k, speedup};
}
