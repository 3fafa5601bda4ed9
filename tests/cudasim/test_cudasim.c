/*
 * test_cudasim.c: the stand-in's own semantics (tests/cudasim/README.md):
 * guarded and poisoned device memory, work that runs late, the separate
 * error states of the three libraries, the sticky device fault, kernels
 * with barriers, cublasGemmEx against a host product, the weight-space
 * layout, and fault injection.  Each test runs in a child process of its
 * own (Check's fork mode), so a sticky fault ends only that test.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "check-main.h"
#include "cudasim.h"

cudaError_t t_block_sum(const float *in, float *out, unsigned n, unsigned threads, cudaStream_t s);
cudaError_t t_divergent(float *out, cudaStream_t s);
cudaError_t t_trap(cudaStream_t s);
cudaError_t t_overrun(float *p, size_t n, cudaStream_t s);
cudaError_t t_launch(unsigned grid, unsigned block, cudaStream_t s);

#define CUDA(call) ck_assert_int_eq((call), cudaSuccess)

static cudaStream_t stream(void)
{
        cudaStream_t s;

        CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        return s;
}

START_TEST(test_devices)
{
        struct cudaDeviceProp p;
        size_t free_b, total_b, free2;
        int n = 0, d = -1;
        void *a;

        CUDA(cudaGetDeviceCount(&n));
        ck_assert_int_eq(n, 2); /* RNND_CUDASIM_DEVICES=1G,512M in main() */
        CUDA(cudaGetDeviceProperties(&p, 1));
        ck_assert_uint_eq(p.totalGlobalMem, 512u << 20);
        ck_assert_int_eq(p.major, 9);
        ck_assert_int_eq(cudaSetDevice(2), cudaErrorInvalidDevice);
        ck_assert_int_eq(cudaGetLastError(), cudaErrorInvalidDevice);
        ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
        CUDA(cudaSetDevice(1));
        CUDA(cudaGetDevice(&d));
        ck_assert_int_eq(d, 1);
        CUDA(cudaMemGetInfo(&free_b, &total_b));
        ck_assert_uint_eq(total_b, 512u << 20);
        CUDA(cudaMalloc(&a, 100u << 20));
        CUDA(cudaMemGetInfo(&free2, &total_b));
        ck_assert_uint_eq(free_b - free2, 100u << 20);
        ck_assert_int_eq(cudaMalloc(&a, 500u << 20), cudaErrorMemoryAllocation);
        ck_assert_uint_eq(cudasim_malloc_count(1), 1);
        ck_assert_uint_eq(cudasim_malloc_count(0), 0);
}
END_TEST

/*
 * A host read of device memory dies of SIGSEGV, as it would with a GPU,
 * wherever the CPU has memory protection keys (the stand-in says at start
 * when it has none; the rest of the suite still runs there).
 */
START_TEST(test_host_deref_faults)
{
        volatile float *p;
        pid_t pid;
        int status;

        CUDA(cudaMalloc((void **)&p, 64));
        if (!cudasim_host_reads_fault()) {
                fprintf(stderr, "test_host_deref_faults: not checked, no protection keys here\n");
                CUDA(cudaFree((void *)p));
                return;
        }
        pid = fork();
        if (pid == 0) {
                signal(SIGSEGV, SIG_DFL);
                (void)p[0];
                _exit(0);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV,
                      "a host read of device memory did not fault (status %d)", status);
}
END_TEST

/* Fresh memory is poison; work runs only at the synchronisation. */
START_TEST(test_late_work)
{
        cudaStream_t s = stream();
        float *d, *pin, v[4] = {1, 2, 3, 4};
        uint32_t bits;

        CUDA(cudaMalloc((void **)&d, sizeof(v)));
        CUDA(cudaMallocHost((void **)&pin, sizeof(v)));
        CUDA(cudaMemcpyAsync(pin, d, sizeof(v), cudaMemcpyDeviceToHost, s));
        CUDA(cudaStreamSynchronize(s));
        memcpy(&bits, pin, 4);
        ck_assert_uint_eq(bits, 0xffffffffu); /* NaN */
        ck_assert(isnan(pin[3]));

        /* A pinned source rewritten before the copy ran is copied as rewritten. */
        memcpy(pin, v, sizeof(v));
        CUDA(cudaMemcpyAsync(d, pin, sizeof(v), cudaMemcpyHostToDevice, s));
        pin[0] = 42;
        {
                cudaError_t q = cudaStreamQuery(s);

                ck_assert(q == cudaSuccess || q == cudaErrorNotReady);
        }
        CUDA(cudaStreamSynchronize(s));
        memset(pin, 0, sizeof(v));
        CUDA(cudaMemcpyAsync(pin, d, sizeof(v), cudaMemcpyDeviceToHost, s));
        ck_assert(pin[1] == 0.0f); /* not yet */
        CUDA(cudaStreamSynchronize(s));
        ck_assert(pin[0] == 42.0f && pin[1] == 2.0f && pin[3] == 4.0f);

        /* A pageable source is staged at the call; a wrong kind is refused. */
        CUDA(cudaMemcpyAsync(d, v, sizeof(v), cudaMemcpyHostToDevice, s));
        v[0] = -1;
        CUDA(cudaStreamSynchronize(s)); /* the NULL stream does not wait for s */
        CUDA(cudaMemcpy(pin, d, sizeof(v), cudaMemcpyDeviceToHost));
        ck_assert(pin[0] == 1.0f);
        ck_assert_int_eq(cudaMemcpyAsync(d, v, sizeof(v), cudaMemcpyDeviceToHost, s),
                         cudaErrorInvalidValue);
        ck_assert_int_eq(cudaMemcpyAsync(d, v, sizeof(v) + 4, cudaMemcpyHostToDevice, s),
                         cudaErrorInvalidValue);
        ck_assert_int_eq(cudaGetLastError(), cudaErrorInvalidValue);
}
END_TEST

/* The NULL stream waits for blocking streams and they for it; non-blocking ones for nothing. */
START_TEST(test_null_stream)
{
        cudaStream_t blocking, nonblocking = stream();
        float *d, *pin, got = 0;

        CUDA(cudaStreamCreate(&blocking));
        CUDA(cudaMalloc((void **)&d, 4));
        CUDA(cudaMallocHost((void **)&pin, 4));
        pin[0] = 3;
        CUDA(cudaMemcpyAsync(d, pin, 4, cudaMemcpyHostToDevice, blocking));
        CUDA(cudaMemcpy(&got, d, 4, cudaMemcpyDeviceToHost));
        ck_assert(got == 3.0f);
        pin[0] = 5;
        CUDA(cudaMemcpyAsync(d, pin, 4, cudaMemcpyHostToDevice, nonblocking));
        CUDA(cudaMemcpy(&got, d, 4, cudaMemcpyDeviceToHost));
        ck_assert(got == 3.0f); /* the copy on the non-blocking stream has not run */
        CUDA(cudaStreamSynchronize(nonblocking));
        CUDA(cudaMemset(d, 0, 4)); /* NULL stream, then a blocking stream after it */
        CUDA(cudaMemcpyAsync(pin, d, 4, cudaMemcpyDeviceToHost, blocking));
        CUDA(cudaStreamSynchronize(blocking));
        ck_assert(pin[0] == 0.0f);
}
END_TEST

/* One stream waits for an event of another. */
START_TEST(test_events)
{
        cudaStream_t a = stream(), b = stream();
        cudaEvent_t e, t0, t1;
        float *d, *pin, ms = -1;

        CUDA(cudaEventCreate(&e));
        CUDA(cudaEventCreate(&t0));
        CUDA(cudaEventCreate(&t1));
        CUDA(cudaMalloc((void **)&d, 4));
        CUDA(cudaMallocHost((void **)&pin, 4));
        pin[0] = 7;
        CUDA(cudaEventRecord(t0, a));
        CUDA(cudaMemcpyAsync(d, pin, 4, cudaMemcpyHostToDevice, a));
        CUDA(cudaEventRecord(e, a));
        CUDA(cudaEventRecord(t1, a));
        CUDA(cudaStreamWaitEvent(b, e, 0));
        CUDA(cudaMemcpyAsync(pin, d, 4, cudaMemcpyDeviceToHost, b));
        ck_assert_int_eq(cudaEventElapsedTime(&ms, t0, t1), cudaErrorNotReady);
        CUDA(cudaStreamSynchronize(b));
        ck_assert(pin[0] == 7.0f);
        CUDA(cudaEventSynchronize(t1));
        CUDA(cudaEventElapsedTime(&ms, t0, t1));
        ck_assert(ms >= 0.0f);
        CUDA(cudaEventDestroy(e));
        CUDA(cudaEventDestroy(t0));
        CUDA(cudaEventDestroy(t1));
}
END_TEST

/* A block reduction through shared memory and __syncthreads. */
START_TEST(test_kernel_barrier)
{
        cudaStream_t s = stream();
        float *in, *out, h[2 * 1000], r[2], want[2] = {0, 0};

        for (int i = 0; i < 2000; i++) {
                h[i] = (float)(i % 7);
                want[i / 1000] += h[i];
        }
        CUDA(cudaMalloc((void **)&in, sizeof(h)));
        CUDA(cudaMalloc((void **)&out, sizeof(r)));
        CUDA(cudaMemcpy(in, h, sizeof(h), cudaMemcpyHostToDevice));
        CUDA(t_block_sum(in, out, 1000, 256, s));
        CUDA(cudaMemcpyAsync(r, out, sizeof(r), cudaMemcpyDeviceToHost, s));
        ck_assert_msg(r[0] == want[0] && r[1] == want[1], "%g %g, want %g %g", r[0], r[1], want[0],
                      want[1]);
        ck_assert_int_eq(t_launch(1, 1025, s), cudaErrorInvalidConfiguration);
        ck_assert_int_eq(t_launch(0, 32, s), cudaErrorInvalidConfiguration);
        CUDA(cudaStreamSynchronize(s));
}
END_TEST

/* Device faults are sticky: every later call returns them. */
static void sticky(cudaError_t (*launch)(float *, cudaStream_t), cudaError_t want)
{
        cudaStream_t s = stream();
        float *d;
        void *more;

        CUDA(cudaMalloc((void **)&d, 256));
        CUDA(launch(d, s));
        ck_assert_int_eq(cudaStreamSynchronize(s), want);
        ck_assert_int_eq(cudaStreamQuery(s), want);
        ck_assert_int_eq(cudaMalloc(&more, 16), want);
        ck_assert_int_eq(cudaGetLastError(), want);
        ck_assert_int_eq(cudaGetLastError(), want);
        ck_assert_int_eq(cudaPeekAtLastError(), want);
}

static cudaError_t do_divergent(float *d, cudaStream_t s)
{
        return t_divergent(d, s);
}

static cudaError_t do_trap(float *d, cudaStream_t s)
{
        (void)d;
        return t_trap(s);
}

static cudaError_t do_overrun(float *d, cudaStream_t s)
{
        return t_overrun(d, 64, s);
}

static cudaError_t do_injected(float *d, cudaStream_t s)
{
        (void)d;
        cudasim_arm_fault(1);
        return t_launch(4, 64, s);
}

START_TEST(test_fault_divergent_barrier)
{
        sticky(do_divergent, cudaErrorIllegalInstruction);
}
END_TEST

START_TEST(test_fault_trap)
{
        sticky(do_trap, cudaErrorLaunchFailure);
}
END_TEST

START_TEST(test_fault_overrun)
{
        sticky(do_overrun, cudaErrorIllegalAddress);
}
END_TEST

START_TEST(test_fault_injected)
{
        sticky(do_injected, cudaErrorIllegalAddress);
}
END_TEST

/* Non-sticky injections: a failed launch and an out-of-memory. */
START_TEST(test_injected_non_sticky)
{
        cudaStream_t s = stream();
        void *p;

        cudasim_arm_launch_fail(2);
        CUDA(t_launch(1, 1, s));
        ck_assert_int_eq(t_launch(1, 1, s), cudaErrorLaunchOutOfResources);
        ck_assert_int_eq(cudaGetLastError(), cudaSuccess); /* t_launch took it */
        CUDA(t_launch(1, 1, s));
        CUDA(cudaStreamSynchronize(s));
        cudasim_arm_oom(0, 1);
        ck_assert_int_eq(cudaMalloc(&p, 16), cudaErrorMemoryAllocation);
        CUDA(cudaMalloc(&p, 16));
        CUDA(cudaFree(p));
        ck_assert_uint_eq(cudasim_free_count(0), 1);
        ck_assert_uint_eq(cudasim_launch_count(), 3);
}
END_TEST

/* C = alpha op(A) op(B) + beta C against the host, and cuBLAS's own errors. */
START_TEST(test_gemm)
{
        enum { M = 5, N = 3, K = 4 };
        cudaStream_t s = stream();
        cublasHandle_t h;
        float A[K * M], B[N * K], C[M * N], want[M * N], *dA, *dB, *dC;
        const float alpha = 2.0f, beta = 0.0f, one = 1.0f;

        for (int i = 0; i < K * M; i++)
                A[i] = (float)(i % 5) - 2.0f;
        for (int i = 0; i < N * K; i++)
                B[i] = (float)(i % 3) + 0.5f;
        /* A is stored K x M (op T), B is K x N (op N): C = 2 A^T B. */
        for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                        float v = 0;

                        for (int l = 0; l < K; l++)
                                v += A[i * K + l] * B[j * K + l];
                        want[j * M + i] = alpha * v;
                }
        ck_assert_int_eq(cublasCreate_v2(&h), CUBLAS_STATUS_SUCCESS);
        ck_assert_int_eq(cublasSetStream_v2(h, s), CUBLAS_STATUS_SUCCESS);
        CUDA(cudaMalloc((void **)&dA, sizeof(A)));
        CUDA(cudaMalloc((void **)&dB, sizeof(B)));
        CUDA(cudaMalloc((void **)&dC, sizeof(C))); /* NaN: beta 0 must not read it */
        CUDA(cudaMemcpy(dA, A, sizeof(A), cudaMemcpyHostToDevice));
        CUDA(cudaMemcpy(dB, B, sizeof(B), cudaMemcpyHostToDevice));
        ck_assert_int_eq(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, M, N, K, &alpha, dA, CUDA_R_32F,
                                      K, dB, CUDA_R_32F, K, &beta, dC, CUDA_R_32F, M,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                         CUBLAS_STATUS_SUCCESS);
        CUDA(cudaMemcpyAsync(C, dC, sizeof(C), cudaMemcpyDeviceToHost, s));
        CUDA(cudaStreamSynchronize(s));
        for (int i = 0; i < M * N; i++)
                ck_assert_msg(C[i] == want[i], "C[%d] = %g, want %g", i, C[i], want[i]);

        /* Invalid and unsupported arguments; none of it reaches cudaGetLastError(). */
        ck_assert_int_eq(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, dA, CUDA_R_32F,
                                      M - 1, dB, CUDA_R_32F, K, &one, dC, CUDA_R_32F, M,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                         CUBLAS_STATUS_INVALID_VALUE);
        ck_assert_int_eq(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, dA, CUDA_R_16F, M,
                                      dB, CUDA_R_16F, K, &one, dC, CUDA_R_32F, M,
                                      CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT),
                         CUBLAS_STATUS_NOT_SUPPORTED);
        ck_assert_int_eq(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, dA, CUDA_R_32F, M,
                                      dB, CUDA_R_32F, K, &one, dC, CUDA_R_32F, M,
                                      (cublasComputeType_t)CUDA_R_32F, CUBLAS_GEMM_DEFAULT),
                         CUBLAS_STATUS_INVALID_VALUE);
        ck_assert_int_eq(cudaGetLastError(), cudaSuccess);

        /* TF32 rounds the inputs: 1 + 2^-12 becomes 1. */
        {
                float a = 1.0f + 1.0f / 4096, b = 1.0f, c = 0;

                CUDA(cudaMemcpy(dA, &a, 4, cudaMemcpyHostToDevice));
                CUDA(cudaMemcpy(dB, &b, 4, cudaMemcpyHostToDevice));
                ck_assert_int_eq(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, dA,
                                              CUDA_R_32F, 1, dB, CUDA_R_32F, 1, &beta, dC,
                                              CUDA_R_32F, 1, CUBLAS_COMPUTE_32F_FAST_TF32,
                                              CUBLAS_GEMM_DEFAULT),
                                 CUBLAS_STATUS_SUCCESS);
                CUDA(cudaStreamSynchronize(s)); /* the NULL stream does not wait for s */
                CUDA(cudaMemcpy(&c, dC, 4, cudaMemcpyDeviceToHost));
                ck_assert(c == 1.0f);
                ck_assert_int_eq(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, dA,
                                              CUDA_R_32F, 1, dB, CUDA_R_32F, 1, &beta, dC,
                                              CUDA_R_32F, 1, CUBLAS_COMPUTE_32F,
                                              CUBLAS_GEMM_DEFAULT),
                                 CUBLAS_STATUS_SUCCESS);
                CUDA(cudaStreamSynchronize(s)); /* the NULL stream does not wait for s */
                CUDA(cudaMemcpy(&c, dC, 4, cudaMemcpyDeviceToHost));
                ck_assert(c == a);
        }
        /* A host operand is an illegal address on the device: sticky. */
        ck_assert_int_eq(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, A, CUDA_R_32F, M,
                                      dB, CUDA_R_32F, K, &one, dC, CUDA_R_32F, M,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                         CUBLAS_STATUS_SUCCESS);
        ck_assert_int_eq(cudaStreamSynchronize(s), cudaErrorIllegalAddress);
        ck_assert_int_eq(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, dA, CUDA_R_32F, M,
                                      dB, CUDA_R_32F, K, &one, dC, CUDA_R_32F, M,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                         CUBLAS_STATUS_EXECUTION_FAILED);
        ck_assert_int_eq(cublasDestroy_v2(h), CUBLAS_STATUS_SUCCESS);
}
END_TEST

/* Offsets of every matrix and bias of an LSTM through a handle on the current device. */
static void offsets(cudnnRNNAlgo_t algo, size_t *size, long off[24])
{
        cudnnHandle_t h;
        cudnnRNNDescriptor_t d;
        cudnnTensorDescriptor_t m, b;

        ck_assert_int_eq(cudnnCreate(&h), CUDNN_STATUS_SUCCESS);
        cudnnCreateRNNDescriptor(&d);
        cudnnCreateTensorDescriptor(&m);
        cudnnCreateTensorDescriptor(&b);
        ck_assert_int_eq(cudnnSetRNNDescriptor_v8(
                                 d, algo, CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS, CUDNN_BIDIRECTIONAL,
                                 CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT,
                                 CUDNN_FMA_MATH, 8, 16, 16, 1, NULL, CUDNN_RNN_PADDED_IO_ENABLED),
                         CUDNN_STATUS_SUCCESS);
        ck_assert_int_eq(cudnnGetRNNWeightSpaceSize(h, d, size), CUDNN_STATUS_SUCCESS);
        for (int pl = 0; pl < 2; pl++)
                for (int lin = 0; lin < 8; lin++) {
                        void *ma, *ba;

                        ck_assert_int_eq(
                                cudnnGetRNNWeightParams(h, d, pl, *size, NULL, lin, m, &ma, b, &ba),
                                CUDNN_STATUS_SUCCESS);
                        off[pl * 12 + lin] = (long)(uintptr_t)ma;
                        if (lin < 4)
                                off[pl * 12 + 8 + lin] = (long)(uintptr_t)ba;
                }
        ck_assert_int_eq(cudnnGetRNNWeightParams(h, d, 2, *size, NULL, 0, m, NULL, b, NULL),
                         CUDNN_STATUS_BAD_PARAM);
        cudnnDestroyTensorDescriptor(m);
        cudnnDestroyTensorDescriptor(b);
        cudnnDestroyRNNDescriptor(d);
        cudnnDestroy(h);
}

/* The same layout through every handle of a device; another algorithm or device differs. */
START_TEST(test_weight_layout)
{
        size_t s1, s2, s3, s4;
        long o1[24], o2[24], o3[24], o4[24];

        offsets(CUDNN_RNN_ALGO_STANDARD, &s1, o1);
        offsets(CUDNN_RNN_ALGO_STANDARD, &s2, o2);
        offsets(CUDNN_RNN_ALGO_PERSIST_STATIC, &s3, o3);
        CUDA(cudaSetDevice(1));
        offsets(CUDNN_RNN_ALGO_STANDARD, &s4, o4);
        ck_assert_uint_eq(s1, s2);
        ck_assert_mem_eq(o1, o2, sizeof(o1));
        ck_assert(s1 != s3 || memcmp(o1, o3, sizeof(o1)) != 0);
        ck_assert(s1 != s4 || memcmp(o1, o4, sizeof(o1)) != 0);
        /* Not the packed order a caller might assume. */
        ck_assert(o1[1] != o1[0] + 16 * 8 * 4 || o1[2] != o1[1] + 16 * 8 * 4);
}
END_TEST

/* cuDNN's errors stay in cuDNN: a failing call leaves cudaGetLastError() clean. */
START_TEST(test_cudnn_errors)
{
        cudnnRNNDataDescriptor_t d;
        int lens[2] = {3, 5};
        char msg[256];

        cudnnCreateRNNDataDescriptor(&d);
        ck_assert_int_eq(cudnnSetRNNDataDescriptor(d, CUDNN_DATA_FLOAT,
                                                   CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, 5, 2, 8,
                                                   lens, NULL),
                         CUDNN_STATUS_BAD_PARAM);
        cudnnGetLastErrorString(msg, sizeof(msg));
        ck_assert_msg(strstr(msg, "sorted") != NULL, "%s", msg);
        ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
        cudnnDestroyRNNDataDescriptor(d);
}
END_TEST

static Suite *cudasim_suite(void)
{
        Suite *s = suite_create("cudasim");
        TCase *tc = tcase_create("runtime");

        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_devices);
        tcase_add_test(tc, test_host_deref_faults);
        tcase_add_test(tc, test_late_work);
        tcase_add_test(tc, test_null_stream);
        tcase_add_test(tc, test_events);
        tcase_add_test(tc, test_kernel_barrier);
        tcase_add_test(tc, test_fault_divergent_barrier);
        tcase_add_test(tc, test_fault_trap);
        tcase_add_test(tc, test_fault_overrun);
        tcase_add_test(tc, test_fault_injected);
        tcase_add_test(tc, test_injected_non_sticky);
        tcase_add_test(tc, test_gemm);
        tcase_add_test(tc, test_weight_layout);
        tcase_add_test(tc, test_cudnn_errors);
        suite_add_tcase(s, tc);
        return s;
}

int main(int argc, char **argv)
{
        SRunner *sr;
        int failed;

        /* Before any CUDA call (each test is a child that starts the stand-in afresh). */
        setenv("RNND_CUDASIM_DEVICES", "1G,512M", 1);
        setenv("RNND_CUDASIM_DELAY_US", "60000000", 1); /* work waits for its sync */
        unsetenv("CUDA_VISIBLE_DEVICES");
        sr = srunner_create(cudasim_suite());
        srunner_set_fork_status(sr, CK_FORK);
        srunner_run(sr, NULL, rnnd_check_only(argc, argv), CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
