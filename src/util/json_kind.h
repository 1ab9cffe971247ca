/* json_kind.h — jansson helpers: what a value is, in words for error
 * messages; a document's text ending in a newline.
 * Needs: jansson, util.h.  Gives: ut_json_kind, ut_json_text. */
#ifndef HARP_JSON_KIND_H
#define HARP_JSON_KIND_H
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

static inline const char *ut_json_kind(const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_OBJECT: return "an object";
  case JSON_ARRAY: return "an array";
  case JSON_STRING: return "a string";
  case JSON_INTEGER: return "an integer";
  case JSON_REAL: return "a real number";
  case JSON_TRUE:
  case JSON_FALSE: return "a boolean";
  default: return "null";
  }
}

/* *out: root's text as json_dumps writes it with flags, then a newline
 * (malloc'd); root's reference released (NULL: out of memory before it). */
static inline harp_status ut_json_text(harp_error *e, json_t *root, size_t flags, char **out) {
  char *txt = root ? json_dumps(root, flags) : NULL;
  json_decref(root);
  *out = NULL;
  if (!txt) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory printing JSON");
  size_t len = strlen(txt);
  *out = ut_xmalloc(len + 2);
  if (*out) {
    memcpy(*out, txt, len);
    memcpy(*out + len, "\n", 2);
  }
  free(txt);
  return *out ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory printing JSON");
}
#endif
