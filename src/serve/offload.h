/* serve/offload.h - a few worker threads that run tasks the scheduler hands
 * off, so that work whose cost one request chooses (a grammar's token mask)
 * runs beside the shared decode step instead of inside it.
 *
 * Tasks run in the order given (first in, first out), so slots that hand off
 * one step each are served in turn. The workers may run at a lower CPU
 * priority (a nice value of their own, Linux threads having one each), so
 * that on a busy machine what one request chose to cost waits for the
 * shared work, not the other way round. A task is a function and its argument;
 * it signals its own completion (the scheduler's condition variable). The
 * pool never frees or inspects what it runs.
 *
 * Threads: serve_offload_submit may be called from any thread;
 * serve_offload_free runs every task queued before it (a connection
 * suspended for one is resumed by it), then joins the workers. */
#ifndef COLIBRI_SERVE_OFFLOAD_H
#define COLIBRI_SERVE_OFFLOAD_H

#include "colibri.h"

struct offload;

typedef void (*offload_fn)(void *arg);

/* n_threads workers (1..16) with room for max_tasks queued tasks, each
 * raising its nice value by nice (0: as the caller's; a refusal to change
 * it is ignored). */
int  serve_offload_new(int n_threads, int max_tasks, int nice, struct offload **out, struct colibri_err *err);
/* Queues fn(arg); COLIBRI_ENOMEM when max_tasks are already waiting. */
int  serve_offload_submit(struct offload *o, offload_fn fn, void *arg);
void serve_offload_free(struct offload *o);

#endif
