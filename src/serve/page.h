/* serve/page.h - what the build compiles into the server: a description of
 * the build (commit, compiler, flags; GET /props shows it), generated into
 * $(BUILD)/gen by the Makefile. Immutable; thread-safe. Internal to
 * src/serve/. */
#ifndef COLIBRI_SERVE_PAGE_H
#define COLIBRI_SERVE_PAGE_H

/* "colibri <commit> (<compiler>; <flags>)". */
const char *serve_page_build_info(void);

#endif
