/* cli/commands.h - one entry point per `colibri` subcommand. Each takes the
 * arguments after the subcommand name and returns the process exit status.
 * The CLI is the only place that prints for the user and decides exit codes. */
#ifndef COLIBRI_CLI_COMMANDS_H
#define COLIBRI_CLI_COMMANDS_H

int cmd_info(int argc, char **argv);
int cmd_oracle(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_kv(int argc, char **argv);
int cmd_trace(int argc, char **argv);

#endif
