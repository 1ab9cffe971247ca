/* test_fe_errors.c — the DSL loader's errors.
 *  - every file of tests/dsl_bad/ fails with the error, line and column its
 *    row of tests/dsl_bad/expected.txt gives, and reports as many errors;
 *  - the message is located (file:line:col, source line, caret);
 *  - every prefix of every example loads or fails cleanly (no crash, no
 *    leak: the ASan build runs this too);
 *  - an allocation failure anywhere in load + lower is an error, not a crash;
 *  - ut_read_file returns a file's exact bytes up to its limit and refuses
 *    one byte more (HARP_E_LIMIT); ut_map_file the same, mapped, and
 *    ut_read_file's results for what it does not map. */
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include "fe_testutil.h"
#include "util/util.h"

#ifndef HARP_SOURCE_DIR
#define HARP_SOURCE_DIR "."
#endif

typedef struct row {
  char file[128], name[64];
  int line, col, count;
} row;

static int read_table(row *rows, int cap) {
  char path[1024], buf[512];
  snprintf(path, sizeof path, "%s/tests/dsl_bad/expected.txt", HARP_SOURCE_DIR);
  FILE *f = fopen(path, "r");
  if (!f) fail_msg("cannot open %s", path);
  int n = 0;
  while (fgets(buf, sizeof buf, f)) {
    if (buf[0] == '#' || buf[0] == '\n') continue;
    if (n == cap) fail_msg("table too long");
    row *r = &rows[n];
    if (sscanf(buf, "%127s %63s %d %d %d", r->file, r->name, &r->line, &r->col, &r->count) != 5)
      fail_msg("bad table line: %s", buf);
    n++;
  }
  fclose(f);
  return n;
}

static void test_corpus(void **st) {
  (void)st;
  row rows[128];
  int n = read_table(rows, 128);
  assert_true(n >= 20);
  for (int i = 0; i < n; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%.700s/tests/dsl_bad/%.200s", HARP_SOURCE_DIR, rows[i].file);
    char *text = NULL;
    size_t len = 0;
    harp_error e = {0};
    assert_ok(&e, ut_read_file(&e, path, 1 << 20, &text, &len));
    hg_diags d;
    hg_program *p = (hg_program *)1;
    harp_status s = hg_harp_load_text_diags(&e, text, len, rows[i].file, &p, &d);
    free(text);
    if (s == HARP_OK) fail_msg("%s loaded without error", rows[i].file);
    assert_null(p);
    if (strcmp(harp_status_name(s), rows[i].name) != 0 || e.line != rows[i].line || e.col != rows[i].col) {
      char buf[4096];
      harp_error_format(&e, buf, sizeof buf);
      fail_msg("%s: want %s at %d:%d, got %s", rows[i].file, rows[i].name, rows[i].line, rows[i].col, buf);
    }
    if (d.n < rows[i].count) fail_msg("%s: %d errors reported, want at least %d", rows[i].file, d.n, rows[i].count);
    /* located: the file name, and a caret under the column */
    assert_string_equal(e.file, rows[i].file);
    if (e.line > 0 && strcmp(rows[i].file, "empty.harp") != 0) {
      const char *nl = strchr(e.snippet, '\n');
      assert_non_null(nl);
      const char *caret = strchr(nl + 1, '^');
      assert_non_null(caret);
      assert_int_equal((int)(caret - (nl + 1)), e.col - 1);
    }
    /* the later errors are in the snippet, each located */
    for (int k = 1; k < d.n && k < 3; k++) {
      char loc[200];
      snprintf(loc, sizeof loc, "%.150s:%d:%d", rows[i].file, d.d[k].line, d.d[k].col);
      if (!strstr(e.snippet, loc)) fail_msg("%s: error %d (%s) missing from the report:\n%s", rows[i].file, k, loc, e.snippet);
    }
  }
}

/* Every .harp file of the corpus has a row (a new file needs one). */
static void test_corpus_complete(void **st) {
  (void)st;
  row rows[128];
  int n = read_table(rows, 128), files = 0;
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/tests/dsl_bad", HARP_SOURCE_DIR);
  DIR *d = opendir(dir);
  assert_non_null(d);
  struct dirent *ent;
  while ((ent = readdir(d))) {
    size_t l = strlen(ent->d_name);
    if (l < 5 || strcmp(ent->d_name + l - 5, ".harp") != 0) continue;
    files++;
    bool found = false;
    for (int i = 0; i < n && !found; i++) found = strcmp(rows[i].file, ent->d_name) == 0;
    if (!found) fail_msg("%s has no row in expected.txt", ent->d_name);
  }
  closedir(d);
  assert_int_equal(files, n);
}

static char *read_example(const char *name, size_t *len) {
  char path[1024];
  snprintf(path, sizeof path, "%s/examples/%s", HARP_SOURCE_DIR, name);
  char *text = NULL;
  harp_error e = {0};
  assert_ok(&e, ut_read_file(&e, path, 1 << 20, &text, len));
  return text;
}

static const char *const examples[] = {"mlp.harp", "conv_block.harp", "transformer_block.harp", "cnn.harp"};

/* Each prefix (a truncated file) loads or fails with a located error. */
static void test_prefixes(void **st) {
  (void)st;
  for (int x = 0; x < 4; x++) {
    size_t len;
    char *text = read_example(examples[x], &len);
    int ok = 0, failed = 0;
    for (size_t k = 0; k <= len; k += (len > 600 ? 3 : 1)) {
      harp_error e = {0};
      hg_program *p = NULL;
      if (hg_harp_load_text(&e, text, k, examples[x], &p) == HARP_OK) {
        ok++;
        hg_program_free(p);
      } else {
        failed++;
        assert_true(e.code != HARP_E_INTERNAL);
        assert_true(e.line > 0);
      }
    }
    assert_true(failed > 0);
    assert_true(ok >= 1);
    free(text);
  }
}

/* Every single-byte corruption of an example fails cleanly or loads. */
static void test_byte_flips(void **st) {
  (void)st;
  size_t len;
  char *text = read_example("transformer_block.harp", &len);
  const char subst[] = "(){}[],=@<>*/-+:;x0.\"\\\x01\xff";
  for (size_t k = 0; k < len; k += 7) {
    char save = text[k];
    for (size_t c = 0; c < sizeof subst - 1; c++) {
      text[k] = subst[c];
      harp_error e = {0};
      hg_program *p = NULL;
      if (hg_harp_load_text(&e, text, len, "flip.harp", &p) == HARP_OK) {
        tiny_graph *g = NULL;
        if (hg_lower(&e, p, &g, NULL) == HARP_OK) tiny_graph_free(g);
        else assert_true(e.code != HARP_E_INTERNAL);
        hg_program_free(p);
      } else {
        assert_true(e.code != HARP_E_INTERNAL);
      }
    }
    text[k] = save;
  }
  free(text);
}

/* Fail the n-th allocation for every n until load + lower succeeds. */
static void test_alloc_failures(void **st) {
  (void)st;
  size_t len;
  char *text = read_example("transformer_block.harp", &len);
  bool done = false;
  for (long n = 1; !done && n < 200000; n += (n < 2000 ? 1 : 97)) {
    harp_error e = {0};
    hg_program *p = NULL;
    tiny_graph *g = NULL;
    ut_fault_fail_nth_alloc(n);
    harp_status s = hg_harp_load_text(&e, text, len, "oom.harp", &p);
    if (!s) s = hg_lower(&e, p, &g, NULL);
    ut_fault_fail_nth_alloc(0);
    if (s == HARP_OK) done = true;
    else assert_true(e.code != HARP_E_INTERNAL || strstr(e.msg, "memory"));
    tiny_graph_free(g);
    hg_program_free(p);
  }
  assert_true(done);
  free(text);
}

/* Statements after a failure are still checked; the failing name is poisoned
 * so its later uses stay quiet. */
static void test_recovery(void **st) {
  (void)st;
  const char *src = "graph main(x: f32[4]) -> (y: f32[4]) {\n"
                    "  a = relu(nope)\n"          /* DanglingRef */
                    "  b = a + a\n"               /* quiet: a is poisoned */
                    "  c = x @ x\n"               /* AxisSizeMismatch: rank 1 */
                    "  d = sum(x, axes=[3])\n"    /* InvalidArgument */
                    "  return x\n}\n";
  harp_error e = {0};
  hg_program *p = NULL;
  hg_diags d;
  assert_int_equal(hg_harp_load_text_diags(&e, src, strlen(src), "r.harp", &p, &d), HARP_E_DANGLING);
  assert_int_equal(d.n, 3);
  assert_int_equal(d.d[1].code, HARP_E_AXIS_SIZE_MISMATCH);
  assert_int_equal(d.d[1].line, 4);
  assert_int_equal(d.d[2].code, HARP_E_INVALID_ARG);
  assert_int_equal(d.d[2].line, 5);
}

/* Many errors: the report stays bounded and says how many were left out. */
static void test_many_errors(void **st) {
  (void)st;
  ut_str s;
  ut_str_init(&s);
  ut_str_puts(&s, "graph main(x: f32[4]) -> (y: f32[4]) {\n");
  for (int i = 0; i < 60; i++) ut_str_printf(&s, "  a%d = undefined%d\n", i, i);
  ut_str_puts(&s, "  return x\n}\n");
  harp_error e = {0};
  hg_program *p = NULL;
  hg_diags d;
  assert_int_equal(hg_harp_load_text_diags(&e, s.buf, s.len, "many.harp", &p, &d), HARP_E_DANGLING);
  assert_int_equal(d.n, HG_MAX_DIAGS);
  assert_int_equal(d.dropped, 60 - HG_MAX_DIAGS);
  assert_non_null(strstr(e.snippet, "more errors"));
  assert_true(strlen(e.snippet) < sizeof e.snippet);
  ut_str_free(&s);
}

/* Deep nesting and long chains: bounded errors or iterative passes, never a
 * stack overflow. */
static void test_deep(void **st) {
  (void)st;
  ut_str s;
  ut_str_init(&s);
  ut_str_puts(&s, "graph main(x: f32[4]) -> (y: f32[4]) {\n  y = ");
  for (int i = 0; i < 5000; i++) ut_str_puts(&s, "(");
  ut_str_puts(&s, "x");
  for (int i = 0; i < 5000; i++) ut_str_puts(&s, ")");
  ut_str_puts(&s, "\n  return y\n}\n");
  harp_error e = {0};
  hg_program *p = NULL;
  assert_int_equal(hg_harp_load_text(&e, s.buf, s.len, "deep.harp", &p), HARP_E_PARSE);
  assert_non_null(strstr(e.msg, "nested too deeply"));
  ut_str_free(&s);
  ut_str_init(&s);
  ut_str_puts(&s, "graph main(x: f32[4]) -> (y: f32[4]) {\n  y = x");
  for (int i = 0; i < 3000; i++) ut_str_puts(&s, " + x");
  ut_str_puts(&s, "\n  return y\n}\n");
  harp_error_clear(&e);
  assert_int_equal(hg_harp_load_text(&e, s.buf, s.len, "long.harp", &p), HARP_E_PARSE);
  assert_non_null(strstr(e.msg, "too deep"));
  ut_str_free(&s);
  /* a 20000-op chain built through the API: decompile, load, compare, lower */
  hg_graph *g = hg_graph_new();
  hg_val v = hg_input(g, "x", TINY_FP32, 1, (tiny_dim[]){tiny_dim_int(4)});
  for (int i = 0; i < 20000; i++) v = i % 2 ? hg_relu(g, v) : hg_add(g, v, hg_const(g, 1.0));
  hg_output(g, "y", v);
  assert_int_equal(hg_graph_error(g)->code, HARP_OK);
  char *text = hg_decompile(hg_graph_program(g));
  assert_non_null(text);
  harp_error_clear(&e);
  assert_ok(&e, hg_harp_load_text(&e, text, strlen(text), "chain.harp", &p));
  assert_true(hg_program_equal(hg_graph_program(g), p, NULL, 0));
  tiny_graph *t = NULL;
  assert_ok(&e, hg_lower(&e, p, &t, NULL));
  assert_int_equal(t->n, 20001);
  tiny_graph_free(t);
  hg_program_free(p);
  free(text);
  hg_graph_free(g);
}

/* ut_read_file on a 70,001-byte file (more than one 64 KiB block) at
 * limits around its size: the bytes exactly, NUL-terminated, or LIMIT. */
static void test_read_file_limits(void **st) {
  (void)st;
  char path[] = "/tmp/harp_read_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  enum { N = 70001 };
  static unsigned char want[N];
  for (int i = 0; i < N; i++) want[i] = (unsigned char)(i * 131 + (i >> 9));
  assert_int_equal(write(fd, want, N), N);
  close(fd);
  static const size_t limits[] = {N, N + 1, (size_t)1 << 30, SIZE_MAX};
  for (int k = 0; k < 4; k++) {
    char *text = NULL;
    size_t len = 0;
    harp_error e = {0};
    assert_ok(&e, ut_read_file(&e, path, limits[k], &text, &len));
    assert_int_equal(len, N);
    assert_memory_equal(text, want, N);
    assert_int_equal(text[N], 0);
    free(text);
  }
  static const size_t over[] = {N - 1, 65536, 1, 0};
  for (int k = 0; k < 4; k++) {
    char *text = (char *)1;
    harp_error e = {0};
    assert_int_equal(ut_read_file(&e, path, over[k], &text, NULL), HARP_E_LIMIT);
    assert_null(text);
  }
  /* ut_map_file: the same bytes mapped (Linux) within the limit, the same
   * refusal past it; an empty file, a directory and a missing file go
   * through ut_read_file (its results, its errors) */
  for (int k = 0; k < 4; k++) {
    const char *text = NULL;
    size_t len = 0;
    bool mapped = false;
    harp_error e = {0};
    assert_ok(&e, ut_map_file(&e, path, limits[k], &text, &len, &mapped));
    assert_int_equal(len, N);
    assert_memory_equal(text, want, N);
#ifdef __linux__
    assert_true(mapped);
#endif
    ut_unmap_file(text, len, mapped);
    e = (harp_error){0};
    text = (const char *)1;
    assert_int_equal(ut_map_file(&e, path, over[k], &text, &len, &mapped), HARP_E_LIMIT);
    assert_null(text);
    assert_false(mapped);
  }
  fd = open(path, O_WRONLY | O_TRUNC);
  assert_true(fd >= 0);
  close(fd);
  const char *const others[] = {path, "/tmp", "/tmp/harp_no_such_file_at_all"};
  static const harp_status want_st[] = {HARP_OK, HARP_E_IO, HARP_E_IO};
  for (int k = 0; k < 3; k++) {
    const char *text = (const char *)1;
    size_t len = 1;
    bool mapped = true;
    harp_error e = {0};
    assert_int_equal(ut_map_file(&e, others[k], 100, &text, &len, &mapped), want_st[k]);
    assert_false(mapped);
    if (want_st[k] == HARP_OK) assert_int_equal(len, 0), assert_non_null(text);
    else assert_null(text), assert_non_null(strstr(e.msg, k == 1 ? "directory" : "cannot open"));
    ut_unmap_file(text, len, mapped);
  }
  unlink(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_corpus),    cmocka_unit_test(test_corpus_complete), cmocka_unit_test(test_prefixes),
      cmocka_unit_test(test_byte_flips), cmocka_unit_test(test_alloc_failures), cmocka_unit_test(test_recovery),
      cmocka_unit_test(test_many_errors),       cmocka_unit_test(test_deep), cmocka_unit_test(test_read_file_limits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
