/*
 * fuzz_encoding.c: HTTP's Accept-Encoding and Content-Encoding values, as a
 * client sends them (proto/deflate.c, proto/inflate.c), and the answer's
 * compression: the first byte picks gzip or deflate, tensors or text; the
 * rest is a header value and a body that must come back from rnnd_deflate()
 * through rnnd_inflate() byte for byte.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "deflate.h"
#include "fuzz-common.h"

FUZZ_INITIALIZE(rnnd_infer_global_init)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        enum rnnd_encoding enc;
        rnnd_error_t e = {0};
        char *header, *z, *back;
        size_t zn, bn;

        if (size < 1)
                return 0;
        header = malloc(size);
        if (header == NULL)
                return 0;
        memcpy(header, data + 1, size - 1);
        header[size - 1] = '\0';
        enc = rnnd_accept_encoding(header);
        if (enc != RNND_ENCODING_IDENTITY && enc != RNND_ENCODING_GZIP &&
            enc != RNND_ENCODING_DEFLATE)
                abort();
        (void)rnnd_encoding_of(header, strlen(header));
        free(header);
        enc = data[0] & 1 ? RNND_ENCODING_GZIP : RNND_ENCODING_DEFLATE;
        if (rnnd_deflate(enc, data[0] & 2, data + 1, size - 1, &z, &zn) != 0)
                return 0;
        if (rnnd_inflate(enc, z, zn, size - 1, "limit", &back, &bn, &e) != 0 || bn != size - 1 ||
            memcmp(back, data + 1, bn) != 0)
                abort();
        rnnd_free(back);
        rnnd_free(z);
        return 0;
}
