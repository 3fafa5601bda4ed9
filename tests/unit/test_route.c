/*
 * test_route.c: the route table (daemon/routes.c) and its pure matcher
 * (daemon/route.h), table by table: each case a method and path, the row
 * it must find and what the row's pattern captures.  Every row of the table
 * is found by some case.
 */
#include <string.h>

#include "check-main.h"
#include "routes.h"

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))

static const struct {
        const char *method, *path;
        const char *pattern; /* the row found, or NULL for none */
        bool method_ok;
        const char *name, *version;
} cases[] = {
        {"GET", "/v2/health/live", "/v2/health/live", true, NULL, NULL},
        {"HEAD", "/v2/health/live", "/v2/health/live", true, NULL, NULL},
        {"POST", "/v2/health/live", "/v2/health/live", false, NULL, NULL},
        {"GET", "/v2/health/ready", "/v2/health/ready", true, NULL, NULL},
        {"GET", "/v2", "/v2", true, NULL, NULL},
        {"GET", "/v2/models/stats", "/v2/models/stats", true, NULL, NULL},
        {"GET", "/v2/models/m", "/v2/models/{model}", true, "m", NULL},
        {"GET", "/v2/models/m/versions/3", "/v2/models/{model}", true, "m", "3"},
        {"GET", "/v2/models/m/ready", "/v2/models/{model}/ready", true, "m", NULL},
        {"GET", "/v2/models/m/versions/12/ready", "/v2/models/{model}/ready", true, "m", "12"},
        {"GET", "/v2/models/m/config", "/v2/models/{model}/config", true, "m", NULL},
        {"POST", "/v2/models/m/infer", "/v2/models/{model}/infer", true, "m", NULL},
        {"GET", "/v2/models/m/infer", "/v2/models/{model}/infer", false, "m", NULL},
        {"POST", "/v2/models/m/versions/2/infer", "/v2/models/{model}/infer", true, "m", "2"},
        {"GET", "/v2/models/m/stats", "/v2/models/{model}/stats", true, "m", NULL},
        {"GET", "/v2/models/m/versions/1/stats", "/v2/models/{model}/stats", true, "m", "1"},
        /* A model called "versions", and one called "stats" under its own name. */
        {"GET", "/v2/models/versions/ready", "/v2/models/{model}/ready", true, "versions", NULL},
        {"GET", "/v2/models/stats/stats", "/v2/models/{model}/stats", true, "stats", NULL},
        {"POST", "/v2/repository/index", "/v2/repository/index", true, NULL, NULL},
        {"GET", "/v2/repository/index", "/v2/repository/index", false, NULL, NULL},
        {"POST", "/v2/repository/models/m/load", "/v2/repository/models/{name}/load", true, "m",
         NULL},
        {"POST", "/v2/repository/models/m/unload", "/v2/repository/models/{name}/unload", true, "m",
         NULL},
        /* The shared memory extension (system; CUDA's status and unregister). */
        {"GET", "/v2/systemsharedmemory/status", "/v2/systemsharedmemory/status", true, NULL, NULL},
        {"GET", "/v2/systemsharedmemory/region/r/status",
         "/v2/systemsharedmemory/region/{name}/status", true, "r", NULL},
        {"POST", "/v2/systemsharedmemory/region/r/register",
         "/v2/systemsharedmemory/region/{name}/register", true, "r", NULL},
        {"GET", "/v2/systemsharedmemory/region/r/register",
         "/v2/systemsharedmemory/region/{name}/register", false, "r", NULL},
        {"POST", "/v2/systemsharedmemory/unregister", "/v2/systemsharedmemory/unregister", true,
         NULL, NULL},
        {"POST", "/v2/systemsharedmemory/region/r/unregister",
         "/v2/systemsharedmemory/region/{name}/unregister", true, "r", NULL},
        {"GET", "/v2/cudasharedmemory/status", "/v2/cudasharedmemory/status", true, NULL, NULL},
        {"GET", "/v2/cudasharedmemory/region/r/status", "/v2/cudasharedmemory/region/{name}/status",
         true, "r", NULL},
        {"POST", "/v2/cudasharedmemory/unregister", "/v2/cudasharedmemory/unregister", true, NULL,
         NULL},
        {"POST", "/v2/cudasharedmemory/region/r/unregister",
         "/v2/cudasharedmemory/region/{name}/unregister", true, "r", NULL},
        {"POST", "/v2/cudasharedmemory/region/r/register", NULL, false, NULL, NULL},
        {"GET", "/v2/systemsharedmemory", NULL, false, NULL, NULL},
        {"POST", "/v1/models/m:predict", "/v1/models/{model}:predict", true, "m", NULL},
        {"POST", "/v1/models/m/versions/4:predict", "/v1/models/{model}:predict", true, "m", "4"},
        {"GET", "/v1/models/m:predict", "/v1/models/{model}:predict", false, "m", NULL},
        {"POST", "/v1/models/m:classify", "/v1/models/{model}:classify", true, "m", NULL},
        {"POST", "/v1/models/m:regress", "/v1/models/{model}:regress", true, "m", NULL},
        {"GET", "/v1/models/m/metadata", "/v1/models/{model}/metadata", true, "m", NULL},
        {"GET", "/v1/models/m/versions/7/metadata", "/v1/models/{model}/metadata", true, "m", "7"},
        {"GET", "/v1/models/m", "/v1/models/{model}", true, "m", NULL},
        {"GET", "/v1/models/m/versions/7", "/v1/models/{model}", true, "m", "7"},
        /* An unknown verb stays part of the name: no such model (404 at pin). */
        {"GET", "/v1/models/m:bogus", "/v1/models/{model}", true, "m:bogus", NULL},
        {"GET", "/metrics", "/metrics", true, NULL, NULL},
        {"DELETE", "/metrics", "/metrics", false, NULL, NULL},
        /* No route. */
        {"GET", "", NULL, false, NULL, NULL},
        {"GET", "/", NULL, false, NULL, NULL},
        {"GET", "v2", NULL, false, NULL, NULL},
        {"GET", "/v2/", NULL, false, NULL, NULL},
        {"GET", "//v2", NULL, false, NULL, NULL},
        {"GET", "/v2/health", NULL, false, NULL, NULL},
        {"GET", "/v2/health/live/x", NULL, false, NULL, NULL},
        {"GET", "/v2/models", NULL, false, NULL, NULL},
        {"GET", "/v2/models/m/versions", NULL, false, NULL, NULL},
        {"GET", "/v2/models/m/versions/3/x", NULL, false, NULL, NULL},
        {"POST", "/v2/models/m/versions//infer", NULL, false, NULL, NULL},
        {"POST", "/v2/repository/models/load", NULL, false, NULL, NULL},
        {"POST", "/v1/models/:predict", "/v1/models/{model}", false, ":predict", NULL},
        {"GET", "/v3/models/m", NULL, false, NULL, NULL},
        {"GET", "/a/b/c/d/e/f/g/h/i", NULL, false, NULL, NULL},
        {"GET", "/metrics/", NULL, false, NULL, NULL},
};

static void check_case(const struct rnnd_route *table, size_t n, size_t i)
{
        char buf[RNND_ROUTE_PATH_MAX + 1];
        struct rnnd_route_match m;

        rnnd_route_match(table, n, cases[i].path, cases[i].method, buf, &m);
        if (cases[i].pattern == NULL) {
                ck_assert_msg(m.route == NULL, "%s %s matched %s", cases[i].method, cases[i].path,
                              m.route != NULL ? m.route->pattern : "");
                return;
        }
        ck_assert_msg(m.route != NULL, "%s %s matched no row", cases[i].method, cases[i].path);
        ck_assert_str_eq(m.route->pattern, cases[i].pattern);
        ck_assert_int_eq(m.method_ok, cases[i].method_ok);
        if (cases[i].name == NULL)
                ck_assert_ptr_null(m.name);
        else
                ck_assert_str_eq(m.name, cases[i].name);
        if (cases[i].version == NULL)
                ck_assert_ptr_null(m.version);
        else
                ck_assert_str_eq(m.version, cases[i].version);
}

START_TEST(test_table)
{
        check_case(rnnd_routes_table, rnnd_routes_table_len, (size_t)_i);
}
END_TEST

/* Each row is found by a case above, so no row is dead or shadowed by one before it. */
START_TEST(test_every_row)
{
        for (size_t k = 0; k < rnnd_routes_table_len; k++) {
                bool found = false;

                for (size_t i = 0; i < ELEMENTSOF(cases) && !found; i++)
                        found = cases[i].pattern != NULL &&
                                strcmp(cases[i].pattern, rnnd_routes_table[k].pattern) == 0;
                ck_assert_msg(found, "no case finds row %s", rnnd_routes_table[k].pattern);
                ck_assert_ptr_nonnull(rnnd_routes_table[k].serve);
        }
}
END_TEST

/* Inference rows tell the pool of the body coming; only POST rows may. */
START_TEST(test_flags)
{
        for (size_t k = 0; k < rnnd_routes_table_len; k++) {
                const struct rnnd_route *rt = &rnnd_routes_table[k];

                if (rt->flags & RNND_ROUTE_INFER)
                        ck_assert(rt->flags & RNND_ROUTE_POST && rt->flags & RNND_ROUTE_MODEL);
                if (rt->flags & RNND_ROUTE_MODEL)
                        ck_assert_ptr_nonnull(strstr(rt->pattern, "{model}"));
                ck_assert_str_eq(rnnd_route_allow(rt),
                                 rt->flags & RNND_ROUTE_POST ? "POST" : "GET, HEAD");
        }
}
END_TEST

static void serve_none(struct rnnd_http_request *r, struct rnnd_route_req *q)
{
        (void)r;
        (void)q;
}

/* The pattern language on a table of its own: order, {name}, verbs. */
static const struct rnnd_route toy[] = {
        {"/a/{name}/b", 0, serve_none},
        {"/a/{name}", RNND_ROUTE_POST, serve_none},
        {"/x/{model}:go", 0, serve_none},
        {"/x/{model}", 0, serve_none},
};

START_TEST(test_pattern_language)
{
        char buf[RNND_ROUTE_PATH_MAX + 1], path[RNND_ROUTE_PATH_MAX + 2];
        struct rnnd_route_match m;

        rnnd_route_match(toy, ELEMENTSOF(toy), "/a/q/b", "GET", buf, &m);
        ck_assert_ptr_eq(m.route, &toy[0]);
        ck_assert_str_eq(m.name, "q");
        rnnd_route_match(toy, ELEMENTSOF(toy), "/a/q", "POST", buf, &m);
        ck_assert_ptr_eq(m.route, &toy[1]);
        ck_assert(m.method_ok);
        rnnd_route_match(toy, ELEMENTSOF(toy), "/a/versions/2", "GET", buf, &m);
        ck_assert_ptr_null(m.route); /* {name} is one segment */
        rnnd_route_match(toy, ELEMENTSOF(toy), "/x/m/versions/9:go", "GET", buf, &m);
        ck_assert_ptr_eq(m.route, &toy[2]);
        ck_assert_str_eq(m.name, "m");
        ck_assert_str_eq(m.version, "9");
        rnnd_route_match(toy, ELEMENTSOF(toy), "/x/m/versions/9", "GET", buf, &m);
        ck_assert_ptr_eq(m.route, &toy[3]);
        ck_assert_str_eq(m.version, "9");
        rnnd_route_match(toy, ELEMENTSOF(toy), "/x/:go", "GET", buf, &m);
        ck_assert_ptr_eq(m.route, &toy[3]); /* a verb needs a name before it */
        /* A path of RNND_ROUTE_PATH_MAX bytes is matched; one more is none. */
        memset(path, 'a', sizeof(path));
        memcpy(path, "/x/", 3);
        path[RNND_ROUTE_PATH_MAX] = '\0';
        rnnd_route_match(toy, ELEMENTSOF(toy), path, "GET", buf, &m);
        ck_assert_ptr_eq(m.route, &toy[3]);
        path[RNND_ROUTE_PATH_MAX] = 'a';
        path[RNND_ROUTE_PATH_MAX + 1] = '\0';
        rnnd_route_match(toy, ELEMENTSOF(toy), path, "GET", buf, &m);
        ck_assert_ptr_null(m.route);
}
END_TEST

static Suite *route_suite(void)
{
        Suite *s = suite_create("route");
        TCase *tc = tcase_create("table");

        tcase_add_loop_test(tc, test_table, 0, ELEMENTSOF(cases));
        tcase_add_test(tc, test_every_row);
        tcase_add_test(tc, test_flags);
        suite_add_tcase(s, tc);
        tc = tcase_create("patterns");
        tcase_add_test(tc, test_pattern_language);
        suite_add_tcase(s, tc);
        return s;
}

RNND_CHECK_MAIN(route_suite)
