/*
 * test_shm.c: the system shared memory extension's pieces below the routes:
 * the register request's body and checks (proto/shmreq.h) and the region
 * table (daemon/shm.h) on real POSIX shared memory objects: registering,
 * its limits and errors, status as HTTP and gRPC render it, reads and
 * writes at offsets, bounds, an object shrunk after it was registered (an
 * error, never SIGBUS), and copies racing unregisters.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check-main.h"
#include "shm.h"
#include "shmreq.h"

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))

/* A fresh object of size bytes, filled with i & 0xff at byte i; its key in key[64]. */
static void make_object(char *key, const char *tag, size_t size)
{
        unsigned char buf[4096];
        int fd;

        snprintf(key, 64, "/rnnd-test-%d-%s", (int)getpid(), tag);
        shm_unlink(key);
        fd = shm_open(key, O_RDWR | O_CREAT | O_EXCL, 0600);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
        for (size_t i = 0; i < size; i += sizeof(buf)) {
                size_t n = size - i < sizeof(buf) ? size - i : sizeof(buf);

                for (size_t k = 0; k < n; k++)
                        buf[k] = (unsigned char)((i + k) & 0xff);
                ck_assert_int_eq(pwrite(fd, buf, n, (off_t)i), (ssize_t)n);
        }
        close(fd);
}

static struct rnnd_shmreq req(const char *key, uint64_t offset, uint64_t size)
{
        struct rnnd_shmreq q = {{0}, offset, size};

        snprintf(q.key, sizeof(q.key), "%s", key);
        return q;
}

static const struct {
        const char *body;
        int code;
        const char *msg; /* a part of the message, or NULL for success */
} bodies[] = {
        {"{\"key\":\"/a\",\"offset\":0,\"byte_size\":16}", 0, NULL},
        {"{\"byte_size\":16,\"key\":\"/a\"}", 0, NULL},
        {"", RNND_EINVAL, "the body is not JSON"},
        {"[]", RNND_EINVAL, "the body must be an object, not an array"},
        {"{\"key\":\"/a\"}", RNND_EINVAL, "byte_size: missing"},
        {"{\"byte_size\":1}", RNND_EINVAL, "key: missing"},
        {"{\"key\":\"/a\",\"byte_size\":1,\"device_id\":0}", RNND_EINVAL,
         "unknown key 'device_id'"},
        {"{\"key\":7,\"byte_size\":1}", RNND_EINVAL, "key: must be a string"},
        {"{\"key\":\"/a\",\"byte_size\":-1}", RNND_EINVAL, "byte_size: must be an integer of at"},
        {"{\"key\":\"/a\",\"byte_size\":1.5}", RNND_EINVAL, "byte_size: must be an integer"},
        {"{\"key\":\"/a\",\"byte_size\":1,\"offset\":\"0\"}", RNND_EINVAL, "offset: must be"},
        {"{\"key\":\"/a\",\"key\":\"/b\",\"byte_size\":1}", RNND_EINVAL, "not JSON"},
        {"{\"key\":\"/a\\u0000b\",\"byte_size\":1}", RNND_EINVAL, "not JSON"},
};

START_TEST(test_parse)
{
        struct rnnd_shmreq q;
        rnnd_error_t err = {0};
        int r = rnnd_shmreq_parse(bodies[_i].body, strlen(bodies[_i].body), &q, &err);

        ck_assert_msg(r == bodies[_i].code, "%s: %d %s", bodies[_i].body, r, err.msg);
        if (bodies[_i].msg != NULL)
                ck_assert_msg(strstr(err.msg, bodies[_i].msg) != NULL, "%s: %s", bodies[_i].body,
                              err.msg);
        else
                ck_assert(strcmp(q.key, "/a") == 0 && q.byte_size == 16 && q.offset == 0);
}
END_TEST

START_TEST(test_parse_limit)
{
        static char big[RNND_SHMREQ_MAX_BODY + 2];
        struct rnnd_shmreq q;
        rnnd_error_t err = {0};

        memset(big, ' ', sizeof(big) - 1);
        ck_assert_int_eq(rnnd_shmreq_parse(big, sizeof(big) - 1, &q, &err), RNND_ETOOBIG);
        ck_assert_ptr_nonnull(strstr(err.msg, "at most 4096 bytes"));
}
END_TEST

static const struct {
        const char *name, *key;
        uint64_t offset, size;
        const char *msg;
} checks[] = {
        {"r", "/ok", 0, 1, NULL},
        {"", "/ok", 0, 1, "the region's name must be 1 to 127 bytes"},
        {"r", "ok", 0, 1, "key: 'ok' is not a shared memory object's name"},
        {"r", "/", 0, 1, "is not a shared memory object's name"},
        {"r", "/a/b", 0, 1, "is not a shared memory object's name"},
        {"r", "/..", 0, 1, "is not a shared memory object's name"},
        {"r", "/ok", 0, 0, "byte_size: must be at least 1"},
        {"r", "/ok", UINT64_MAX, 1, "offset + byte_size: past 2^64 bytes"},
};

START_TEST(test_check)
{
        struct rnnd_shmreq q = req(checks[_i].key, checks[_i].offset, checks[_i].size);
        rnnd_error_t err = {0};
        int r = rnnd_shmreq_check(checks[_i].name, RNND_SHM_NAME_MAX, &q, &err);

        if (checks[_i].msg == NULL) {
                ck_assert_int_eq(r, 0);
                return;
        }
        ck_assert_int_eq(r, RNND_EINVAL);
        ck_assert_msg(strstr(err.msg, checks[_i].msg) != NULL, "%s", err.msg);
}
END_TEST

START_TEST(test_off)
{
        struct rnnd_shm t;
        struct rnnd_shmreq q = req("/rnnd-none", 0, 1);
        struct rnnd_shm_ref ref = {"r", 0, 4};
        struct rnnd_strbuf b;
        rnnd_error_t err = {0};
        char buf[4];

        rnnd_shm_init(&t, 0);
        ck_assert_int_eq(rnnd_shm_register(&t, "r", &q, &err), RNND_EFORBIDDEN);
        ck_assert_ptr_nonnull(strstr(err.msg, "system shared memory is off: max_shm_regions is 0"));
        rnnd_strbuf_init(&b);
        ck_assert_int_eq(rnnd_shm_status(&t, "", false, &b, &err), RNND_EFORBIDDEN);
        rnnd_strbuf_done(&b);
        ck_assert_int_eq(rnnd_shm_unregister(&t, "", &err), RNND_EFORBIDDEN);
        ck_assert_int_eq(rnnd_shm_read(&t, &ref, buf, 4, "inputs[0]", &err), RNND_EINVAL);
        ck_assert_str_eq(err.msg, "inputs[0]: parameters.shared_memory_region: no region 'r' is "
                                  "registered (system shared memory is off: max_shm_regions is "
                                  "0)");
        rnnd_shm_done(&t);
}
END_TEST

static void expect_status(struct rnnd_shm *t, const char *name, bool map, const char *want)
{
        struct rnnd_strbuf b;
        rnnd_error_t err = {0};

        rnnd_strbuf_init(&b);
        ck_assert_int_eq(rnnd_shm_status(t, name, map, &b, &err), 0);
        rnnd_strbuf_putc(&b, '\0');
        ck_assert_str_eq(b.data, want);
        rnnd_strbuf_done(&b);
}

START_TEST(test_register)
{
        char key[64], key2[64], want[512];
        struct rnnd_shm t;
        struct rnnd_shmreq q;
        rnnd_error_t err = {0};

        make_object(key, "reg", 4096);
        make_object(key2, "small", 100);
        rnnd_shm_init(&t, 2);
        q = req(key, 1024, 2048);
        ck_assert_msg(rnnd_shm_register(&t, "a", &q, &err) == 0, "%s", err.msg);
        ck_assert_int_eq(rnnd_shm_register(&t, "a", &q, &err), RNND_EINVAL);
        ck_assert_str_eq(err.msg, "shared memory region 'a' is registered already (unregister it "
                                  "first)");
        /* An object too small for the region, and one that is not there. */
        q = req(key2, 64, 64);
        ck_assert_int_eq(rnnd_shm_register(&t, "b", &q, &err), RNND_EINVAL);
        ck_assert_msg(strstr(err.msg, "holds 100 bytes, not the 128 at offset 64 + byte_size 64"),
                      "%s", err.msg);
        q = req("/rnnd-test-not-there", 0, 1);
        ck_assert_int_eq(rnnd_shm_register(&t, "b", &q, &err), RNND_EINVAL);
        ck_assert_msg(strstr(err.msg, "cannot open shared memory object '/rnnd-test-not-there': "
                                      "No such file or directory"),
                      "%s", err.msg);
        q = req(key2, 0, 100);
        ck_assert_int_eq(rnnd_shm_register(&t, "b", &q, &err), 0);
        /* The table's limit. */
        ck_assert_int_eq(rnnd_shm_register(&t, "c", &q, &err), RNND_ELIMIT);
        ck_assert_str_eq(err.msg,
                         "max_shm_regions (2) regions are registered; unregister one first");

        snprintf(want, sizeof(want),
                 "[{\"name\":\"b\",\"key\":\"%s\",\"offset\":0,\"byte_size\":100},"
                 "{\"name\":\"a\",\"key\":\"%s\",\"offset\":1024,\"byte_size\":2048}]",
                 key2, key);
        expect_status(&t, "", false, want);
        snprintf(want, sizeof(want),
                 "{\"regions\":{\"a\":{\"name\":\"a\",\"key\":\"%s\",\"offset\":1024,"
                 "\"byte_size\":2048}}}",
                 key);
        expect_status(&t, "a", true, want);
        {
                struct rnnd_strbuf b;

                rnnd_strbuf_init(&b);
                ck_assert_int_eq(rnnd_shm_status(&t, "zz", false, &b, &err), RNND_ENOTFOUND);
                ck_assert_str_eq(err.msg, "no shared memory region 'zz' is registered");
                rnnd_strbuf_done(&b);
        }
        /* Unregistering one that is not there is no error; then one, then all. */
        ck_assert_int_eq(rnnd_shm_unregister(&t, "zz", &err), 0);
        ck_assert_int_eq(rnnd_shm_unregister(&t, "b", &err), 0);
        ck_assert_int_eq(rnnd_shm_register(&t, "c", &q, &err), 0);
        ck_assert_int_eq(rnnd_shm_unregister(&t, "", &err), 0);
        expect_status(&t, "", false, "[]");
        expect_status(&t, "", true, "{\"regions\":{}}");
        rnnd_shm_done(&t);
        shm_unlink(key);
        shm_unlink(key2);
}
END_TEST

START_TEST(test_copy)
{
        char key[64];
        unsigned char got[64], put[64];
        struct rnnd_shm t;
        struct rnnd_shmreq q;
        struct rnnd_shm_ref ref = {"r", 16, 64};
        rnnd_error_t err = {0};
        int fd, wfd;

        make_object(key, "copy", 1024);
        rnnd_shm_init(&t, 4);
        q = req(key, 256, 512); /* the region is bytes 256..767 of the object */
        ck_assert_int_eq(rnnd_shm_register(&t, "r", &q, &err), 0);
        ck_assert_msg(rnnd_shm_read(&t, &ref, got, 64, "inputs[0]", &err) == 0, "%s", err.msg);
        for (int k = 0; k < 64; k++)
                ck_assert_uint_eq(got[k], (256 + 16 + k) & 0xff);
        for (int k = 0; k < 64; k++)
                put[k] = (unsigned char)(200 - k);
        ck_assert_int_eq(rnnd_shm_check_write(&t, &ref, 32, "output 'h_n'", &err), 0);
        ck_assert_int_eq(rnnd_shm_write(&t, &ref, put, 32, "output 'h_n'", &err), 0);
        fd = shm_open(key, O_RDONLY, 0);
        ck_assert_int_eq(pread(fd, got, 64, 256 + 16), 64);
        ck_assert_int_eq(memcmp(got, put, 32), 0);
        ck_assert_uint_eq(got[32], (256 + 16 + 32) & 0xff); /* nothing past the output */

        /* An input's byte_size is its size; an output's at least its size. */
        ck_assert_int_eq(rnnd_shm_read(&t, &ref, got, 32, "inputs[1]", &err), RNND_EINVAL);
        ck_assert_str_eq(err.msg, "inputs[1]: parameters.shared_memory_byte_size is 64, but the "
                                  "tensor takes 32 bytes");
        ck_assert_int_eq(rnnd_shm_check_write(&t, &ref, 65, "output 'y'", &err), RNND_EINVAL);
        /* Past the region's end, and a region not registered. */
        ref.offset = 450;
        ck_assert_int_eq(rnnd_shm_read(&t, &ref, got, 64, "inputs[0]", &err), RNND_EINVAL);
        ck_assert_str_eq(err.msg, "inputs[0]: parameters.shared_memory_byte_size 64 at "
                                  "shared_memory_offset 450 does not fit region 'r' (512 bytes)");
        ref.offset = UINT64_MAX;
        ck_assert_int_eq(rnnd_shm_check_write(&t, &ref, 1, "output 'y'", &err), RNND_EINVAL);
        snprintf(ref.region, sizeof(ref.region), "other");
        ref.offset = 0;
        ck_assert_int_eq(rnnd_shm_read(&t, &ref, got, 64, "inputs[0]", &err), RNND_EINVAL);
        ck_assert_str_eq(err.msg, "inputs[0]: parameters.shared_memory_region: no region 'other' "
                                  "is registered");

        /* The client shrinks its object: a clear error, not SIGBUS, and no write grows it. */
        snprintf(ref.region, sizeof(ref.region), "r");
        ref.offset = 200;
        wfd = shm_open(key, O_RDWR, 0);
        ck_assert_int_eq(ftruncate(wfd, 300), 0);
        close(wfd);
        ck_assert_int_eq(rnnd_shm_read(&t, &ref, got, 64, "inputs[0]", &err), RNND_EINVAL);
        ck_assert_msg(strstr(err.msg, "is shorter than when it was registered"), "%s", err.msg);
        ck_assert_int_eq(rnnd_shm_write(&t, &ref, put, 64, "output 'y'", &err), RNND_EINVAL);
        ck_assert_msg(strstr(err.msg, "is shorter than when it was registered"), "%s", err.msg);
        {
                struct stat st;

                ck_assert_int_eq(fstat(fd, &st), 0);
                ck_assert_int_eq(st.st_size, 300);
        }
        close(fd);
        rnnd_shm_done(&t);
        shm_unlink(key);
}
END_TEST

/* Copies on several threads while the region is unregistered and registered again. */
struct racer {
        struct rnnd_shm *t;
        int ok, gone;
};

static void *race_reads(void *arg)
{
        struct racer *r = arg;
        struct rnnd_shm_ref ref = {"r", 0, 4096};
        static __thread unsigned char buf[4096];
        rnnd_error_t err = {0};

        for (int i = 0; i < 2000; i++) {
                if (rnnd_shm_read(r->t, &ref, buf, sizeof(buf), "inputs[0]", &err) == 0)
                        r->ok++;
                else if (strstr(err.msg, "no region 'r'") != NULL)
                        r->gone++;
                else
                        ck_abort_msg("%s", err.msg);
        }
        return NULL;
}

START_TEST(test_race)
{
        char key[64];
        struct rnnd_shm t;
        struct rnnd_shmreq q;
        struct racer rs[3];
        pthread_t th[3];
        rnnd_error_t err = {0};

        make_object(key, "race", 4096);
        rnnd_shm_init(&t, 1);
        q = req(key, 0, 4096);
        ck_assert_int_eq(rnnd_shm_register(&t, "r", &q, &err), 0);
        for (int i = 0; i < 3; i++) {
                rs[i] = (struct racer){&t, 0, 0};
                ck_assert_int_eq(pthread_create(&th[i], NULL, race_reads, &rs[i]), 0);
        }
        for (int i = 0; i < 500; i++) {
                ck_assert_int_eq(rnnd_shm_unregister(&t, "r", &err), 0);
                ck_assert_int_eq(rnnd_shm_register(&t, "r", &q, &err), 0);
        }
        for (int i = 0; i < 3; i++) {
                pthread_join(th[i], NULL);
                ck_assert_int_eq(rs[i].ok + rs[i].gone, 2000);
        }
        rnnd_shm_done(&t);
        shm_unlink(key);
}
END_TEST

static Suite *shm_suite(void)
{
        Suite *s = suite_create("shm");
        TCase *tc = tcase_create("request");

        tcase_add_loop_test(tc, test_parse, 0, ELEMENTSOF(bodies));
        tcase_add_test(tc, test_parse_limit);
        tcase_add_loop_test(tc, test_check, 0, ELEMENTSOF(checks));
        suite_add_tcase(s, tc);
        tc = tcase_create("table");
        tcase_add_test(tc, test_off);
        tcase_add_test(tc, test_register);
        tcase_add_test(tc, test_copy);
        tcase_add_test(tc, test_race);
        tcase_set_timeout(tc, 30);
        suite_add_tcase(s, tc);
        return s;
}

RNND_CHECK_MAIN(shm_suite)
