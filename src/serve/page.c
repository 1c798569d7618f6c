/* serve/page.c - what the build compiles in; see page.h. */
#include "serve/page.h"

#include "build_info.h"         /* generated: SERVE_BUILD_INFO */

const char *serve_page_build_info(void) { return SERVE_BUILD_INFO; }
