// The loom subcommands. Each takes the arguments after its name and returns
// the process exit code.
#pragma once

namespace loom::cli {

int cmd_devices(int argc, char** argv);
int cmd_demo(int argc, char** argv);
int cmd_test_ops(int argc, char** argv);
int cmd_inspect(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_make_model(int argc, char** argv);
int cmd_quantize(int argc, char** argv);
int cmd_run(int argc, char** argv);
int cmd_eval(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_apply_template(int argc, char** argv);
int cmd_serve(int argc, char** argv);
int cmd_rpc_server(int argc, char** argv);
int cmd_fit(int argc, char** argv);

}  // namespace loom::cli
