// --rpc, --rpc-token and --rpc-tls-ca: remote devices (loom rpc-server) for
// the commands that take devices. LOOM_RPC, LOOM_RPC_TOKEN and
// LOOM_RPC_TLS_CA give them when the flags do not; LOOM_RPC_TIMEOUT sets each call's deadline in seconds (default 60).
#pragma once

#include <vector>

#include "args.h"

namespace loom::cli {

std::vector<OptionSpec> rpc_option_specs();
// `specs` with the rpc options added.
std::vector<OptionSpec> with_rpc_options(std::vector<OptionSpec> specs);
// Adds the servers' devices to the registry as RPC0:..., RPC1:...; nothing
// when no server is named. Fails naming a server that does not answer.
void connect_rpc(const Args& args);

}  // namespace loom::cli
