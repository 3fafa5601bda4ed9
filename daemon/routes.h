/*
 * routes.h: the HTTP API (docs/DESIGN.md §5; routes.c): the route table,
 * one row per route (route.h), and the route handler that serves it, which
 * main installs with rnnd_server_set_routes().
 */
#ifndef RNND_DAEMON_ROUTES_H
#define RNND_DAEMON_ROUTES_H

#include "route.h"
#include "server.h"

/* The rows, matched in order by rnnd_route_match(); immutable. */
extern const struct rnnd_route rnnd_routes_table[];
extern const size_t rnnd_routes_table_len;

/* The route handler the HTTP layer calls (http.h); immutable. */
extern const struct rnnd_route_handler rnnd_routes;

#endif
