/*
 * gpu-main.h: the main() of every GPU suite (DESIGN.md §10): exits 77 (meson's
 * SKIP) when no GPU is visible, and otherwise runs the suite without fork,
 * since a CUDA context made before fork() cannot be used in the child.
 * --only=CASE runs one test case (check-main.h).
 */
#ifndef RNND_TESTS_GPU_MAIN_H
#define RNND_TESTS_GPU_MAIN_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "check-main.h"
#include "cudnn/cudnn.h"

#define RNND_GPU_SKIP 77

#define RNND_GPU_CHECK_MAIN(suite_fn)                                                              \
        int main(int argc, char **argv)                                                            \
        {                                                                                          \
                struct rnnd_cudnn_info info;                                                       \
                SRunner *sr;                                                                       \
                int failed;                                                                        \
                                                                                                   \
                rnnd_cudnn_info(&info);                                                            \
                if (info.device_count == 0) {                                                      \
                        printf("SKIP: no GPU: %s\n", info.why_no_gpu);                             \
                        return RNND_GPU_SKIP;                                                      \
                }                                                                                  \
                printf("GPU 0: %s\n", info.devices[0].name);                                       \
                sr = srunner_create(suite_fn());                                                   \
                srunner_set_fork_status(sr, CK_NOFORK);                                            \
                srunner_run(sr, NULL, rnnd_check_only(argc, argv), CK_NORMAL);                     \
                failed = srunner_ntests_failed(sr);                                                \
                srunner_free(sr);                                                                  \
                return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;                                  \
        }

#endif
