/* serve/page.c - what the build compiles in; see page.h. */
#include "serve/page.h"

#include "build_info.h"         /* generated: SERVE_BUILD_INFO */
#include "chat_page.h"          /* generated: serve_chat_page[], the page and a NUL */

const char *serve_page_html(size_t *len)
{
    *len = sizeof serve_chat_page - 1;
    return (const char *)serve_chat_page;
}

const char *serve_page_build_info(void) { return SERVE_BUILD_INFO; }
