/*
 * routes.h: the HTTP API (DESIGN.md §5; routes.c): which path is which
 * route, and the JSON and Prometheus bodies of the routes that read the
 * model table.  main installs it with rnnd_server_set_routes().
 */
#ifndef RNND_DAEMON_ROUTES_H
#define RNND_DAEMON_ROUTES_H

#include "server.h"

extern const struct rnnd_route_handler rnnd_routes;

#endif
