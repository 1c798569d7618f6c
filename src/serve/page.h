/* serve/page.h - what the build compiles into the server: the web chat page
 * (src/serve/chat_page.html, answered to GET /) and a description of the
 * build (commit, compiler, flags; GET /props shows it). Both are generated
 * into $(BUILD)/gen by the Makefile. Immutable; thread-safe. Internal to
 * src/serve/. */
#ifndef COLIBRI_SERVE_PAGE_H
#define COLIBRI_SERVE_PAGE_H

#include <stddef.h>

/* The page's bytes, *len of them (followed by a NUL). */
const char *serve_page_html(size_t *len);
/* "colibri <commit> (<compiler>; <flags>)". */
const char *serve_page_build_info(void);

#endif
