/*
 * launch.c: runs the stand-in's kernels (kernels.cu compiled as host C++,
 * kernel-host.h) on a stream's thread.  Each block's threads are fibres
 * on that thread with their own threadIdx; __syncthreads() is a
 * counting barrier: a fibre waits there until every thread of its block has
 * arrived.  A barrier some threads of a block skip (they returned) is the
 * undefined behaviour CUDA documents, and here a sticky device fault.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "sim.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define STACK_SIZE (512u << 10)
#else
#define STACK_SIZE (64u << 10)
#endif

enum { F_RUN, F_BARRIER, F_DONE };

/*
 * A fibre switch: saves the callee-saved registers on the current stack,
 * stores its pointer in *save and continues on stack next.  ucontext's
 * swapcontext would do, but makes two system calls per switch (the signal
 * mask), and a 256-thread block switches 256 times per barrier.
 */
#if defined(__x86_64__)
void sim_fibre_switch(void **save, void *next);
__asm__(".text\n"
        ".globl sim_fibre_switch\n"
        ".type sim_fibre_switch,@function\n"
        "sim_fibre_switch:\n"
        "        pushq %rbp\n"
        "        pushq %rbx\n"
        "        pushq %r12\n"
        "        pushq %r13\n"
        "        pushq %r14\n"
        "        pushq %r15\n"
        "        movq %rsp, (%rdi)\n"
        "        movq %rsi, %rsp\n"
        "        popq %r15\n"
        "        popq %r14\n"
        "        popq %r13\n"
        "        popq %r12\n"
        "        popq %rbx\n"
        "        popq %rbp\n"
        "        ret\n"
        ".size sim_fibre_switch, .-sim_fibre_switch\n");
#else
#error "cudasim's fibres need x86-64 (launch.c)"
#endif

struct fibre {
        void *sp;
        int state;
};

__thread uint3 cudasim_threadIdx __attribute__((tls_model("initial-exec")));
__thread uint3 cudasim_blockIdx __attribute__((tls_model("initial-exec")));
__thread uint3 cudasim_blockDim __attribute__((tls_model("initial-exec")));
__thread uint3 cudasim_gridDim __attribute__((tls_model("initial-exec")));

static __thread __attribute__((tls_model("initial-exec"))) struct {
        void *sched_sp;
        struct fibre *f;
        char *stacks;
        size_t n_max;
        size_t cur;
        void (*fn)(void *);
        void *args;
        void *fake_stack;
        const void *sched_bottom;
        size_t sched_size;
        bool direct; /* threads run as plain calls: a barrier is a divergent one */
} K;

/* ASan needs to know which stack the thread is on (no-ops without it). */
static void to_fibre(size_t i)
{
#if defined(__SANITIZE_ADDRESS__)
        __sanitizer_start_switch_fiber(&K.fake_stack, K.stacks + i * STACK_SIZE, STACK_SIZE);
#endif
        sim_fibre_switch(&K.sched_sp, K.f[i].sp);
#if defined(__SANITIZE_ADDRESS__)
        __sanitizer_finish_switch_fiber(K.fake_stack, NULL, NULL);
#endif
}

static void to_sched(int state)
{
        struct fibre *f = &K.f[K.cur];

        f->state = state;
#if defined(__SANITIZE_ADDRESS__)
        void *fake = NULL;

        __sanitizer_start_switch_fiber(state == F_DONE ? NULL : &fake, K.sched_bottom,
                                       K.sched_size);
#endif
        sim_fibre_switch(&f->sp, K.sched_sp);
#if defined(__SANITIZE_ADDRESS__)
        __sanitizer_finish_switch_fiber(fake, &K.sched_bottom, &K.sched_size);
#endif
}

static void fibre_main(void)
{
#if defined(__SANITIZE_ADDRESS__)
        __sanitizer_finish_switch_fiber(NULL, &K.sched_bottom, &K.sched_size);
#endif
        K.fn(K.args);
        to_sched(F_DONE);
        abort(); /* a finished fibre is never resumed */
}

void cudasim_syncthreads(void)
{
        if (K.direct) {
                fprintf(stderr,
                        "cudasim: block (%u,%u,%u): thread %u reaches a __syncthreads() that "
                        "thread 0 never reached\n",
                        cudasim_blockIdx.x, cudasim_blockIdx.y, cudasim_blockIdx.z,
                        cudasim_threadIdx.x);
                sim_fault_jump(cudaErrorIllegalInstruction);
        }
        to_sched(F_BARRIER);
}

void cudasim_trap(void)
{
        sim_fault_jump(cudaErrorLaunchFailure);
}

static void set_tid(size_t i)
{
        cudasim_threadIdx.x = (unsigned)(i % cudasim_blockDim.x);
        cudasim_threadIdx.y = (unsigned)(i / cudasim_blockDim.x % cudasim_blockDim.y);
        cudasim_threadIdx.z = (unsigned)(i / ((size_t)cudasim_blockDim.x * cudasim_blockDim.y));
}

static bool grow(size_t n)
{
        if (n <= K.n_max)
                return true;
        if (K.stacks != NULL)
                munmap(K.stacks, K.n_max * STACK_SIZE);
        free(K.f);
        K.stacks = mmap(NULL, n * STACK_SIZE, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
        K.f = calloc(n, sizeof(*K.f));
        if (K.stacks == MAP_FAILED || K.f == NULL) {
                K.stacks = NULL;
                K.n_max = 0;
                return false;
        }
        K.n_max = n;
        return true;
}

static void run_block(size_t n)
{
        /* A fresh stack per thread: six zero registers, then fibre_main as the return address. */
        for (size_t i = 0; i < n; i++) {
                void **top = (void **)(K.stacks + (i + 1) * STACK_SIZE);

                top -= 8;
                for (int r = 0; r < 6; r++)
                        top[r] = NULL;
                top[6] = (void *)(uintptr_t)fibre_main;
                top[7] = NULL;
                K.f[i].sp = top;
                K.f[i].state = F_RUN;
        }
        /*
         * Thread 0 first: when it ends without a barrier, every other thread
         * must too (anything else is a divergent barrier), so they run as
         * plain calls, without a fibre each.
         */
        K.cur = 0;
        set_tid(0);
        to_fibre(0);
        if (K.f[0].state == F_DONE) {
                K.direct = true;
                for (size_t i = 1; i < n; i++) {
                        set_tid(i);
                        K.fn(K.args);
                }
                K.direct = false;
                return;
        }
        for (;;) {
                size_t done = 0, waiting = 0;

                for (size_t i = 0; i < n; i++) {
                        if (K.f[i].state != F_RUN)
                                continue;
                        K.cur = i;
                        set_tid(i);
                        to_fibre(i);
                }
                for (size_t i = 0; i < n; i++) {
                        done += K.f[i].state == F_DONE;
                        waiting += K.f[i].state == F_BARRIER;
                }
                if (waiting == 0)
                        return;
                if (done != 0) {
                        fprintf(stderr,
                                "cudasim: block (%u,%u,%u): %zu threads wait at "
                                "__syncthreads() that %zu threads never reach\n",
                                cudasim_blockIdx.x, cudasim_blockIdx.y, cudasim_blockIdx.z, waiting,
                                done);
                        sim_fault_jump(cudaErrorIllegalInstruction);
                }
                for (size_t i = 0; i < n; i++)
                        K.f[i].state = F_RUN;
        }
}

cudaError_t sim_run_kernel(dim3 grid, dim3 block, void (*thread_fn)(void *), void *args)
{
        size_t n = (size_t)block.x * block.y * block.z;

        if (!grow(n))
                return cudaErrorLaunchOutOfResources;
        K.fn = thread_fn;
        K.args = args;
        K.direct = false;
        cudasim_gridDim = (uint3){grid.x, grid.y, grid.z};
        cudasim_blockDim = (uint3){block.x, block.y, block.z};
        for (unsigned z = 0; z < grid.z; z++)
                for (unsigned y = 0; y < grid.y; y++)
                        for (unsigned x = 0; x < grid.x; x++) {
                                cudasim_blockIdx = (uint3){x, y, z};
                                run_block(n);
                        }
        return cudaSuccess;
}

struct kernel_arg {
        dim3 grid, block;
        void (*fn)(void *);
        void *args;
};

static cudaError_t kernel_run(struct sim_op *op)
{
        struct kernel_arg *k = op->arg;

        return sim_run_kernel(k->grid, k->block, k->fn, k->args);
}

static void kernel_free(struct sim_op *op)
{
        struct kernel_arg *k = op->arg;

        free(k->args);
        free(k);
}

/*
 * The launch of kernel-host.h: checks the configuration as the runtime does,
 * then queues the kernel on stream hs.  Takes args (malloc'd) in every case.
 * Errors are the application's: they show in cudaGetLastError().
 */
cudaError_t cudasim_launch(dim3 grid, dim3 block, size_t smem, cudaStream_t hs,
                           void (*thread_fn)(void *), void *args, const char *name)
{
        struct sim_stream *s;
        struct sim_op *op;
        struct kernel_arg *k;
        size_t threads = (size_t)block.x * block.y * block.z;
        int fate;

        if (sim_device_count() == 0 || sim_sticky() != cudaSuccess) {
                free(args);
                return cudasim_set_last(sim_device_count() == 0 ? cudaErrorNoDevice : sim_sticky());
        }
        s = sim_stream_of(hs, sim_current_device());
        if (s == NULL || s->dev != sim_current_device()) {
                free(args);
                return cudasim_set_last(cudaErrorInvalidResourceHandle);
        }
        if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 ||
            grid.z > 65535 || threads == 0 || threads > 1024 || block.x > 1024 || block.y > 1024 ||
            block.z > 64 || smem > (48u << 10)) {
                free(args);
                return cudasim_set_last(cudaErrorInvalidConfiguration);
        }
        fate = sim_launch_fate();
        if (fate == 1) {
                free(args);
                return cudasim_set_last(cudaErrorLaunchOutOfResources);
        }
        op = calloc(1, sizeof(*op));
        k = malloc(sizeof(*k));
        if (op == NULL || k == NULL) {
                free(op);
                free(k);
                free(args);
                return cudasim_set_last(cudaErrorMemoryAllocation);
        }
        *k = (struct kernel_arg){grid, block, thread_fn, args};
        op->fn = kernel_run;
        op->free = kernel_free;
        op->arg = k;
        op->what = name;
        op->fault = fate == 2;
        sim_enqueue(s, op);
        return cudaSuccess;
}
