/* names.c — a string -> int hash map for the DSL passes (the variables in
 * scope, the names decompile has handed out).
 * Needs: util (hashing, allocation).  Gives: fe_names_*. */
#include <stdlib.h>
#include <string.h>

#include "fe_int.h"

static uint64_t hash(const char *s) { return hp_hash64(s, strlen(s), 0x9e3779b97f4a7c15ull); }

static bool grow(fe_names *m) {
  int cap = m->cap ? m->cap * 2 : 64;
  const char **keys = hp_xcalloc((size_t)cap, sizeof *keys);
  int *vals = hp_xcalloc((size_t)cap, sizeof *vals);
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

int *fe_names_find(const fe_names *m, const char *key) {
  if (!m->cap) return NULL;
  for (uint64_t h = hash(key) & (uint64_t)(m->cap - 1); m->keys[h]; h = (h + 1) & (uint64_t)(m->cap - 1))
    if (strcmp(m->keys[h], key) == 0) return &m->vals[h];
  return NULL;
}

bool fe_names_put(fe_names *m, const char *key, int val) {
  int *v = fe_names_find(m, key);
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

void fe_names_free(fe_names *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}
