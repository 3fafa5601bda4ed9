/*
 * check-main.h: the main() every Check suite file ends with, like systemd's
 * DEFINE_TEST_MAIN.  RNND_CHECK_MAIN(foo_suite) runs the suite and exits 0
 * when every test passed, 1 otherwise.  CK_FORK=no CK_RUN_CASE=name runs one
 * case under a debugger.
 */
#ifndef RNND_TESTS_CHECK_MAIN_H
#define RNND_TESTS_CHECK_MAIN_H

#include <check.h>
#include <stdlib.h>

#define RNND_CHECK_MAIN(suite_fn)                                                                  \
        int main(void)                                                                             \
        {                                                                                          \
                SRunner *sr = srunner_create(suite_fn());                                          \
                int failed;                                                                        \
                                                                                                   \
                srunner_run_all(sr, CK_NORMAL);                                                    \
                failed = srunner_ntests_failed(sr);                                                \
                srunner_free(sr);                                                                  \
                return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;                                  \
        }

/* The source tree's tests/ folder, from the environment meson sets. */
static inline const char *rnnd_test_dir(void)
{
        const char *d = getenv("RNND_TEST_DIR");

        return d != NULL ? d : "tests";
}

#endif
