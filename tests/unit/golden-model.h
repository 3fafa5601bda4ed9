/*
 * golden-model.h: loads a model of the golden repository (tests/golden/models)
 * the way the daemon does, for suites that need a real model.
 */
#ifndef RNND_TESTS_GOLDEN_MODEL_H
#define RNND_TESTS_GOLDEN_MODEL_H

#include <check.h>
#include <stdio.h>

#include "check-main.h"
#include "repository.h"

/* Version 1 of golden case name, as a new reference; fails the test otherwise. */
static inline rnnd_model_t *rnnd_test_load_golden(const char *name)
{
        char dir[4096];
        struct rnnd_model_config cfg;
        rnnd_error_t err = {0};
        rnnd_model_t *m = NULL;

        snprintf(dir, sizeof(dir), "%s/golden/models/%s", rnnd_test_dir(), name);
        ck_assert_msg(rnnd_repository_read_config(dir, &cfg, &err) == 0, "%s", err.msg);
        ck_assert_msg(rnnd_model_load(dir, name, 1, &cfg, &m, &err) == 0, "%s", err.msg);
        return m;
}

#endif
