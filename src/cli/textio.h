/* cli/textio.h - reading a whole text file (or stdin) for the commands that
 * take text: run -f, tokenize --file, eval --text, --chat-template. */
#ifndef COLIBRI_CLI_TEXTIO_H
#define COLIBRI_CLI_TEXTIO_H

#include <stddef.h>

#include "colibri.h"

/* The bytes of `path` ("-" = standard input) in a new malloc'd buffer with a
 * NUL after them, *len the byte count; NULL with errno set on failure. */
char *cli_read_text(const char *path, size_t *len);

/* --chat-template: reads the Jinja file at path into tok's chat template.
 * 0, or an error naming the file (unreadable, or a construct colibri's
 * interpreter refuses). path NULL: nothing to do. */
int cli_load_chat_template(colibri_tokenizer *tok, const char *path, struct colibri_err *err);

/* Renders msgs[0..n) with tok's chat template and the assistant prompt;
 * kwargs, the text of --chat-template-kwargs (a JSON object), gives the
 * template its variables (NULL: none, colibri_chat_render). *text as there. */
int cli_chat_render(const colibri_tokenizer *tok, const struct colibri_chat_msg *msgs, size_t n, const char *kwargs,
                    char **text, size_t *len, struct colibri_err *err);

#endif
