/*
 * check-main.h: the main() every Check suite file ends with, like systemd's
 * DEFINE_TEST_MAIN.  RNND_CHECK_MAIN(foo_suite) runs the suite and exits 0
 * when every test passed, 1 otherwise.  --only=CASE (meson test NAME
 * --test-args=--only=CASE) runs one test case; CK_FORK=no CK_RUN_CASE=CASE
 * runs one under a debugger.
 */
#ifndef RNND_TESTS_CHECK_MAIN_H
#define RNND_TESTS_CHECK_MAIN_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RNND_CHECK_MAIN(suite_fn)                                                                  \
        int main(int argc, char **argv)                                                            \
        {                                                                                          \
                SRunner *sr = srunner_create(suite_fn());                                          \
                const char *only = rnnd_check_only(argc, argv);                                    \
                int failed;                                                                        \
                                                                                                   \
                srunner_run(sr, NULL, only, CK_NORMAL);                                            \
                failed = srunner_ntests_failed(sr);                                                \
                if (only != NULL && srunner_ntests_run(sr) == 0) {                                 \
                        printf("no test case is called %s\n", only);                               \
                        failed = 1;                                                                \
                }                                                                                  \
                srunner_free(sr);                                                                  \
                return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;                                  \
        }

/*
 * The name filter every suite takes (docs/TESTING.md): --only=CASE runs the
 * test case (TCase) called CASE, as CK_RUN_CASE=CASE does; NULL for all.
 */
static inline const char *rnnd_check_only(int argc, char **argv)
{
        for (int i = 1; i < argc; i++)
                if (strncmp(argv[i], "--only=", 7) == 0)
                        return argv[i] + 7;
        return getenv("CK_RUN_CASE");
}

/* The source tree's tests/ folder, from the environment meson sets. */
static inline const char *rnnd_test_dir(void)
{
        const char *d = getenv("RNND_TEST_DIR");

        return d != NULL ? d : "tests";
}

#endif
