/*
 * blas.c: the stand-in's cuBLAS (tests/cudasim/README.md): handles bound to
 * the device current at cublasCreate, cublasSetStream, cublasSetMathMode and
 * cublasGemmEx for fp32 and fp16 data with fp32 compute, column-major, with
 * the argument checks cuBLAS documents.  The GEMM runs on the handle's
 * stream, late, like everything queued; reduced-precision compute types
 * round their inputs as the tensor cores would (TF32 or fp16).  cuBLAS has
 * its own CUDA runtime: its errors never reach the application's
 * cudaGetLastError().
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_api.h>

#include "sim.h"

#define MAGIC_BLAS 0x424c4153u

struct cublasContext {
        unsigned magic;
        int dev;
        cudaStream_t stream;
        cublasMath_t math;
};

float sim_h2f(uint16_t h)
{
        uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, bits;
        float f;

        if (e == 0x1f)
                bits = sign | 0x7f800000u | (m << 13);
        else if (e != 0)
                bits = sign | ((e + 112) << 23) | (m << 13);
        else if (m == 0)
                bits = sign;
        else {
                f = ldexpf((float)m, -24);
                return sign ? -f : f;
        }
        memcpy(&f, &bits, 4);
        return f;
}

uint16_t sim_f2h(float f)
{
        uint32_t x, sign, e, m;

        memcpy(&x, &f, 4);
        sign = (x >> 16) & 0x8000;
        e = (x >> 23) & 0xff;
        m = x & 0x7fffff;
        if (e == 0xff)
                return (uint16_t)(sign | 0x7c00 | (m ? 0x200 : 0));
        if (e > 142) /* >= 65520 rounds to infinity */
                return (uint16_t)(sign | 0x7c00);
        if (e < 113) {                            /* subnormal half or zero */
                float a = fabsf(f) * 16777216.0f; /* units of 2^-24 */
                uint32_t q = (uint32_t)nearbyintf(a);

                return (uint16_t)(sign | q);
        }
        {
                uint32_t h = ((e - 112) << 10) | (m >> 13), rest = m & 0x1fff;

                if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
                        h++;
                return (uint16_t)(sign | h);
        }
}

float sim_tf32(float f)
{
        uint32_t x;

        memcpy(&x, &f, 4);
        if ((x & 0x7f800000u) != 0x7f800000u) {
                uint32_t rest = x & 0x1fff;

                x &= ~0x1fffu;
                if (rest > 0x1000 || (rest == 0x1000 && (x & 0x2000)))
                        x += 0x2000;
        }
        memcpy(&f, &x, 4);
        return f;
}

const char *cublasGetStatusString(cublasStatus_t s)
{
        switch (s) {
        case CUBLAS_STATUS_SUCCESS:
                return "the operation completed successfully";
        case CUBLAS_STATUS_NOT_INITIALIZED:
                return "the library was not initialized";
        case CUBLAS_STATUS_ALLOC_FAILED:
                return "the resource allocation failed";
        case CUBLAS_STATUS_INVALID_VALUE:
                return "an invalid numeric value was used as an argument";
        case CUBLAS_STATUS_ARCH_MISMATCH:
                return "an absent device architectural feature is required";
        case CUBLAS_STATUS_MAPPING_ERROR:
                return "an access to GPU memory space failed";
        case CUBLAS_STATUS_EXECUTION_FAILED:
                return "the GPU program failed to execute";
        case CUBLAS_STATUS_INTERNAL_ERROR:
                return "an internal operation failed";
        case CUBLAS_STATUS_NOT_SUPPORTED:
                return "the functionality requested is not supported";
        case CUBLAS_STATUS_LICENSE_ERROR:
                return "there is an error with the license";
        }
        return "unknown error";
}

const char *cublasGetStatusName(cublasStatus_t s)
{
        switch (s) {
        case CUBLAS_STATUS_SUCCESS:
                return "CUBLAS_STATUS_SUCCESS";
        case CUBLAS_STATUS_NOT_INITIALIZED:
                return "CUBLAS_STATUS_NOT_INITIALIZED";
        case CUBLAS_STATUS_ALLOC_FAILED:
                return "CUBLAS_STATUS_ALLOC_FAILED";
        case CUBLAS_STATUS_INVALID_VALUE:
                return "CUBLAS_STATUS_INVALID_VALUE";
        case CUBLAS_STATUS_ARCH_MISMATCH:
                return "CUBLAS_STATUS_ARCH_MISMATCH";
        case CUBLAS_STATUS_MAPPING_ERROR:
                return "CUBLAS_STATUS_MAPPING_ERROR";
        case CUBLAS_STATUS_EXECUTION_FAILED:
                return "CUBLAS_STATUS_EXECUTION_FAILED";
        case CUBLAS_STATUS_INTERNAL_ERROR:
                return "CUBLAS_STATUS_INTERNAL_ERROR";
        case CUBLAS_STATUS_NOT_SUPPORTED:
                return "CUBLAS_STATUS_NOT_SUPPORTED";
        case CUBLAS_STATUS_LICENSE_ERROR:
                return "CUBLAS_STATUS_LICENSE_ERROR";
        }
        return "CUBLAS_STATUS_UNKNOWN";
}

cublasStatus_t cublasCreate_v2(cublasHandle_t *h)
{
        struct cublasContext *c;

        if (h == NULL)
                return CUBLAS_STATUS_INVALID_VALUE;
        if (sim_device_count() == 0 || sim_sticky() != cudaSuccess)
                return CUBLAS_STATUS_NOT_INITIALIZED;
        c = calloc(1, sizeof(*c));
        if (c == NULL)
                return CUBLAS_STATUS_ALLOC_FAILED;
        c->magic = MAGIC_BLAS;
        c->dev = sim_current_device();
        *h = c;
        return CUBLAS_STATUS_SUCCESS;
}

static bool valid(cublasHandle_t h)
{
        return h != NULL && h->magic == MAGIC_BLAS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t h)
{
        if (!valid(h))
                return CUBLAS_STATUS_NOT_INITIALIZED;
        /* Destroying synchronises the device like cudaFree does. */
        sim_stream_sync(sim_stream_of(h->stream, h->dev));
        h->magic = 0;
        free(h);
        return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s)
{
        struct sim_stream *st;

        if (!valid(h))
                return CUBLAS_STATUS_NOT_INITIALIZED;
        st = sim_stream_of(s, h->dev);
        if (st == NULL || st->dev != h->dev)
                return CUBLAS_STATUS_INVALID_VALUE;
        h->stream = s;
        return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t h, cudaStream_t *s)
{
        if (!valid(h))
                return CUBLAS_STATUS_NOT_INITIALIZED;
        if (s == NULL)
                return CUBLAS_STATUS_INVALID_VALUE;
        *s = h->stream;
        return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode)
{
        unsigned base =
                (unsigned)mode & ~(unsigned)CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;

        if (!valid(h))
                return CUBLAS_STATUS_NOT_INITIALIZED;
        if (base != CUBLAS_DEFAULT_MATH && base != CUBLAS_TENSOR_OP_MATH &&
            base != CUBLAS_PEDANTIC_MATH && base != CUBLAS_TF32_TENSOR_OP_MATH)
                return CUBLAS_STATUS_INVALID_VALUE;
        h->math = mode;
        return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t h, cublasMath_t *mode)
{
        if (!valid(h))
                return CUBLAS_STATUS_NOT_INITIALIZED;
        if (mode == NULL)
                return CUBLAS_STATUS_INVALID_VALUE;
        *mode = h->math;
        return CUBLAS_STATUS_SUCCESS;
}

enum round { R_NONE, R_TF32, R_F16 };

struct gemm {
        bool ta, tb;
        int m, n, k;
        float alpha, beta;
        const void *A, *B;
        void *C;
        bool a16, b16, c16;
        int lda, ldb, ldc;
        enum round round;
};

static float elem(const void *p, bool half, size_t i, enum round r)
{
        float v = half ? sim_h2f(((const uint16_t *)p)[i]) : ((const float *)p)[i];

        if (r == R_TF32)
                return sim_tf32(v);
        if (r == R_F16)
                return sim_h2f(sim_f2h(v));
        return v;
}

static cudaError_t gemm_run(struct sim_op *op)
{
        const struct gemm *g = op->arg;
        float *col = malloc(sizeof(float) * (size_t)(g->m > 0 ? g->m : 1));
        float *bcol = malloc(sizeof(float) * (size_t)(g->k > 0 ? g->k : 1));

        if (col == NULL || bcol == NULL) {
                free(col);
                free(bcol);
                return cudaErrorMemoryAllocation;
        }
        for (int j = 0; j < g->n; j++) {
                for (int i = 0; i < g->m; i++)
                        col[i] = 0.0f;
                for (int l = 0; l < g->k; l++)
                        bcol[l] = elem(g->B, g->b16,
                                       g->tb ? (size_t)l * g->ldb + j : (size_t)j * g->ldb + l,
                                       g->round);
                for (int l = 0; l < g->k; l++) {
                        float b = bcol[l];

                        if (!g->ta) {
                                for (int i = 0; i < g->m; i++)
                                        col[i] += elem(g->A, g->a16, (size_t)l * g->lda + i,
                                                       g->round) *
                                                  b;
                        } else {
                                for (int i = 0; i < g->m; i++)
                                        col[i] += elem(g->A, g->a16, (size_t)i * g->lda + l,
                                                       g->round) *
                                                  b;
                        }
                }
                for (int i = 0; i < g->m; i++) {
                        size_t at = (size_t)j * g->ldc + i;
                        /* beta == 0: C is not read (it may hold NaN), as BLAS defines. */
                        float v =
                                g->alpha * col[i] +
                                (g->beta != 0.0f ? g->beta * elem(g->C, g->c16, at, R_NONE) : 0.0f);

                        if (g->c16)
                                ((uint16_t *)g->C)[at] = sim_f2h(v);
                        else
                                ((float *)g->C)[at] = v;
                }
        }
        free(col);
        free(bcol);
        return cudaSuccess;
}

static void gemm_free(struct sim_op *op)
{
        free(op->arg);
}

/* Bytes a column-major rows x cols matrix with leading dimension ld spans. */
static size_t span(int rows, int cols, int ld, size_t esz)
{
        if (rows == 0 || cols == 0)
                return 0;
        return ((size_t)ld * (size_t)(cols - 1) + (size_t)rows) * esz;
}

/* The shapes, leading dimensions and algorithm, as cuBLAS checks them. */
static bool gemm_args_valid(cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                            int lda, int ldb, int ldc, const void *alpha, const void *beta,
                            cublasGemmAlgo_t algo)
{
        if ((transa != CUBLAS_OP_N && transa != CUBLAS_OP_T && transa != CUBLAS_OP_C) ||
            (transb != CUBLAS_OP_N && transb != CUBLAS_OP_T && transb != CUBLAS_OP_C) || m < 0 ||
            n < 0 || k < 0 || lda < (transa == CUBLAS_OP_N ? (m > 1 ? m : 1) : (k > 1 ? k : 1)) ||
            ldb < (transb == CUBLAS_OP_N ? (k > 1 ? k : 1) : (n > 1 ? n : 1)) ||
            ldc < (m > 1 ? m : 1) || alpha == NULL || beta == NULL)
                return false;
        return (algo >= CUBLAS_GEMM_DEFAULT && algo <= CUBLAS_GEMM_ALGO23) ||
               (algo >= CUBLAS_GEMM_DEFAULT_TENSOR_OP && algo <= CUBLAS_GEMM_ALGO15_TENSOR_OP);
}

/* The type combinations of cublasGemmEx's table that have fp32 compute. */
static cublasStatus_t gemm_types(cublasComputeType_t ctype, cudaDataType Atype, cudaDataType Btype,
                                 cudaDataType Ctype)
{
        bool f32_only, ok;

        switch (ctype) {
        case CUBLAS_COMPUTE_32F:
        case CUBLAS_COMPUTE_32F_PEDANTIC:
                f32_only = false;
                break;
        case CUBLAS_COMPUTE_32F_FAST_16F:
        case CUBLAS_COMPUTE_32F_FAST_16BF:
        case CUBLAS_COMPUTE_32F_FAST_TF32:
                f32_only = true;
                break;
        case CUBLAS_COMPUTE_16F:
        case CUBLAS_COMPUTE_16F_PEDANTIC:
        case CUBLAS_COMPUTE_64F:
        case CUBLAS_COMPUTE_64F_PEDANTIC:
        case CUBLAS_COMPUTE_32I:
        case CUBLAS_COMPUTE_32I_PEDANTIC:
        case CUBLAS_COMPUTE_32F_EMULATED_16BFX9:
        case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT:
                return CUBLAS_STATUS_NOT_SUPPORTED; /* valid, but not in this stand-in */
        default:
                return CUBLAS_STATUS_INVALID_VALUE;
        }
        if (f32_only)
                ok = Atype == CUDA_R_32F && Btype == CUDA_R_32F && Ctype == CUDA_R_32F;
        else
                ok = (Atype == CUDA_R_32F && Btype == CUDA_R_32F && Ctype == CUDA_R_32F) ||
                     (Atype == CUDA_R_16F && Btype == CUDA_R_16F &&
                      (Ctype == CUDA_R_16F || Ctype == CUDA_R_32F));
        return ok ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
}

/*
 * Every operand must be memory this device can reach, over its whole extent:
 * anything else is an illegal address on a GPU, a sticky fault.
 */
static bool gemm_reachable(int dev, const struct gemm *g)
{
        size_t ea = g->a16 ? 2 : 4, ec = g->c16 ? 2 : 4;
        int m = g->m, n = g->n, k = g->k;

        if (!sim_reachable(dev, g->C, span(m, n, g->ldc, ec)))
                return false;
        return k == 0 ||
               (sim_reachable(dev, g->A, span(g->ta ? k : m, g->ta ? m : k, g->lda, ea)) &&
                sim_reachable(dev, g->B, span(g->tb ? n : k, g->tb ? k : n, g->ldb, ea)));
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t transa, cublasOperation_t transb,
                            int m, int n, int k, const void *alpha, const void *A,
                            cudaDataType Atype, int lda, const void *B, cudaDataType Btype, int ldb,
                            const void *beta, void *C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t ctype, cublasGemmAlgo_t algo)
{
        struct gemm *g;
        struct sim_op *op;
        struct sim_stream *s;
        cublasStatus_t st;
        int fate;

        if (!valid(h))
                return CUBLAS_STATUS_NOT_INITIALIZED;
        if (!gemm_args_valid(transa, transb, m, n, k, lda, ldb, ldc, alpha, beta, algo))
                return CUBLAS_STATUS_INVALID_VALUE;
        st = gemm_types(ctype, Atype, Btype, Ctype);
        if (st != CUBLAS_STATUS_SUCCESS)
                return st;
        if (sim_sticky() != cudaSuccess)
                return CUBLAS_STATUS_EXECUTION_FAILED;
        s = sim_stream_of(h->stream, h->dev);
        if (s == NULL)
                return CUBLAS_STATUS_INVALID_VALUE;
        if (m == 0 || n == 0)
                return CUBLAS_STATUS_SUCCESS;
        g = calloc(1, sizeof(*g));
        op = calloc(1, sizeof(*op));
        if (g == NULL || op == NULL) {
                free(g);
                free(op);
                return CUBLAS_STATUS_ALLOC_FAILED;
        }
        *g = (struct gemm){
                .ta = transa != CUBLAS_OP_N,
                .tb = transb != CUBLAS_OP_N,
                .m = m,
                .n = n,
                .k = k,
                .alpha = *(const float *)alpha, /* CUBLAS_POINTER_MODE_HOST, the default */
                .beta = *(const float *)beta,
                .A = A,
                .B = B,
                .C = C,
                .a16 = Atype == CUDA_R_16F,
                .b16 = Btype == CUDA_R_16F,
                .c16 = Ctype == CUDA_R_16F,
                .lda = lda,
                .ldb = ldb,
                .ldc = ldc,
        };
        if (ctype == CUBLAS_COMPUTE_32F_FAST_TF32 || ctype == CUBLAS_COMPUTE_32F_FAST_16BF ||
            (ctype == CUBLAS_COMPUTE_32F && Atype == CUDA_R_32F &&
             ((unsigned)h->math & 0xf) == CUBLAS_TF32_TENSOR_OP_MATH))
                g->round = R_TF32;
        else if (ctype == CUBLAS_COMPUTE_32F_FAST_16F)
                g->round = R_F16;
        if (!gemm_reachable(h->dev, g)) {
                op->fault = true;
                op->fault_why = "an operand is not memory of this device (or runs past its "
                                "allocation)";
        }
        fate = sim_launch_fate();
        if (fate == 1) {
                free(g);
                free(op);
                return CUBLAS_STATUS_EXECUTION_FAILED;
        }
        if (fate == 2)
                op->fault = true;
        op->fn = gemm_run;
        op->free = gemm_free;
        op->arg = g;
        op->what = "cublasGemmEx";
        sim_enqueue(s, op);
        return CUBLAS_STATUS_SUCCESS;
}
