/*
 * fuzz_safetensors.c: a whole safetensors file, through engine/stfile.c's
 * reader (header length, header parse, every tensor read as float32 or int64)
 * and the weight import of model.c against a small LSTM config whose tensor
 * names the seeds use.  The file lives in a memfd, a regular file that is
 * never on disk.
 */
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz-common.h"
#include "model.h"
#include "safetensors.h"
#include "stfile.h"

static const char lstm_cfg[] = "{\"cell\":\"lstm\",\"input_size\":2,\"hidden_size\":1,"
                               "\"head\":{\"units\":1},\"weights\":{\"prefix\":\"rnn.\"}}";
static struct rnnd_model_config cfg;
static int fd = -1;
static char path[64];

static void init(void)
{
        rnnd_error_t e = {0};

        rnnd_infer_global_init();
        if (rnnd_modelcfg_parse(lstm_cfg, strlen(lstm_cfg), "fuzz", &cfg, &e) != 0) {
                fprintf(stderr, "fuzz config: %s\n", e.msg);
                abort();
        }
        fd = memfd_create("fuzz.safetensors", MFD_CLOEXEC);
        if (fd < 0) {
                perror("memfd_create");
                abort();
        }
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
}
FUZZ_INITIALIZE(init)

/* Reads every tensor of f with the reader its dtype allows; a bounded buffer each. */
static void read_all(const rnnd_stfile_t *f)
{
        const struct rnnd_st_header *h = rnnd_stfile_header(f);
        rnnd_error_t e = {0};

        for (size_t i = 0; i < h->n_tensors; i++) {
                const struct rnnd_st_tensor *t = &h->tensors[i];
                size_t n = (size_t)t->numel;
                void *dst;

                if (t->numel > (1u << 20) || rnnd_stfile_find(f, t->name) != t)
                        continue;
                dst = malloc((n ? n : 1) * 8);
                if (dst == NULL)
                        abort();
                if (rnnd_stfile_read_f32(f, t->name, t->ndim, t->shape, dst, &e) != 0)
                        rnnd_stfile_read_i64(f, t->name, t->ndim, t->shape, dst, &e);
                free(dst);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct rnnd_st_header h;
        rnnd_stfile_t *f = NULL;
        rnnd_model_t *m = NULL;
        rnnd_error_t e = {0};

        /* The header parser alone, on the bytes after an 8-byte length. */
        if (size >= 8 &&
            rnnd_st_header_parse((const char *)data + 8, size - 8, data[0], &h, &e) == 0)
                rnnd_st_header_done(&h);

        if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
                abort();
        if (rnnd_stfile_open(path, &f, &e) != 0)
                return 0;
        read_all(f);
        if (rnnd_model_from_stfile(f, "fuzz", 1, &cfg, &m, &e) == 0)
                rnnd_model_unref(m);
        rnnd_stfile_close(f);
        return 0;
}
