/* strmap.c — a string -> int open-addressing hash map (node ids of a Tiny
 * graph, the DSL's scopes, the names decompile hands out).
 * Needs: util (hashing, allocation).  Gives: ut_strmap_*. */
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

static uint64_t hash(const char *s) { return ut_hash64(s, strlen(s), 0); }

static bool grow(ut_strmap *m) {
  int cap = m->cap ? m->cap * 2 : 64;
  const char **keys = ut_xcalloc((size_t)cap, sizeof *keys);
  int *vals = ut_xcalloc((size_t)cap, sizeof *vals);
  if (!keys || !vals) {
    free(keys);
    free(vals);
    return false;
  }
  for (int i = 0; i < m->cap; i++) {
    if (!m->keys[i]) continue;
    uint64_t h = hash(m->keys[i]) & (uint64_t)(cap - 1);
    while (keys[h]) h = (h + 1) & (uint64_t)(cap - 1);
    keys[h] = m->keys[i];
    vals[h] = m->vals[i];
  }
  free(m->keys);
  free(m->vals);
  m->keys = keys;
  m->vals = vals;
  m->cap = cap;
  return true;
}

int *ut_strmap_find(const ut_strmap *m, const char *key) {
  if (!m || !m->cap) return NULL;
  for (uint64_t h = hash(key) & (uint64_t)(m->cap - 1); m->keys[h]; h = (h + 1) & (uint64_t)(m->cap - 1))
    if (strcmp(m->keys[h], key) == 0) return &m->vals[h];
  return NULL;
}

bool ut_strmap_put(ut_strmap *m, const char *key, int val) {
  int *v = ut_strmap_find(m, key);
  if (v) {
    *v = val;
    return true;
  }
  if ((m->n + 1) * 2 > m->cap && !grow(m)) return false;
  uint64_t h = hash(key) & (uint64_t)(m->cap - 1);
  while (m->keys[h]) h = (h + 1) & (uint64_t)(m->cap - 1);
  m->keys[h] = key;
  m->vals[h] = val;
  m->n++;
  return true;
}

void ut_strmap_free(ut_strmap *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}
