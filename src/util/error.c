/* error.c — harp_error construction and formatting.
 * Needs: nothing.  Gives: the error-as-value helpers of harp/error.h. */
#include "harp/error.h"

#include <stdio.h>
#include <string.h>

static const char *const status_names[] = {
#define HARP_X_NAME(e, name, doc) name,
    HARP_ERRORS(HARP_X_NAME)
#undef HARP_X_NAME
};

const char *harp_status_name(harp_status s) {
  if ((unsigned)s >= (unsigned)HARP_E_COUNT_) return "InternalError";
  return status_names[s];
}

void harp_error_clear(harp_error *e) { memset(e, 0, sizeof *e); }

harp_status ut_vfail(harp_error *e, harp_status code, const char *node, const char *fmt, va_list ap) {
  if (!e) return code;
  if (e->code != HARP_OK) return e->code; /* keep the first, most specific error */
  e->code = code;
  snprintf(e->node, sizeof e->node, "%s", node ? node : "");
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  return code;
}

harp_status ut_fail(harp_error *e, harp_status code, const char *node, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  harp_status s = ut_vfail(e, code, node, fmt, ap);
  va_end(ap);
  return s;
}

harp_status ut_fail_at(harp_error *e, harp_status code, const char *file, int line, int col,
                     const char *fmt, ...) {
  if (!e) return code;
  if (e->code != HARP_OK) return e->code;
  va_list ap;
  va_start(ap, fmt);
  ut_vfail(e, code, NULL, fmt, ap);
  va_end(ap);
  snprintf(e->file, sizeof e->file, "%s", file ? file : "");
  e->line = line;
  e->col = col;
  return code;
}

void ut_error_set_snippet(harp_error *e, const char *src, int line, int col) {
  if (!e || !src || line < 1) return;
  const char *p = src;
  for (int l = 1; l < line && *p; p++)
    if (*p == '\n') l++;
  const char *end = strchr(p, '\n');
  int len = end ? (int)(end - p) : (int)strlen(p);
  if (len > 200) len = 200;
  char caret[220];
  int c = col < 1 ? 1 : col;
  if (c > len + 1) c = len + 1;
  int k = 0;
  for (int i = 1; i < c && k < 210; i++) caret[k++] = (p[i - 1] == '\t') ? '\t' : ' ';
  caret[k++] = '^';
  caret[k] = 0;
  /* Non-printable bytes would garble a terminal: show them as '?'. */
  char line_buf[210];
  for (int i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)p[i];
    line_buf[i] = (ch == '\t' || (ch >= 32 && ch < 127) || ch >= 0x80) ? (char)ch : '?';
  }
  line_buf[len] = 0;
  snprintf(e->snippet, sizeof e->snippet, "%s\n%s", line_buf, caret);
}

void harp_error_format(const harp_error *e, char *buf, int cap) {
  int n = snprintf(buf, cap, "error[%s]: ", harp_status_name(e->code));
  if (n < 0 || n >= cap) return;
  if (e->file[0] && e->line > 0)
    n += snprintf(buf + n, cap - n, "%s:%d:%d: ", e->file, e->line, e->col);
  else if (e->file[0])
    n += snprintf(buf + n, cap - n, "%s: ", e->file);
  if (n < cap) n += snprintf(buf + n, cap - n, "%s", e->msg);
  if (n < cap && e->node[0]) n += snprintf(buf + n, cap - n, " (node \"%s\")", e->node);
  if (n < cap && e->snippet[0]) snprintf(buf + n, cap - n, "\n%s", e->snippet);
}
