/* cli/textio.h - reading a whole text file (or stdin) for the commands that
 * take text: run -f, tokenize --file, eval --text. */
#ifndef COLIBRI_CLI_TEXTIO_H
#define COLIBRI_CLI_TEXTIO_H

#include <stddef.h>

/* The bytes of `path` ("-" = standard input) in a new malloc'd buffer with a
 * NUL after them, *len the byte count; NULL with errno set on failure. */
char *cli_read_text(const char *path, size_t *len);

#endif
