/* use_harp.c — a program built against an installed harp (pkg-config or
 * find_package; tests/py/test_install.py): compiles a DSL model from
 * memory through libharp.so, runs it, checks y = x * x + 1.
 * Usage: use_harp; prints "harp VERSION ok" and exits 0, or 1. */
#include <harp.h>
#include <stdio.h>

int main(void) {
  static const char dsl[] = "graph main(x: f32[5]) -> (y: f32[5]) {\n    y = x * x + 1.0\n    return y\n}\n";
  harp_error err = {0};
  harp_compiled *c;
  if (harp_compile_buffer(&err, dsl, sizeof dsl - 1, "harp", "use_harp", NULL, &c)) {
    char buf[2048];
    harp_error_format(&err, buf, sizeof buf);
    fprintf(stderr, "%s\n", buf);
    return 1;
  }
  harp_model *m;
  if (harp_model_new(&err, c, NULL, 0, NULL, &m)) return 1;
  float x[5] = {0, 1, 2, -3, 0.5f}, y[5];
  const void *in[] = {x};
  void *out[] = {y};
  if (harp_model_run_typed(&err, m, in, NULL, out)) return 1;
  for (int i = 0; i < 5; i++)
    if (y[i] != x[i] * x[i] + 1.0f) {
      fprintf(stderr, "y[%d] = %g, want %g\n", i, y[i], x[i] * x[i] + 1.0f);
      return 1;
    }
  harp_model_free(m);
  harp_compiled_free(c);
  printf("harp %s ok\n", harp_version());
  return 0;
}
