/*
 * sim.h: what the stand-in's files share (tests/cudasim/README.md): the fake
 * devices and their arenas, the per-stream work queues and the fault state.
 * rt.c is the CUDA runtime, blas.c cuBLAS, dnn.c and rnn.c cuDNN, launch.c
 * the kernel launcher.  Never included by rnnd.
 */
#ifndef RNND_CUDASIM_SIM_H
#define RNND_CUDASIM_SIM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "cudasim.h"

#define SIM_MAX_DEVICES 8

/* One unit of queued work; fn runs on the stream's own thread. */
struct sim_op {
        struct sim_op *next;
        uint64_t seq;
        int64_t due_ns; /* runs by then even if nobody synchronises */
        bool fault;     /* an injected device fault: the op faults instead of running */
        /* Returns cudaSuccess or the (sticky) error the op hit. */
        cudaError_t (*fn)(struct sim_op *op);
        void (*free)(struct sim_op *op);
        void *arg;
        const char *what; /* for the fault message: "kernel gather<float, float>" */
        struct sim_stream *stream;
};

struct sim_stream {
        int dev;
        unsigned flags;
        bool legacy; /* a device's NULL stream */
        pthread_t thread;
        pthread_mutex_t mu;
        pthread_cond_t cv;
        struct sim_op *head, *tail;
        uint64_t enqueued, released, completed;
        bool stop;
        struct sim_stream *next_of_dev;
        unsigned magic;
};

/* The device a pointer's memory lives on, or -1; *len: bytes from p to its allocation's end. */
int sim_dev_of(const void *p, size_t *len);
/* True where [p, p + n) lies inside one live allocation of device dev, or in pinned memory. */
bool sim_reachable(int dev, const void *p, size_t n);
bool sim_is_pinned(const void *p, size_t n);

/* Lazily inits everything; returns the number of visible devices. */
int sim_device_count(void);
int sim_current_device(void);

/* The sticky error (cudaSuccess while the devices are healthy). */
cudaError_t sim_sticky(void);
/* Makes err the process's sticky error, with a diagnostic on stderr. */
void sim_set_sticky(cudaError_t err, const char *why, ...) __attribute__((format(printf, 2, 3)));

/* The stream behind a handle (NULL and the legacy handles map to the device's NULL stream). */
struct sim_stream *sim_stream_of(cudaStream_t s, int dev);
/* Queues op on s; op->fn, arg, free, launch are set by the caller. */
void sim_enqueue(struct sim_stream *s, struct sim_op *op);
/* Releases everything queued on s and waits for it; returns the sticky error or success. */
cudaError_t sim_stream_sync(struct sim_stream *s);

/*
 * Fault injection at a launch (kernel, GEMM, RNN forward), called when the
 * launch is made: returns 0 to go on, 1 for a failed launch (nothing
 * queued, a non-sticky error), 2 for a device fault when the work runs.
 */
int sim_launch_fate(void);

/* Inside an op: abandons it with err as the sticky error (a trap, a bad barrier). */
void sim_fault_jump(cudaError_t err) __attribute__((noreturn));

/* Records e as the calling thread's last error (cudaGetLastError) and returns it. */
cudaError_t cudasim_set_last(cudaError_t e);

/* Nanoseconds on the monotonic clock. */
int64_t sim_now_ns(void);

/* Lets the calling stand-in thread read and write device dev's arena. */
void sim_grant(int dev);
void sim_grant_all(void);

/*
 * Runs a kernel on the calling (stream) thread: every block in turn, each
 * block's threads as fibres with a counting barrier.  Returns cudaSuccess,
 * or the error a fault inside the kernel made (already sticky).
 */
cudaError_t sim_run_kernel(dim3 grid, dim3 block, void (*thread_fn)(void *), void *args);

/* IEEE half <-> float, round to nearest even. */
float sim_h2f(uint16_t h);
uint16_t sim_f2h(float f);
/* Rounds to TF32 (10 mantissa bits), nearest even. */
float sim_tf32(float f);

/* Reads a device's allocation-time poison (all bytes 0xff: NaN in f32 and f16, -1 in int32). */
#define SIM_POISON 0xff

#endif
