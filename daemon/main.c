/*
 * main.c: rnnd's entry point, in systemd's run() shape: read the settings,
 * build everything (models, plans, the HTTP and gRPC front ends), send READY=1, run the
 * loop until SIGTERM, free everything, and exit 0 (or RNND_EXIT_DEVICE_FAULT
 * after a GPU device fault, for systemd to restart the daemon).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "grpcsvc.h"
#include "infer.h"
#include "inference.h"
#include "log.h"
#include "options.h"
#include "reload.h"
#include "routes.h"
#include "rnnd-config.h"
#include "server.h"

static int run(int argc, char **argv, int *status)
{
        struct rnnd_server *srv = NULL;
        struct rnnd_server_hook hook;
        struct rnnd_options opts;
        enum rnnd_command cmd = RNND_CMD_RUN;
        rnnd_error_t err = {0};
        int r;

        /* The client side of a closed connection must not kill the daemon. */
        signal(SIGPIPE, SIG_IGN);

        r = rnnd_options_init(&opts);
        if (r < 0) {
                rnnd_log(RNND_LOG_ERR, "out of memory");
                goto out;
        }
        r = rnnd_options_parse_args(&opts, argc, argv, &cmd, &err);
        if (r < 0) {
                /* A usage error, for the person at the terminal: plain text, not a log line. */
                fprintf(stderr, "rnnd: %s\n", err.msg);
                goto out;
        }
        switch (cmd) {
        case RNND_CMD_HELP:
                rnnd_options_help(stdout);
                goto out;
        case RNND_CMD_VERSION:
                printf("rnnd %s\n", RNND_VERSION);
                goto out;
        case RNND_CMD_BACKENDS:
                rnnd_server_print_backends(stdout, &opts);
                goto out;
        case RNND_CMD_DUMP_CONFIG:
                rnnd_options_dump(stdout, &opts);
                goto out;
        case RNND_CMD_RUN:
                break;
        }

        rnnd_log_setup(opts.log_level, (enum rnnd_log_format)opts.log_format, STDERR_FILENO);
        /* jansson's seed and allocator: before any thread starts (DESIGN.md §10). */
        rnnd_infer_global_init();
        rnnd_log(RNND_LOG_INFO, "rnnd %s starting%s%s", RNND_VERSION,
                 opts.config_file != NULL ? " with " : "",
                 opts.config_file != NULL ? opts.config_file : "");

        r = rnnd_server_new(&opts, &srv, &err);
        if (r < 0)
                goto fail;
        rnnd_inference_hook_init(srv, &hook);
        rnnd_server_set_infer_hook(srv, &hook);
        rnnd_server_set_routes(srv, &rnnd_routes);
        rnnd_server_set_grpc(srv, &rnnd_grpcsvc);
        rnnd_server_set_command_line(srv, argc, argv);
        r = rnnd_server_start(srv, &err);
        if (r < 0)
                goto fail;
        r = rnnd_server_run(srv, &err);
        if (r < 0)
                goto fail;
        *status = rnnd_server_exit_status(srv);
        goto out;
fail:
        rnnd_log(RNND_LOG_ERR, "%s", err.msg[0] != '\0' ? err.msg : rnnd_strerror(r));
out:
        srv = rnnd_server_free(srv);
        rnnd_options_done(&opts);
        fflush(stdout);
        return r;
}

int main(int argc, char **argv)
{
        int status = EXIT_SUCCESS;

        return run(argc, argv, &status) < 0 ? EXIT_FAILURE : status;
}
